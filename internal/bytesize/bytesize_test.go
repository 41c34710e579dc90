package bytesize

import "testing"

func TestSizeReadsWhatItWrites(t *testing.T) {
	for in, want := range map[string]uint64{
		"0": 0, "1000": 1000, "64MiB": 64 << 20, "512KiB": 512 << 10, "2GiB": 2 << 30, "1536KiB": 1536 << 10,
	} {
		var b Size
		if err := b.Set(in); err != nil {
			t.Fatalf("Set(%q): %v", in, err)
		}
		if uint64(b) != want {
			t.Errorf("Set(%q) = %d bytes, want %d", in, uint64(b), want)
		}
		var again Size
		if err := again.Set(b.String()); err != nil || again != b {
			t.Errorf("%q printed as %q, which reads back as %d (%v)", in, b.String(), uint64(again), err)
		}
	}
}

func TestSizeRefusesWhatIsNotOne(t *testing.T) {
	for _, in := range []string{"64MB", "-1MiB", "99999999999GiB", "", "1.5GiB"} {
		var b Size
		if err := b.Set(in); err == nil {
			t.Errorf("Set(%q) = %d, want an error", in, uint64(b))
		}
	}
}

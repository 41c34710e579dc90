package cursor

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"testing"
)

// aheadOf is the run of n sequences from first.
func aheadOf(first uint64, n int) Ahead {
	a := make(Ahead, n)
	for i := range a {
		a[i] = first + uint64(i)
	}
	return a
}

var aheadForms = map[string]Ahead{
	"empty":                nil,
	"one":                  {5},
	"zero":                 {0},
	"a run":                {1, 2, 3},
	"a byte's edge":        {8, 15, 16, 23, 24},
	"the widest span":      {7, 7 + WindowSize - 1},
	"a full window":        aheadOf(1<<40, WindowSize),
	"at the top of uint64": {math.MaxUint64 - 1, math.MaxUint64},
	"every other one, wide": slices.Collect(func(yield func(uint64) bool) {
		for s := uint64(100); s < 100+WindowSize; s += 2 {
			if !yield(s) {
				return
			}
		}
	}),
}

// TestAheadStoredFormRoundTrips: what appendAhead writes, readAhead reads
// back; the JSON form the kv store keeps carries the same bytes; a full
// window costs its bitmap's 512 bytes and its first member, not 4,096
// numbers.
func TestAheadStoredFormRoundTrips(t *testing.T) {
	for name, a := range aheadForms {
		b := appendAhead(nil, a)
		got, err := readAhead(b)
		if err != nil || !slices.Equal(got, a) {
			t.Errorf("%s: read back %v, %v", name, got, err)
		}
		if len(a) > 0 && len(b) > len(binary.AppendUvarint(nil, a[0]))+WindowSize/8 {
			t.Errorf("%s: %d bytes stored", name, len(b))
		}
		j, err := json.Marshal(a)
		if err != nil {
			t.Fatalf("%s: marshal: %v", name, err)
		}
		var back Ahead
		if err := json.Unmarshal(j, &back); err != nil || !slices.Equal(back, a) {
			t.Errorf("%s: JSON %s read back %v, %v", name, j, back, err)
		}
	}
	if b := appendAhead(nil, aheadForms["a full window"]); len(b) != 6+WindowSize/8 {
		t.Errorf("a full window from 1<<40 is %d bytes, want 518", len(b))
	}
	// A row without the field reads as no set.
	var r Registration
	if err := json.Unmarshal([]byte(`{"nextSeq":3}`), &r); err != nil || r.Ahead != nil {
		t.Errorf("a row without ahead = %v, %v", r.Ahead, err)
	}
}

// TestAheadStoredFormRefusesDamage: a stored set that cannot be what
// appendAhead wrote is an error, never a panic or a set that breaks the
// type's order.
func TestAheadStoredFormRefusesDamage(t *testing.T) {
	for name, b := range map[string][]byte{
		"a first member cut short":  {0x80},
		"no bitmap":                 {5},
		"a bitmap of no members":    {5, 0, 0},
		"a first member not in it":  {5, 0x02},
		"wider than any window":     append([]byte{5, 1}, make([]byte, WindowSize/8)...),
		"an overlong first member":  {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 1},
		"a bitmap past a cut short": {0x80, 0x80},
		// The last sequence and the one the bitmap says comes after it.
		"members past the last sequence": {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0x03},
	} {
		if a, err := readAhead(b); err == nil {
			t.Errorf("%s: read as %v", name, a)
		}
		var a Ahead
		j, _ := json.Marshal(base64.StdEncoding.EncodeToString(b))
		if err := json.Unmarshal(j, &a); err == nil {
			t.Errorf("%s: JSON read as %v", name, a)
		}
	}
	for _, j := range []string{`5`, `[1,2]`, `"not base64!"`, `{}`} {
		var a Ahead
		if err := json.Unmarshal([]byte(j), &a); err == nil {
			t.Errorf("JSON %s read as %v", j, a)
		}
	}
}

func TestAheadCheck(t *testing.T) {
	for _, a := range aheadForms {
		if len(a) > 0 {
			if err := a.Check(a[0]); err != nil {
				t.Errorf("%v from its first member: %v", a, err)
			}
		}
	}
	for _, c := range []struct {
		a    Ahead
		next uint64
		ok   bool
	}{
		{nil, 7, true},
		{Ahead{7, 8}, 7, true},
		{Ahead{8, 7 + WindowSize - 1}, 7, true},
		{Ahead{math.MaxUint64}, math.MaxUint64 - 1, true},
		{Ahead{6, 8}, 7, false},
		{Ahead{8, 7 + WindowSize}, 7, false},
		{Ahead{9, 8}, 7, false},
		{Ahead{8, 8}, 7, false},
		{Ahead{math.MaxUint64}, 1, false},
	} {
		err := c.a.Check(c.next)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrInvalidWindow)) {
			t.Errorf("%v.Check(%d) = %v, want ok %v", c.a, c.next, err, c.ok)
		}
	}
}

// FuzzAheadStoredForm: any bytes read as an error or as a set in
// ascending order, narrower than a window, that stores and reads back
// the same.
func FuzzAheadStoredForm(f *testing.F) {
	for _, a := range aheadForms {
		f.Add(appendAhead(nil, a))
	}
	f.Add([]byte{0x80})
	f.Add([]byte{5, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := readAhead(b)
		if err != nil {
			return
		}
		if len(a) == 0 {
			if len(b) != 0 {
				t.Fatalf("%x read as no set", b)
			}
			return
		}
		for i := 1; i < len(a); i++ {
			if a[i] <= a[i-1] {
				t.Fatalf("%x read as %v: not ascending at %d", b, a, i)
			}
		}
		if a[len(a)-1]-a[0] >= WindowSize {
			t.Fatalf("%x read as a set %d wide", b, a[len(a)-1]-a[0]+1)
		}
		again, err := readAhead(appendAhead(nil, a))
		if err != nil || !slices.Equal(again, a) {
			t.Fatalf("%v stored and read back as %v, %v", a, again, err)
		}
	})
}

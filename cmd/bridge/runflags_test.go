package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
)

// A bad setting stops `bridge run` before it touches the data directory,
// with exit code 2 and a sentence naming the flag.
func TestRunRefusesBadSettings(t *testing.T) {
	cleanEnv(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--flush-interval", "0s"}, "--flush-interval must be positive and at most 1m"},
		{[]string{"--flush-interval", "2m"}, "--flush-interval must be positive and at most 1m"},
		{[]string{"--max-in-flight", "0"}, "--max-in-flight must be at least 1"},
		{[]string{"--request-timeout", "-1s"}, "--request-timeout must be positive"},
		{[]string{"--heap-floor", "64MB"}, `"64MB" is not a size in bytes`},
		{[]string{"--heap-floor", "-1MiB"}, `"-1MiB" is not a size in bytes`},
		{[]string{"--heap-floor", "99999999999GiB"}, `"99999999999GiB" is not a size in bytes`},
	} {
		wantRunRefused(t, 2, tc.want, tc.args...)
	}
}

// wantRunRefused runs `bridge run args` on a fresh data directory and
// wants it to exit with code, saying want, and to leave the directory
// empty: nothing was started.
func wantRunRefused(t *testing.T, code int, want string, args ...string) {
	t.Helper()
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	full := append([]string{"--data-dir", dir, "--admin-listen", "127.0.0.1:0", "--embedded-listen", "127.0.0.1:0"}, args...)
	if got := cmdRun(context.Background(), full, &stdout, &stderr); got != code {
		t.Errorf("bridge run %v: exit %d, want %d (stderr %q)", args, got, code, stderr.String())
	}
	if !strings.Contains(stderr.String(), want) {
		t.Errorf("bridge run %v: stderr %q, want it to say %q", args, stderr.String(), want)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("bridge run %v left %d files in the data directory", args, len(left))
	}
}

func TestByteSizeReadsWhatItWrites(t *testing.T) {
	for in, want := range map[string]uint64{
		"0": 0, "1000": 1000, "64MiB": 64 << 20, "512KiB": 512 << 10, "2GiB": 2 << 30, "1536KiB": 1536 << 10,
	} {
		var b byteSize
		if err := b.Set(in); err != nil {
			t.Fatalf("Set(%q): %v", in, err)
		}
		if uint64(b) != want {
			t.Errorf("Set(%q) = %d bytes, want %d", in, uint64(b), want)
		}
		var again byteSize
		if err := again.Set(b.String()); err != nil || again != b {
			t.Errorf("%q printed as %q, which reads back as %d (%v)", in, b.String(), uint64(again), err)
		}
	}
}

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

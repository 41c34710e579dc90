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
	} {
		dir := t.TempDir()
		var stdout, stderr bytes.Buffer
		args := append([]string{"--data-dir", dir}, tc.args...)
		if code := cmdRun(context.Background(), args, &stdout, &stderr); code != 2 {
			t.Errorf("bridge run %v: exit %d, want 2 (stderr %q)", tc.args, code, stderr.String())
		}
		if !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("bridge run %v: stderr %q, want it to say %q", tc.args, stderr.String(), tc.want)
		}
		if left, _ := os.ReadDir(dir); len(left) != 0 {
			t.Errorf("bridge run %v left %d files in the data directory", tc.args, len(left))
		}
	}
}

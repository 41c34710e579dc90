package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/jetstream-bridge/bridge/bridge"
	"github.com/jetstream-bridge/bridge/daemon"
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

// Every daemon.Config field a flag sets has that flag in runFlagNames, so
// no daemon error reaches an operator naming a Go field.
func TestEveryConfigFieldHasItsFlag(t *testing.T) {
	fs, _ := runFlags(io.Discard)
	names := runFlagNames()
	hostOnly := map[string]bool{"Registerer": true, "Conn": true, "TracerProvider": true, "Version": true}
	for f := range reflect.TypeFor[daemon.Config]().Fields() {
		name, ok := names[f.Name]
		switch {
		case hostOnly[f.Name]:
			if ok {
				t.Errorf("%s, which only a program can give, has flag --%s", f.Name, name)
			}
		case !ok:
			t.Errorf("Config.%s has no flag in runFlagNames", f.Name)
		case fs.Lookup(name) == nil:
			t.Errorf("Config.%s maps to --%s, which bridge run does not have", f.Name, name)
		}
	}
}

// --max-in-flight bounds the POSTs of the whole bridge (CONTRACT §12),
// and defaults to the engine's own bound.
func TestMaxInFlightIsTheBridgesBound(t *testing.T) {
	fs, _ := runFlags(io.Discard)
	f := fs.Lookup("max-in-flight")
	if f.DefValue != strconv.Itoa(bridge.DefaultMaxInFlight) {
		t.Errorf("--max-in-flight defaults to %s, want bridge.DefaultMaxInFlight %d", f.DefValue, bridge.DefaultMaxInFlight)
	}
	if !strings.Contains(f.Usage, "POSTs of the whole bridge") || !strings.Contains(f.Usage, "without ordering takes one") {
		t.Errorf("--max-in-flight says %q", f.Usage)
	}
}

package runflags

import (
	"flag"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jetstream-bridge/bridge/bridge"
)

func TestParseEnvironment(t *testing.T) {
	cleanEnv(t)
	newSet := func() (*flag.FlagSet, *string, *int, *time.Duration, *bool) {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		return fs, fs.String("data-dir", "./bridge-data", ""), fs.Int("max-in-flight", bridge.DefaultMaxInFlight, ""),
			fs.Duration("request-timeout", 15*time.Second, ""), fs.Bool("create-stream", false, "")
	}
	t.Setenv("BRIDGE_DATA_DIR", "/from/env")
	t.Setenv("BRIDGE_MAX_IN_FLIGHT", "4")
	t.Setenv("BRIDGE_CREATE_STREAM", "true")

	fs, dir, inFlight, timeout, create := newSet()
	if err := Parse(fs, []string{"--data-dir", "/from/flag", "arg"}); err != nil {
		t.Fatal(err)
	}
	if *dir != "/from/flag" || *inFlight != 4 || *timeout != 15*time.Second || !*create {
		t.Errorf("got data-dir %q max-in-flight %d request-timeout %v create-stream %v; want the flag, env, default, env",
			*dir, *inFlight, *timeout, *create)
	}
	if got := fs.Args(); len(got) != 1 || got[0] != "arg" {
		t.Errorf("positional args %v, want [arg]", got)
	}

	// An explicit false on the command line beats a true in the environment.
	fs, _, _, _, create = newSet()
	if err := Parse(fs, []string{"--create-stream=false"}); err != nil || *create {
		t.Errorf("--create-stream=false with BRIDGE_CREATE_STREAM=true: %v, err %v", *create, err)
	}

	t.Setenv("BRIDGE_REQUEST_TIMEOUT", "fortnight")
	fs, _, _, _, _ = newSet()
	err := Parse(fs, nil)
	if err == nil || !strings.Contains(err.Error(), "BRIDGE_REQUEST_TIMEOUT") || !strings.Contains(err.Error(), "--request-timeout") {
		t.Errorf("bad env value: err %v, want it to name BRIDGE_REQUEST_TIMEOUT and --request-timeout", err)
	}
}

func TestEnvName(t *testing.T) {
	for flagName, want := range map[string]string{
		"data-dir":                "BRIDGE_DATA_DIR",
		"admin-token":             "BRIDGE_ADMIN_TOKEN",
		"a2a-allow-loopback":      "BRIDGE_A2A_ALLOW_LOOPBACK",
		"idempotency-key-max-age": "BRIDGE_IDEMPOTENCY_KEY_MAX_AGE",
	} {
		if got := EnvName(flagName); got != want {
			t.Errorf("EnvName(%q) = %q, want %q", flagName, got, want)
		}
	}
}

// cleanEnv hides the caller's BRIDGE_* and NATS_URL variables, so a test
// sees only the environment it sets.
func cleanEnv(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, EnvPrefix) || name == "NATS_URL" {
			t.Setenv(name, "")
		}
	}
}

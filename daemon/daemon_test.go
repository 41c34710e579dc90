package daemon_test

import (
	"context"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jetstream-bridge/bridge/bridgetest"
	"github.com/jetstream-bridge/bridge/daemon"
)

// A host's registry gets the bridge's metrics while it runs and loses
// them when it stops; a second bridge in the same registry is refused by
// name instead of panicking, and leaves the host's connection open.
func TestTheHostRegistryHoldsTheBridgesMetricsWhileItRuns(t *testing.T) {
	reg := prometheus.NewRegistry()
	t.Run("running", func(t *testing.T) {
		env := bridgetest.New(t, bridgetest.WithConfig(func(c *daemon.Config) { c.Registerer = reg }))
		if !gathered(t, reg, "bridge_registrations") {
			t.Error("bridge_registrations is not in the host's registry")
		}
		cfg := daemon.DefaultConfig()
		cfg.DataDir, cfg.AdminListen, cfg.HeapFloor = t.TempDir(), "127.0.0.1:0", 0
		cfg.Conn, cfg.Registerer = env.Conn(), reg
		err := daemon.Run(t.Context(), cfg)
		var ce *daemon.ConfigError
		if !errors.As(err, &ce) || ce.Field != "Registerer" {
			t.Errorf("a second bridge in the registry: %v, want a ConfigError of Registerer", err)
		}
		if !env.Conn().IsConnected() {
			t.Error("the bridge closed the connection it was given")
		}
	})
	if gathered(t, reg, "bridge_registrations") {
		t.Error("the stopped bridge's metrics are still in the host's registry")
	}
}

func gathered(t *testing.T, g prometheus.Gatherer, name string) bool {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			return true
		}
	}
	return false
}

// A Daemon runs once: its data directory and listeners are its first
// run's.
func TestRunTwiceIsRefused(t *testing.T) {
	cfg := daemon.DefaultConfig()
	cfg.DataDir, cfg.EmbeddedListen, cfg.AdminListen, cfg.HeapFloor = t.TempDir(), "127.0.0.1:0", "127.0.0.1:0", 0
	d, err := daemon.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_ = d.Run(ctx)
	if err := d.Run(t.Context()); !errors.Is(err, daemon.ErrRunTwice) {
		t.Errorf("second Run: %v, want ErrRunTwice", err)
	}
}

package daemon

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// A bad field is refused by New with a *ConfigError naming it, and its
// Message names it as the caller calls it.
func TestNewRefusesBadFieldsByName(t *testing.T) {
	for _, tc := range []struct {
		set   func(*Config)
		field string
		want  string
	}{
		{func(c *Config) { c.FlushInterval = 0 }, "FlushInterval", "FlushInterval must be positive and at most 1m"},
		{func(c *Config) { c.MaxInFlight = 0 }, "MaxInFlight", "MaxInFlight must be at least 1"},
		{func(c *Config) { c.Stream = "a.b" }, "Stream", `Stream "a.b" is not a valid stream name`},
		{func(c *Config) { c.Store = "etcd" }, "Store", `Store must be bolt or kv, got "etcd"`},
		{func(c *Config) { c.EmbeddedRoutes = []string{"nats://h:1"} }, "EmbeddedRoutes", "EmbeddedRoutes needs EmbeddedCluster"},
		{func(c *Config) { c.NATSTLSCert = "c.pem" }, "NATSTLSCert", "NATSTLSCert and NATSTLSKey go together"},
		{func(c *Config) { c.Conn, c.NATSURL = &nats.Conn{}, "nats://h:4222" }, "NATSURL", "NATSURL is set beside Conn"},
		{func(c *Config) { c.EventsPrefix = "bridge.attempts.x" }, "EventsPrefix", "lies under the attempt log's subjects"},
		{func(c *Config) { c.Store, c.LeaseTTL = "kv", time.Millisecond }, "LeaseTTL", "LeaseTTL must be at least 1s"},
	} {
		c := DefaultConfig()
		tc.set(&c)
		_, err := New(c)
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New: %v, want a ConfigError of %s saying %q", err, tc.field, tc.want)
			continue
		}
		flag := ce.Message(func(f string) string { return "--" + strings.ToLower(f) })
		if strings.Contains(flag, tc.field) {
			t.Errorf("Message still names %s: %q", tc.field, flag)
		}
	}
}

// The defaults are valid as they stand: `bridge run` with no flags.
func TestDefaultConfigIsValid(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

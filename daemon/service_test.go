package daemon_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/jetstream-bridge/bridge/bridgetest"
	"github.com/jetstream-bridge/bridge/daemon"
)

// request asks subject on nc and decodes the answer into v; it returns
// nats.ErrNoResponders when nothing listens.
func request(t *testing.T, nc *nats.Conn, subject string, v any) error {
	t.Helper()
	msg, err := nc.Request(subject, nil, 2*time.Second)
	if err != nil {
		return err
	}
	if code := msg.Header.Get(micro.ErrorCodeHeader); code != "" {
		t.Fatalf("%s answered error %s: %s", subject, code, msg.Header.Get(micro.ErrorHeader))
	}
	if err := json.Unmarshal(msg.Data, v); err != nil {
		t.Fatalf("%s answered %q: %v", subject, msg.Data, err)
	}
	return nil
}

// The bridge registers as the jetstream-bridge service with its instance
// and version in the metadata; its status endpoint counts what the admin
// API lists, a parked registration among them.
func TestServiceAnswersInfoAndStatus(t *testing.T) {
	env := bridgetest.New(t, bridgetest.WithConfig(func(c *daemon.Config) {
		c.Instance, c.Version, c.MaxAttempts = "unit-7", "v1.4.0", 1
	}))
	failing := env.Receiver(bridgetest.Response{Status: http.StatusInternalServerError})
	ok := env.Receiver()
	env.Register(ok.Outbox("journal.a.>"))
	parked := failing.Outbox("journal.b.>")
	parked.ID = "parks"
	env.Register(parked)
	env.Publish("journal.b.1", []byte(`{}`))
	env.Eventually("the failing registration to park", func() bool { return env.Registration("parks").State == "parked" })

	var info micro.Info
	if err := request(t, env.Conn(), "$SRV.INFO."+daemon.ServiceName, &info); err != nil {
		t.Fatal(err)
	}
	if info.Name != daemon.ServiceName || info.Version != "1.4.0" ||
		info.Metadata["instance"] != "unit-7" || info.Metadata["version"] != "v1.4.0" || info.Metadata["store"] != "bolt" || info.Metadata["stream"] != "JOURNAL" {
		t.Errorf("info: %+v", info.ServiceIdentity)
	}
	if len(info.Endpoints) != 1 || info.Endpoints[0].Name != "status" || info.Endpoints[0].Subject != "bridge.status.unit-7" {
		t.Errorf("endpoints: %+v, want status on bridge.status.unit-7", info.Endpoints)
	}
	var st daemon.Status
	if err := request(t, env.Conn(), daemon.StatusSubject("unit-7"), &st); err != nil {
		t.Fatal(err)
	}
	want := daemon.Status{Instance: "unit-7", Version: "v1.4.0", Store: "bolt", Registrations: 2, Parked: 1, Leases: 0}
	if st != want {
		t.Errorf("status %+v, want %+v", st, want)
	}
}

// NATSService false registers nothing; a service on the host's own
// connection answers while the daemon runs and is gone once Run returns,
// the connection still open.
func TestServiceOffAndStoppedWithTheDaemon(t *testing.T) {
	env := bridgetest.New(t, bridgetest.WithConfig(func(c *daemon.Config) { c.NATSService = false }))
	var ping micro.Ping
	if err := request(t, env.Conn(), "$SRV.PING."+daemon.ServiceName, &ping); !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("ping with NATSService false: %v %+v, want no responders", err, ping)
	}

	cfg := daemon.DefaultConfig()
	cfg.DataDir, cfg.AdminListen, cfg.HeapFloor, cfg.Instance = t.TempDir(), "127.0.0.1:0", 0, "hosted"
	cfg.Conn = env.Conn()
	d, err := daemon.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	select {
	case <-d.Ready():
	case err := <-done:
		t.Fatalf("Run: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the daemon did not start within 30s")
	}
	if err := request(t, env.Conn(), "$SRV.PING."+daemon.ServiceName, &ping); err != nil || ping.Metadata["instance"] != "hosted" {
		t.Fatalf("ping: %v %+v", err, ping.ServiceIdentity)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the daemon did not stop within 30s")
	}
	if err := request(t, env.Conn(), daemon.StatusSubject("hosted"), &ping); !errors.Is(err, nats.ErrNoResponders) {
		t.Errorf("status after Run returned: %v, want no responders", err)
	}
	if !env.Conn().IsConnected() {
		t.Error("the daemon closed the host's connection")
	}
}

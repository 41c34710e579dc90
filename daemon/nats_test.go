package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetstream-bridge/bridge/internal/testutil"
)

// Three bridges' embedded servers, given each other's routes, form one
// JetStream cluster: a stream of three replicas created through one is
// placed on all three and readable through another.
func TestEmbeddedServersFormOneCluster(t *testing.T) {
	ports := testutil.FreePorts(t, 6)
	routes := make([]string, 3)
	for i := range routes {
		routes[i] = fmt.Sprintf("nats://127.0.0.1:%d", ports[3+i])
	}
	servers := make([]*server.Server, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range servers {
		c := embeddedConfig(t, func(c *Config) {
			c.EmbeddedListen = fmt.Sprintf("127.0.0.1:%d", ports[i])
			c.EmbeddedCluster = fmt.Sprintf("127.0.0.1:%d", ports[3+i])
			c.EmbeddedRoutes, c.EmbeddedName = routes, fmt.Sprintf("b%d", i+1)
		})
		wg.Go(func() { servers[i], errs[i] = startEmbedded(c, slog.New(slog.DiscardHandler)) })
	}
	wg.Wait()
	for i, ns := range servers {
		if ns != nil {
			t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
		}
		if errs[i] != nil {
			t.Fatalf("embedded server b%d: %v", i+1, errs[i])
		}
		if !ns.JetStreamIsCurrent() {
			t.Errorf("startEmbedded returned b%d before it followed a JetStream meta leader", i+1)
		}
	}

	js := testutil.JetStream(t, servers[0].ClientURL())
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "R3", Subjects: []string{"r3.>"}, Replicas: 3})
	if err != nil {
		t.Fatalf("an R3 stream on the embedded cluster: %v", err)
	}
	if _, err := js.Publish(ctx, "r3.a", []byte("one")); err != nil {
		t.Fatal(err)
	}
	other := testutil.JetStream(t, servers[2].ClientURL())
	s, err := other.Stream(ctx, "R3")
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Cluster == nil || info.Cluster.Name != embeddedClusterName || info.Cluster.Leader == "" || len(info.Cluster.Replicas) != 2 {
		t.Fatalf("R3 stream's cluster: %+v, want cluster %q with a leader and two replicas", info.Cluster, embeddedClusterName)
	}
	if msg, err := s.GetMsg(ctx, 1); err != nil || string(msg.Data) != "one" {
		t.Fatalf("message 1 read through b3: %v %v", msg, err)
	}
}

// A server whose routes lead nowhere never gets a meta leader: the wait
// says so in the log while it lasts and ends with an error naming the
// flag to check, not with a bridge whose JetStream calls all time out.
func TestEmbeddedClusterWaitIsBoundedAndSaysWhy(t *testing.T) {
	ports := testutil.FreePorts(t, 4)
	c := embeddedConfig(t, func(c *Config) {
		c.EmbeddedListen = fmt.Sprintf("127.0.0.1:%d", ports[3])
		c.EmbeddedCluster = fmt.Sprintf("127.0.0.1:%d", ports[0])
		c.EmbeddedRoutes = []string{fmt.Sprintf("nats://127.0.0.1:%d", ports[1]), fmt.Sprintf("nats://127.0.0.1:%d", ports[2])}
	})
	opts, err := embeddedServerOptions(c)
	if err != nil {
		t.Fatal(err)
	}
	opts.NoLog = true
	ns, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not listening")
	}
	var logs testutil.SyncBuffer
	err = waitClusterReady(ns, time.Second, slog.New(slog.NewTextHandler(&logs, nil)))
	if err == nil || !strings.Contains(err.Error(), "no meta leader within 1s") || !strings.Contains(err.Error(), "EmbeddedRoutes") {
		t.Fatalf("waitClusterReady with no peers: %v, want the bound and EmbeddedRoutes named", err)
	}
	if !strings.Contains(logs.String(), "waiting for the embedded JetStream cluster to elect a meta leader") {
		t.Errorf("the wait logged %q, want its reason", logs.String())
	}
}

// embeddedConfig is the default configuration over a fresh data
// directory, changed by set and validated.
func embeddedConfig(t *testing.T, set func(*Config)) *Config {
	t.Helper()
	c := DefaultConfig()
	c.DataDir = t.TempDir()
	set(&c)
	c = c.withDerived()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	return &c
}

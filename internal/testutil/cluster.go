package testutil

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// clusterReady bounds every wait for a cluster to form or re-form: meta
// elections take seconds, a cluster not ready after this is broken.
const clusterReady = 30 * time.Second

// NATSCluster is a JetStream cluster of embedded nats-servers on
// loopback, joined by routes, for tests of what several bridges do on
// one cluster and of what they survive when a node dies.
type NATSCluster struct {
	t       testing.TB
	Servers []*server.Server // nil while stopped
	dirs    []string
	ports   []int // client ports, kept across restarts so clients reconnect
	routes  []int // cluster (route) ports
}

// Cluster starts n servers with JetStream, each with its store in its own
// t.TempDir(), and returns once the JetStream meta leader is elected and
// every server sees all peers; they stop when the test ends.
func Cluster(t testing.TB, n int) *NATSCluster {
	t.Helper()
	if n < 1 {
		t.Fatalf("Cluster: n = %d, want at least 1", n)
	}
	ports := freePorts(t, 2*n)
	c := &NATSCluster{t: t, Servers: make([]*server.Server, n), dirs: make([]string, n),
		ports: ports[:n], routes: ports[n:]}
	for i := range n {
		c.dirs[i] = t.TempDir()
	}
	t.Cleanup(c.stopAll) // before the stores are removed: cleanups run last first
	for i := range n {
		c.start(i)
	}
	c.waitReady()
	return c
}

// freePorts finds n distinct free loopback ports below the kernel's
// ephemeral range (32768 up on Linux), where the connections servers dial
// and the ports other tests let the kernel choose cannot land on them
// between the check and the server's listen. JetStream clustering needs
// every route known before the servers start, so the servers cannot
// choose their own.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	ports := make([]int, 0, n)
	for tries := 0; len(ports) < n; tries++ {
		if tries > 1000 {
			t.Fatalf("no %d free loopback ports in [%d, %d)", n, portsFrom, portsTo)
		}
		p := portsFrom + rand.IntN(portsTo-portsFrom)
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil || slices.Contains(ports, p) {
			continue
		}
		l.Close()
		ports = append(ports, p)
	}
	return ports
}

const portsFrom, portsTo = 20000, 32768

// FreePorts returns n distinct free loopback ports, chosen as the
// cluster's are, for servers that must know each other's ports before
// any of them starts.
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	return freePorts(t, n)
}

// start starts node i, on new ports if its own turn out to be taken
// (another process's listener), at most three times.
func (c *NATSCluster) start(i int) {
	c.t.Helper()
	for try := 1; ; try++ {
		srv, err := server.NewServer(c.options(i))
		if err != nil {
			c.t.Fatalf("nats-server %d: %v", i+1, err)
		}
		srv.Start()
		if srv.ReadyForConnections(clusterReady / 3) {
			c.Servers[i] = srv
			return
		}
		srv.Shutdown()
		srv.WaitForShutdown()
		if try == 3 {
			c.t.Fatalf("nats-server %d did not accept connections within %v, three times", i+1, clusterReady/3)
		}
		p := freePorts(c.t, 2)
		c.ports[i], c.routes[i] = p[0], p[1]
	}
}

func (c *NATSCluster) options(i int) *server.Options {
	routes := make([]string, len(c.routes))
	for j, p := range c.routes {
		routes[j] = fmt.Sprintf("nats-route://127.0.0.1:%d", p)
	}
	return &server.Options{
		ServerName: fmt.Sprintf("S-%d", i+1),
		Host:       "127.0.0.1",
		Port:       c.ports[i],
		JetStream:  true,
		StoreDir:   c.dirs[i],
		NoLog:      true,
		NoSigs:     true,
		Cluster:    server.ClusterOpts{Name: "bridge-test", Host: "127.0.0.1", Port: c.routes[i]},
		Routes:     server.RoutesFromStr(strings.Join(routes, ",")),
	}
}

// ClientURLs lists every node's client URL, comma-separated, for
// nats.Connect: a client reconnects to a live node when one dies.
func (c *NATSCluster) ClientURLs() string {
	urls := make([]string, len(c.ports))
	for i, p := range c.ports {
		urls[i] = fmt.Sprintf("nats://127.0.0.1:%d", p)
	}
	return strings.Join(urls, ",")
}

// JetStream connects to urls (one server's or ClientURLs) and closes the
// connection when the test ends. It reconnects without limit, quickly, so
// a client follows a cluster through the loss of the node it was on.
func JetStream(t testing.TB, urls string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(urls, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatalf("connect %s: %v", urls, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	return js
}

// Stop shuts node i down, keeping its store for Restart.
func (c *NATSCluster) Stop(i int) {
	c.t.Helper()
	if srv := c.Servers[i]; srv != nil {
		srv.Shutdown()
		srv.WaitForShutdown()
		c.Servers[i] = nil
	}
}

// Restart brings node i back on its store and ports and waits until the
// cluster is whole again.
func (c *NATSCluster) Restart(i int) {
	c.t.Helper()
	c.Stop(i)
	c.start(i)
	c.waitReady()
}

// Leader returns the index of the JetStream meta leader, -1 if none.
func (c *NATSCluster) Leader() int {
	for i, srv := range c.Servers {
		if srv != nil && srv.JetStreamIsLeader() {
			return i
		}
	}
	return -1
}

// Index returns the index of the node named name (a stream's
// ClusterInfo.Leader), -1 if none.
func (c *NATSCluster) Index(name string) int {
	for i, srv := range c.Servers {
		if srv != nil && srv.Name() == name {
			return i
		}
	}
	return -1
}

// StreamLeader returns the index of the node leading stream, failing the
// test when the stream cannot be read or its leader is none of the nodes.
func (c *NATSCluster) StreamLeader(stream string) int {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := JetStream(c.t, c.ClientURLs()).Stream(ctx, stream)
	if err != nil {
		c.t.Fatalf("stream %s: %v", stream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		c.t.Fatalf("stream %s: %v", stream, err)
	}
	i := c.Index(info.Cluster.Leader)
	if i < 0 {
		c.t.Fatalf("stream %s: leader %q is none of the cluster's nodes", stream, info.Cluster.Leader)
	}
	return i
}

// waitReady returns once a meta leader sees every running server as a
// JetStream peer and every running server is current with the meta group.
func (c *NATSCluster) waitReady() {
	c.t.Helper()
	running := 0
	for _, srv := range c.Servers {
		if srv != nil {
			running++
		}
	}
	deadline := time.Now().Add(clusterReady)
	for time.Now().Before(deadline) {
		if c.ready(running) {
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
	c.t.Fatalf("NATS cluster of %d servers: no JetStream meta leader seeing every peer within %v", running, clusterReady)
}

func (c *NATSCluster) ready(running int) bool {
	l := c.Leader()
	if l < 0 || len(c.Servers[l].JetStreamClusterPeers()) != running {
		return false
	}
	for _, srv := range c.Servers {
		if srv != nil && !srv.JetStreamIsCurrent() {
			return false
		}
	}
	return true
}

func (c *NATSCluster) stopAll() {
	for i := range c.Servers {
		c.Stop(i)
	}
}

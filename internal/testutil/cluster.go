package testutil

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
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
	ports   []int // client ports, fixed after the first start so clients reconnect
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
	c := &NATSCluster{t: t, Servers: make([]*server.Server, n), dirs: make([]string, n),
		ports: make([]int, n), routes: freePorts(t, n)}
	t.Cleanup(c.stopAll)
	for i := range n {
		c.dirs[i] = t.TempDir()
		c.ports[i] = -1
		c.start(i)
	}
	c.waitReady()
	return c
}

// freePorts reserves n distinct loopback ports and frees them for the
// servers' route listeners. JetStream clustering needs every route known
// before the servers start, so the ports cannot be left to the servers.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("free port: %v", err)
		}
		defer l.Close()
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports
}

func (c *NATSCluster) start(i int) {
	c.t.Helper()
	routes := make([]string, len(c.routes))
	for j, p := range c.routes {
		routes[j] = fmt.Sprintf("nats-route://127.0.0.1:%d", p)
	}
	srv, err := server.NewServer(&server.Options{
		ServerName: fmt.Sprintf("S-%d", i+1),
		Host:       "127.0.0.1",
		Port:       c.ports[i],
		JetStream:  true,
		StoreDir:   c.dirs[i],
		NoLog:      true,
		NoSigs:     true,
		Cluster:    server.ClusterOpts{Name: "bridge-test", Host: "127.0.0.1", Port: c.routes[i]},
		Routes:     server.RoutesFromStr(strings.Join(routes, ",")),
	})
	if err != nil {
		c.t.Fatalf("nats-server %d: %v", i+1, err)
	}
	srv.Start()
	if !srv.ReadyForConnections(clusterReady) {
		c.t.Fatalf("nats-server %d did not accept connections within %v", i+1, clusterReady)
	}
	c.ports[i] = srv.Addr().(*net.TCPAddr).Port
	c.Servers[i] = srv
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

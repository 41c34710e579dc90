package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetstream-bridge/bridge/internal/testutil"
)

// natsCluster is a JetStream cluster of real nats-server processes on
// loopback, so a node can be killed with SIGKILL as a machine dies: no
// shutdown, no leadership handed over.
type natsCluster struct {
	t     *testing.T
	nodes []*natsNode
}

// natsNode is one server of a natsCluster. Its ports and store are kept
// across restarts, so clients and peers find it again.
type natsNode struct {
	name                string
	client, route, http int
	dir                 string
	cmd                 *exec.Cmd
	exited              chan struct{}
}

// clusterSettle bounds every wait for the cluster to form or to elect:
// elections take seconds, a cluster not settled after this is broken.
const clusterSettle = 30 * time.Second

// startNATSCluster starts n servers and returns once they agree on a
// JetStream meta leader that every one of them follows.
func startNATSCluster(t *testing.T, n int) *natsCluster {
	t.Helper()
	ports := testutil.FreePorts(t, 3*n)
	c := &natsCluster{t: t}
	routes := make([]string, n)
	for i := range n {
		c.nodes = append(c.nodes, &natsNode{name: fmt.Sprintf("n%d", i+1), client: ports[i],
			route: ports[n+i], http: ports[2*n+i], dir: t.TempDir()})
		routes[i] = fmt.Sprintf("nats-route://127.0.0.1:%d", ports[n+i])
	}
	for _, nd := range c.nodes {
		nd.writeConfig(t, routes)
	}
	t.Cleanup(func() {
		for i := range c.nodes {
			c.kill9(i)
		}
		if t.Failed() {
			for _, nd := range c.nodes {
				log, _ := os.ReadFile(filepath.Join(nd.dir, "nats-server.log"))
				t.Logf("nats-server %s log (last 8 KiB):\n%s", nd.name, lastBytes(string(log), 8<<10))
			}
		}
	})
	for _, nd := range c.nodes {
		nd.start(t)
	}
	c.waitSettled()
	return c
}

func (nd *natsNode) writeConfig(t *testing.T, routes []string) {
	t.Helper()
	conf := fmt.Sprintf(`server_name: %s
listen: 127.0.0.1:%d
http: 127.0.0.1:%d
logfile: %q
jetstream { store_dir: %q }
cluster { name: e2e, listen: 127.0.0.1:%d, routes: [%s] }
`, nd.name, nd.client, nd.http, filepath.Join(nd.dir, "nats-server.log"), filepath.Join(nd.dir, "js"),
		nd.route, strings.Join(routes, ", "))
	if err := os.WriteFile(filepath.Join(nd.dir, "nats.conf"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
}

func (nd *natsNode) start(t *testing.T) {
	t.Helper()
	nd.cmd = exec.Command(bin.natsServer, "-c", filepath.Join(nd.dir, "nats.conf"))
	if err := nd.cmd.Start(); err != nil {
		t.Fatalf("nats-server %s: %v", nd.name, err)
	}
	exited := make(chan struct{})
	nd.exited = exited
	go func(cmd *exec.Cmd) { _ = cmd.Wait(); close(exited) }(nd.cmd)
	addr := fmt.Sprintf("127.0.0.1:%d", nd.client)
	waitFor(t, 10*time.Second, "nats-server "+nd.name+" to listen", func() bool {
		select {
		case <-exited:
			t.Fatalf("nats-server %s exited while starting", nd.name)
		default:
		}
		conn, err := (&netDialer{}).dial(addr)
		if err == nil {
			conn.Close()
		}
		return err == nil
	})
}

func (nd *natsNode) running() bool {
	if nd.exited == nil {
		return false
	}
	select {
	case <-nd.exited:
		return false
	default:
		return true
	}
}

// urls lists every node's client URL, comma-separated: a client whose
// node dies reconnects to another.
func (c *natsCluster) urls() string {
	urls := make([]string, len(c.nodes))
	for i, nd := range c.nodes {
		urls[i] = fmt.Sprintf("nats://127.0.0.1:%d", nd.client)
	}
	return strings.Join(urls, ",")
}

// kill9 ends node i with SIGKILL; a node already down is left alone.
func (c *natsCluster) kill9(i int) {
	nd := c.nodes[i]
	if !nd.running() {
		return
	}
	_ = nd.cmd.Process.Kill()
	<-nd.exited
}

// restart starts node i again on its store and ports and waits until
// the cluster has settled with it.
func (c *natsCluster) restart(i int) {
	c.t.Helper()
	c.kill9(i)
	c.nodes[i].start(c.t)
	c.waitSettled()
}

// waitSettled returns once every running node names one meta leader, a
// running one, that sees every running node as current.
func (c *natsCluster) waitSettled() {
	c.t.Helper()
	waitFor(c.t, clusterSettle, "the NATS cluster to agree on a JetStream meta leader", c.settled)
}

// metaCluster is the part of a server's /jsz the cluster's state is read
// from.
type metaCluster struct {
	Leader   string `json:"leader"`
	Replicas []struct {
		Name    string `json:"name"`
		Current bool   `json:"current"`
	} `json:"replicas"`
}

func (c *natsCluster) settled() bool {
	leader := ""
	for _, nd := range c.nodes {
		if !nd.running() {
			continue
		}
		m, err := nd.meta()
		if err != nil || m.Leader == "" || (leader != "" && m.Leader != leader) {
			return false
		}
		leader = m.Leader
	}
	li := c.index(leader)
	if li < 0 || !c.nodes[li].running() {
		return false
	}
	m, err := c.nodes[li].meta()
	if err != nil {
		return false
	}
	for _, r := range m.Replicas {
		if i := c.index(r.Name); i >= 0 && c.nodes[i].running() && !r.Current {
			return false
		}
	}
	return true
}

func (nd *natsNode) meta() (metaCluster, error) {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/jsz", nd.http))
	if err != nil {
		return metaCluster{}, err
	}
	defer resp.Body.Close()
	var jsz struct {
		Meta metaCluster `json:"meta_cluster"`
	}
	err = json.NewDecoder(resp.Body).Decode(&jsz)
	return jsz.Meta, err
}

// index is the node named name (a leader as stream info gives it), -1
// for none.
func (c *natsCluster) index(name string) int {
	return slices.IndexFunc(c.nodes, func(nd *natsNode) bool { return nd.name == name })
}

// streamLeader is the running node leading stream, once the stream has
// elected one there.
func (c *natsCluster) streamLeader(js jetstream.JetStream, stream string) int {
	c.t.Helper()
	leader := -1
	waitFor(c.t, clusterSettle, "a leader of stream "+stream, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		s, err := js.Stream(ctx, stream)
		if err != nil {
			return false
		}
		info, err := s.Info(ctx)
		if err != nil || info.Cluster == nil {
			return false
		}
		leader = c.index(info.Cluster.Leader)
		return leader >= 0 && c.nodes[leader].running()
	})
	return leader
}

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
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
// JetStream meta leader that every one of them follows. The ports are
// chosen before any server starts, since each must know the others'
// routes; one taken meanwhile by another process (tests of other
// packages choose theirs in the same range) makes a server exit, and the
// cluster starts again on new ports, at most three times.
func startNATSCluster(t *testing.T, n int) *natsCluster {
	t.Helper()
	c := &natsCluster{t: t}
	t.Cleanup(func() {
		for i := range c.nodes {
			c.kill9(i)
		}
		if t.Failed() {
			for _, nd := range c.nodes {
				log, _ := os.ReadFile(filepath.Join(nd.dir, "nats-server.log"))
				if dir := os.Getenv("BRIDGE_E2E_LOGS"); dir != "" {
					_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("nats-%s-%d.log", nd.name, nd.client)), log, 0o644)
				}
				t.Logf("nats-server %s log (last 8 KiB):\n%s", nd.name, lastBytes(string(log), 8<<10))
			}
		}
	})
	for try := 1; ; try++ {
		c.nodes = newNATSNodes(t, n)
		if c.boot() {
			return c
		}
		for i := range c.nodes {
			c.kill9(i)
		}
		if try == 3 {
			t.Fatal("three NATS clusters in a row lost a port to another process")
		}
		t.Log("a nats-server's port was taken by another process; starting the cluster again on new ports")
	}
}

// newNATSNodes chooses the ports of n servers and writes their
// configurations.
func newNATSNodes(t *testing.T, n int) []*natsNode {
	t.Helper()
	ports := testutil.FreePorts(t, 3*n)
	nodes := make([]*natsNode, n)
	routes := make([]string, n)
	for i := range n {
		nodes[i] = &natsNode{name: fmt.Sprintf("n%d", i+1), client: ports[i],
			route: ports[n+i], http: ports[2*n+i], dir: t.TempDir()}
		routes[i] = fmt.Sprintf("nats-route://127.0.0.1:%d", ports[n+i])
	}
	for _, nd := range nodes {
		nd.writeConfig(t, routes)
	}
	return nodes
}

// boot starts every node and waits until the cluster has settled; false
// when a node exited because one of its ports was taken.
func (c *natsCluster) boot() bool {
	c.t.Helper()
	for _, nd := range c.nodes {
		if !nd.launch(c.t) {
			return false
		}
	}
	deadline := time.Now().Add(clusterSettle)
	for !c.settled() {
		for _, nd := range c.nodes {
			if !nd.running() {
				if nd.lostPort() {
					return false
				}
				c.t.Fatalf("nats-server %s exited while the cluster formed", nd.name)
			}
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("timed out after %v waiting for the NATS cluster to agree on a JetStream meta leader", clusterSettle)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}

// lostPort reports that the node's log says a port it was to listen on
// was taken.
func (nd *natsNode) lostPort() bool {
	log, _ := os.ReadFile(filepath.Join(nd.dir, "nats-server.log"))
	return strings.Contains(string(log), "address already in use")
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
	if !nd.launch(t) {
		t.Fatalf("nats-server %s: a port of its was taken by another process", nd.name)
	}
}

// launch starts the node's process and waits until it listens for
// clients; false when it exited because a port of its was taken.
func (nd *natsNode) launch(t *testing.T) bool {
	t.Helper()
	nd.cmd = exec.Command(bin.natsServer, "-c", filepath.Join(nd.dir, "nats.conf"))
	if err := nd.cmd.Start(); err != nil {
		t.Fatalf("nats-server %s: %v", nd.name, err)
	}
	exited := make(chan struct{})
	nd.exited = exited
	go func(cmd *exec.Cmd) { _ = cmd.Wait(); close(exited) }(nd.cmd)
	addr := fmt.Sprintf("127.0.0.1:%d", nd.client)
	lost := false
	waitFor(t, 10*time.Second, "nats-server "+nd.name+" to listen", func() bool {
		select {
		case <-exited:
			if nd.lostPort() {
				lost = true
				return true
			}
			t.Fatalf("nats-server %s exited while starting", nd.name)
		default:
		}
		conn, err := (&netDialer{}).dial(addr)
		if err == nil {
			conn.Close()
		}
		return err == nil
	})
	return !lost
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
	return c.streamLeaderAsking(js, stream, 2*time.Second)
}

// busiestConsumerNode is the node, other than except, on which most
// consumers of stream are placed, and how many.
func (c *natsCluster) busiestConsumerNode(js jetstream.JetStream, stream string, except int) (node, held int) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		c.t.Fatalf("stream %s: %v", stream, err)
	}
	counts := make([]int, len(c.nodes))
	list := s.ListConsumers(ctx)
	for info := range list.Info() {
		if info.Cluster != nil {
			if i := c.index(info.Cluster.Leader); i >= 0 {
				counts[i]++
			}
		}
	}
	if err := list.Err(); err != nil {
		c.t.Fatalf("consumers of %s: %v", stream, err)
	}
	node = (except + 1) % len(c.nodes)
	for i, n := range counts {
		if i != except && n > counts[node] {
			node = i
		}
	}
	return node, counts[node]
}

// streamLeaderAsking is streamLeader asking every ask: a stream with no
// leader does not answer, so ask bounds how late an election is seen.
func (c *natsCluster) streamLeaderAsking(js jetstream.JetStream, stream string, ask time.Duration) int {
	c.t.Helper()
	leader := -1
	waitFor(c.t, clusterSettle, "a leader of stream "+stream, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), ask)
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

// clusterTTL is the drills' --lease-ttl: short, so takeovers take
// seconds, yet above a NATS election on this machine. BRIDGE_E2E_LEASE_TTL
// runs them with another (the default 10s, say) and every bound that
// follows from it.
var clusterTTL = leaseTTL(2 * time.Second)

// leaseTTL is BRIDGE_E2E_LEASE_TTL when it is set, otherwise def.
func leaseTTL(def time.Duration) time.Duration {
	v := os.Getenv("BRIDGE_E2E_LEASE_TTL")
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		panic("BRIDGE_E2E_LEASE_TTL: not a positive duration: " + v)
	}
	return d
}

// clusterFlush is the drills' --flush-interval (the default), and
// clusterSinkMinDelay the least time their receiver takes to answer: so
// a registration is acknowledged at most clusterFlush/clusterSinkMinDelay
// + 1 times in a flush interval, which bounds what a takeover may repeat
// (repeatBound).
const (
	clusterFlush        = 20 * time.Millisecond
	clusterSinkMinDelay = 2 * time.Millisecond
)

// clusterToken is the --admin-token every bridge of a drill shares, as
// docs/deployment.md asks.
const clusterToken = "e2e-cluster-token"

// bridgeCluster is N `bridge run --store kv` processes on a natsCluster,
// one receiver for every registration and a client of the cluster.
type bridgeCluster struct {
	t       *testing.T
	nats    *natsCluster
	bridges []*chaosDaemon
	sink    *chaosSink
	js      jetstream.JetStream
	ids     []string // registrations in creation order
}

// newBridgeCluster starts a NATS cluster and n bridges on it: the first
// alone, which creates the journal and the buckets, then the others at
// once, and returns once every bridge is ready. Bridges starting together
// on a fresh cluster are a drill of their own.
func newBridgeCluster(t *testing.T, n int) *bridgeCluster {
	t.Helper()
	c := newBareCluster(t)
	c.startBridges(n)
	return c
}

// startBridges starts n bridges, the first alone, and returns once every
// bridge is ready.
func (c *bridgeCluster) startBridges(n int) {
	c.t.Helper()
	c.launchBridge()
	c.awaitReady(0)
	for range n - 1 {
		c.launchBridge()
	}
	for i := range c.bridges {
		c.awaitReady(i)
	}
}

// newBareCluster is a NATS cluster with a receiver and a client, and no
// bridge yet.
func newBareCluster(t *testing.T) *bridgeCluster {
	t.Helper()
	c := &bridgeCluster{t: t, nats: startNATSCluster(t, 3), sink: newChaosSink(t, 1, clusterSinkMinDelay, 2*clusterSinkMinDelay, 0)}
	c.js = testutil.JetStream(t, c.nats.urls())
	return c
}

// waitLeasesSettled waits until the bridges hold every shard between
// them, each an equal share ± 1, as their bridge_leases_held say.
func (c *bridgeCluster) waitLeasesSettled() {
	c.t.Helper()
	const shards = 64
	// The split is by registrations, so the bridges hold unequal numbers
	// of shards: settled is every shard held once, the same for a while.
	var last []float64
	var since time.Time
	waitFor(c.t, 2*clusterTTL, "the shard leases to settle", func() bool {
		var held []float64
		total := 0.0
		for _, b := range c.bridges {
			h := metricSum(c.t, b.admin, "bridge_leases_held")
			held, total = append(held, h), total+h
		}
		if total != shards || !slices.Equal(held, last) {
			last, since = held, time.Now()
			return false
		}
		return time.Since(since) >= 300*time.Millisecond
	})
}

// launchBridge starts bridge b<len+1> without waiting for it.
func (c *bridgeCluster) launchBridge() *chaosDaemon {
	c.t.Helper()
	b := newChaosDaemon(c.t, "--store", "kv", "--nats-url", c.nats.urls(), "--instance", c.name(len(c.bridges)),
		"--lease-ttl", clusterTTL.String(), "--flush-interval", clusterFlush.String(), "--kv-replicas", "3", "--stream", "JOURNAL", "--create-stream",
		"--admin-token", clusterToken, "--a2a-allow-loopback")
	// The admin clients of the tests read the token from the data dir.
	if err := os.WriteFile(filepath.Join(b.dataDir, "admin-token"), []byte(clusterToken+"\n"), 0o600); err != nil {
		c.t.Fatal(err)
	}
	c.bridges = append(c.bridges, b)
	c.launch(len(c.bridges) - 1)
	return b
}

// launch starts bridge i's process and tells the receiver it is that
// bridge.
func (c *bridgeCluster) launch(i int) {
	c.t.Helper()
	c.bridges[i].launch()
	c.sink.sentBy(c.bridges[i].cmd.Process.Pid, c.name(i))
}

func (c *bridgeCluster) name(i int) string { return fmt.Sprintf("b%d", i+1) }

// awaitReady waits until bridge i answers and says it is ready: joined,
// its store and journal reachable.
func (c *bridgeCluster) awaitReady(i int) {
	c.t.Helper()
	b := c.bridges[i]
	b.awaitAPI()
	waitFor(c.t, clusterSettle, c.name(i)+" to be ready", func() bool { return readyz(b.daemon) == http.StatusOK })
}

// restart starts bridge i again, on its data dir, name and ports.
func (c *bridgeCluster) restart(i int) {
	c.t.Helper()
	c.launch(i)
	c.awaitReady(i)
}

// live is a bridge other than the ones excluded that is running, to ask.
func (c *bridgeCluster) live(except ...int) *daemon {
	c.t.Helper()
	for i, b := range c.bridges {
		if b.running() && !slices.Contains(except, i) {
			return b.daemon
		}
	}
	c.t.Fatal("no bridge is running")
	return nil
}

// register creates registrations prefix-0 … prefix-(n-1) through the
// bridges in turn, each posting every journal message from the first to
// its own path of the receiver.
func (c *bridgeCluster) register(prefix string, n int) {
	c.t.Helper()
	for i := range n {
		id := fmt.Sprintf("%s-%02d", prefix, i)
		c.bridges[i%len(c.bridges)].create(map[string]any{"id": id, "namespace": "outbox",
			"subject": "journal.>", "url": c.sink.url(id), "start": "first"})
		c.ids = append(c.ids, id)
	}
}

// owners is every registration's owner as bridge d lists them.
func (c *bridgeCluster) owners(d *daemon) map[string]string {
	c.t.Helper()
	var page struct {
		Registrations []struct {
			ID    string `json:"id"`
			Owner string `json:"owner"`
		} `json:"registrations"`
		Next string `json:"next"`
	}
	if code := d.api("GET", "/v1/registrations?limit=1000", nil, &page); code != http.StatusOK {
		c.t.Fatalf("GET /v1/registrations: %d", code)
	}
	if page.Next != "" {
		c.t.Fatalf("GET /v1/registrations?limit=1000: more than one page")
	}
	owners := make(map[string]string, len(page.Registrations))
	for _, r := range page.Registrations {
		owners[r.ID] = r.Owner
	}
	// Every create has answered: every bridge lists it.
	var missing []string
	for _, id := range c.ids {
		if _, ok := owners[id]; !ok {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		c.t.Fatalf("GET /v1/registrations through %s lists %d registrations, not %v, whose creates have answered",
			d.admin, len(owners), missing)
	}
	return owners
}

// shares counts the registrations each owner delivers; "" counts the
// unowned.
func shares(owners map[string]string) map[string]int {
	n := map[string]int{}
	for _, o := range owners {
		n[o]++
	}
	return n
}

// ownedBy reports why not every registration is owned by one of the
// live bridges named, "" when each is.
func ownedBy(owners map[string]string, live []string) string {
	for id, o := range owners {
		if !slices.Contains(live, o) {
			return fmt.Sprintf("%s owned by %q, not one of %v: %v", id, o, live, shares(owners))
		}
	}
	return ""
}

// fairShares reports why the registrations are not split fairly among
// the live bridges named (within 20 % of an equal split, ± 1), "" when
// they are.
func fairShares(owners map[string]string, live []string) string {
	if why := ownedBy(owners, live); why != "" {
		return why
	}
	n := shares(owners)
	equal := float64(len(owners)) / float64(len(live))
	for _, o := range live {
		if k := float64(n[o]); k > 1.2*equal+1 || k < 0.8*equal-1 {
			return fmt.Sprintf("%s owns %d of %d registrations, an equal share is %.1f: %v", o, n[o], len(owners), equal, n)
		}
	}
	return ""
}

// waitOwners waits until check, given every registration's owner as
// bridge d lists them, finds nothing wrong.
func (c *bridgeCluster) waitOwners(d *daemon, within time.Duration, check func(map[string]string) string) map[string]string {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for {
		owners := c.owners(d)
		why := check(owners)
		if why == "" {
			return owners
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("after %v: %s", within, why)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitOwned waits until every registration is owned by one of the live
// bridges named.
func (c *bridgeCluster) waitOwned(d *daemon, within time.Duration, live []string) map[string]string {
	c.t.Helper()
	return c.waitOwners(d, within, func(o map[string]string) string { return ownedBy(o, live) })
}

// waitFair waits until the registrations are split fairly among the
// live bridges named.
func (c *bridgeCluster) waitFair(d *daemon, within time.Duration, live []string) map[string]string {
	c.t.Helper()
	return c.waitOwners(d, within, func(o map[string]string) string { return fairShares(o, live) })
}

// clusterView is GET /v1/cluster.
type clusterView struct {
	Instances []struct {
		Name          string `json:"name"`
		Registrations int    `json:"registrations"`
		Self          bool   `json:"self"`
	} `json:"instances"`
	Store    string `json:"store"`
	Replicas int    `json:"replicas"`
}

func (c *bridgeCluster) cluster(d *daemon) clusterView {
	c.t.Helper()
	var v clusterView
	if code := d.api("GET", "/v1/cluster", nil, &v); code != http.StatusOK {
		c.t.Fatalf("GET /v1/cluster: %d", code)
	}
	return v
}

func (v clusterView) names() []string {
	var names []string
	for _, in := range v.Instances {
		names = append(names, in.Name)
	}
	slices.Sort(names)
	return names
}

// feed publishes bodies prefix0, prefix1, … to the journal in the
// background, one every pace, until stopped, each with its body as
// Nats-Msg-Id so a publish retried across an election is stored once.
type feed struct {
	prefix string
	quit   chan struct{}
	once   sync.Once
	done   chan struct{}
	err    error

	mu     sync.Mutex
	stored []time.Time // when the cluster acknowledged each message, by index
}

func (c *bridgeCluster) startFeed(prefix string, pace time.Duration) *feed {
	f := &feed{prefix: prefix, quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(f.done)
		for i := 0; ; i++ {
			if f.err = publishOnce(c.js, "journal.e2e", fmt.Sprintf("%s%d", prefix, i)); f.err != nil {
				return
			}
			f.mu.Lock()
			f.stored = append(f.stored, time.Now())
			f.mu.Unlock()
			select {
			case <-f.quit:
				return
			case <-time.After(pace):
			}
		}
	}()
	// A test that fails before stop still leaves no publisher behind.
	c.t.Cleanup(func() { f.once.Do(func() { close(f.quit) }); <-f.done })
	return f
}

// published is how many messages the cluster has acknowledged.
func (f *feed) published() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.stored)
}

// storedAt is when the cluster acknowledged message i, once it has.
func (f *feed) storedAt(i int) (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if i >= len(f.stored) {
		return time.Time{}, false
	}
	return f.stored[i], true
}

// index is the feed's index of a message body, -1 for another's.
func (f *feed) index(body string) int {
	n, err := strconv.Atoi(strings.TrimPrefix(body, f.prefix))
	if err != nil || !strings.HasPrefix(body, f.prefix) {
		return -1
	}
	return n
}

// alive fails the test when the publisher gave up: a wait for deliveries
// would otherwise blame the bridges for messages never published.
func (f *feed) alive(t *testing.T) {
	t.Helper()
	select {
	case <-f.done:
		t.Fatalf("the publisher stopped: %v", f.err)
	default:
	}
}

// stop ends the feed once the message in hand is published, failing
// the test on a message the cluster would not take.
func (f *feed) stop(t *testing.T) {
	t.Helper()
	f.once.Do(func() { close(f.quit) })
	select {
	case <-f.done:
	case <-time.After(2 * clusterSettle):
		t.Fatalf("the publisher did not stop within %v", 2*clusterSettle)
	}
	if f.err != nil {
		t.Fatal(f.err)
	}
}

// publishOnce publishes until the cluster acknowledges, for at most
// clusterSettle: the message id makes every retry the same message.
func publishOnce(js jetstream.JetStream, subject, body string) error {
	deadline := time.Now().Add(clusterSettle)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := js.Publish(ctx, subject, []byte(body), jetstream.WithMsgID(body))
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("publishing %s: %w", body, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// delivered reports how many messages every registration's receiver has
// acknowledged at least once; the least of them.
func (c *bridgeCluster) delivered() int {
	least := -1
	for _, id := range c.ids {
		if n := len(firstArrivals(c.bodies(id))); least < 0 || n < least {
			least = n
		}
	}
	return least
}

// waitDelivered waits until every registration's receiver acknowledged
// at least n messages, and otherwise fails naming the ones behind and
// their owners.
func (c *bridgeCluster) waitDelivered(within time.Duration, n int) {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for c.delivered() < n {
		if time.Now().After(deadline) {
			owners := c.owners(c.live())
			var behind []string
			for _, id := range c.ids {
				if k := len(firstArrivals(c.bodies(id))); k < n {
					behind = append(behind, fmt.Sprintf("%s (owner %q): %d", id, owners[id], k))
				}
			}
			c.t.Fatalf("after %v, registrations with fewer than %d messages acknowledged: %s", within, n, strings.Join(behind, ", "))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (c *bridgeCluster) bodies(id string) []string {
	var out []string
	for _, a := range c.sink.acks(id) {
		out = append(out, a.body)
	}
	return out
}

// checkDelivered waits until every registration's receiver acknowledged
// every message the journal holds, then checks first arrivals are in
// stream order, and reports the repeats. It returns the repeats of each
// registration.
func (c *bridgeCluster) checkDelivered() map[string]int {
	c.t.Helper()
	var want []string
	for _, m := range streamContents(c.t, c.js, "JOURNAL") {
		want = append(want, string(m.data))
	}
	waitFor(c.t, time.Minute, fmt.Sprintf("all %d messages at all %d registrations", len(want), len(c.ids)),
		func() bool { return c.delivered() >= len(want) })
	repeats := map[string]int{}
	total := 0
	for _, id := range c.ids {
		got := c.bodies(id)
		if first := firstArrivals(got); !slices.Equal(first, want) {
			c.t.Errorf("%s: first arrivals %s, want the journal's %d messages in stream order", id, diffAt(first, want), len(want))
		}
		repeats[id] = len(got) - len(want)
		total += repeats[id]
	}
	c.t.Logf("%d messages × %d registrations delivered; %d repeats %v", len(want), len(c.ids), total, repeats)
	return repeats
}

// diffAt shows where got first departs from want.
func diffAt(got, want []string) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("depart at index %d: got %q, want %q", i, excerpt(got, i), excerpt(want, i))
		}
	}
	return fmt.Sprintf("are %d messages, the first %d in order", len(got), min(len(got), len(want)))
}

// checkRepeats fails the test for a registration that got more repeats
// than §6 lets a takeover at moment at repeat: what was in flight or
// acknowledged within the last --flush-interval, at most
// repeatBound(1, clusterFlush, clusterSinkMinDelay) for a registration
// with one POST in flight. It logs, beside each count, what the receiver
// had unanswered at that moment and acknowledged in the interval before.
func (c *bridgeCluster) checkRepeats(what string, repeats map[string]int, at time.Time) {
	c.t.Helper()
	bound := repeatBound(1, clusterFlush, clusterSinkMinDelay)
	var seen []string
	for _, id := range slices.Sorted(maps.Keys(repeats)) {
		acked, open := c.sink.ackedAround(id, at, clusterFlush)
		seen = append(seen, fmt.Sprintf("%s %d (%d in flight, %d acknowledged in the last %v)", id, repeats[id], open, acked, clusterFlush))
		if repeats[id] > bound {
			c.t.Errorf("%s: %s repeated %d messages, more than the %d §6 allows: what was in flight or acknowledged within the last %v",
				what, id, repeats[id], bound, clusterFlush)
		}
	}
	c.t.Logf("%s: repeats per registration (bound %d): %s", what, bound, strings.Join(seen, ", "))
}

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetstream-bridge/bridge/internal/testutil"
	"github.com/jetstream-bridge/bridge/lease"
)

// The cluster the drills stand on: a replicated stream keeps its messages
// through the kill -9 of the node leading it, a new leader is elected
// among the survivors, and the node rejoins on its store.
func TestClusterOfNATSProcessesSurvivesItsStreamLeader(t *testing.T) {
	nc := startNATSCluster(t, 3)
	js := testutil.JetStream(t, nc.urls())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}, Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	pub := &publisher{js: js}
	for _, b := range seqBodies("m", 0, 10) {
		pub.publish(t, "s.a", b)
	}
	old := nc.streamLeader(js, "S")
	nc.kill9(old)
	nc.waitSettled()
	if now := nc.streamLeader(js, "S"); now == old {
		t.Fatalf("stream S still led by the killed node n%d", old+1)
	}
	for _, b := range seqBodies("m", 10, 20) {
		pub.publish(t, "s.a", b)
	}
	nc.restart(old)
	var got []string
	for _, m := range streamContents(t, js, "S") {
		got = append(got, string(m.data))
	}
	if want := seqBodies("m", 0, 20); !slices.Equal(got, want) {
		t.Fatalf("stream S after the kill of its leader: %q, want %q", got, want)
	}
}

// Three bridges started at the same moment on a fresh cluster race to
// create the journal, the buckets and the attempts stream; each waits
// for what another is creating, and all three serve.
func TestClusterBridgesStartingTogether(t *testing.T) {
	c := newBareCluster(t)
	for range 3 {
		c.launchBridge()
	}
	for i := range c.bridges {
		c.awaitReady(i)
	}
	live := c.namesBut(3, -1)
	waitFor(t, 2*clusterTTL, "GET /v1/cluster to list the three bridges", func() bool {
		return slices.Equal(c.cluster(c.bridges[0].daemon).names(), live)
	})
}

// answer is one admin API call's status and body, bytes as sent.
type answer struct {
	code int
	body string
	err  error
}

// atOnce sends one request through each bridge given, all at the same
// moment, and returns their answers in the bridges' order; header is
// added to each.
func atOnce(ds []*daemon, method, path string, bodies []string, header http.Header) []answer {
	out := make([]answer, len(ds))
	var wg sync.WaitGroup
	for i, d := range ds {
		wg.Go(func() {
			var r io.Reader
			if bodies != nil {
				r = strings.NewReader(bodies[i])
			}
			req, err := http.NewRequest(method, "http://"+d.admin+path, r)
			if err != nil {
				out[i].err = err
				return
			}
			req.Header = header.Clone()
			if req.Header == nil {
				req.Header = http.Header{}
			}
			req.Header.Set("Authorization", "Bearer "+clusterToken)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(withTest(d.t, req))
			if err != nil {
				out[i].err = err
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			out[i] = answer{code: resp.StatusCode, body: string(b), err: err}
		})
	}
	wg.Wait()
	return out
}

// wantAnswers fails the test unless every answer has the status code.
func wantAnswers(t *testing.T, what string, got []answer, code int) {
	t.Helper()
	for i, a := range got {
		if a.err != nil || a.code != code {
			t.Fatalf("%s, answer %d: %d %s %v, want %d", what, i+1, a.code, a.body, a.err, code)
		}
	}
}

func urlOf(t *testing.T, a answer) string {
	t.Helper()
	var r struct {
		URL string `json:"url"`
	}
	if err := json.Unmarshal([]byte(a.body), &r); err != nil {
		t.Fatalf("registration %s: %v", a.body, err)
	}
	return r.URL
}

// Every bridge serves the whole admin API over the one store: what one
// bridge answered is what the next call through any other sees, and an
// idempotency key replayed through another bridge gets the first answer
// byte for byte.
func TestClusterAdminThroughEveryBridge(t *testing.T) {
	c := newBridgeCluster(t, 3)
	b1, others := c.bridges[0].daemon, []*daemon{c.bridges[1].daemon, c.bridges[2].daemon}
	all := append([]*daemon{b1}, others...)
	reg := func(url string) string {
		return fmt.Sprintf(`{"id": "shared", "namespace": "outbox", "subject": "journal.>", "url": %q}`, url)
	}
	wantAnswers(t, "create through b1", atOnce([]*daemon{b1}, "POST", "/v1/registrations", []string{reg(c.sink.url("a"))}, nil), http.StatusCreated)
	got := atOnce(others, "GET", "/v1/registrations/shared", nil, nil)
	wantAnswers(t, "read through b2 and b3 at once", got, http.StatusOK)
	for _, a := range got {
		if u := urlOf(t, a); u != c.sink.url("a") {
			t.Errorf("read right after the create: url %q, want %q", u, c.sink.url("a"))
		}
	}

	replacements := []string{reg(c.sink.url("b2")), reg(c.sink.url("b3"))}
	wantAnswers(t, "replace through b2 and b3 at once", atOnce(others, "PUT", "/v1/registrations/shared", replacements, nil), http.StatusOK)
	got = atOnce(all, "GET", "/v1/registrations/shared", nil, nil)
	wantAnswers(t, "read after the replaces", got, http.StatusOK)
	winner := urlOf(t, got[0])
	if winner != c.sink.url("b2") && winner != c.sink.url("b3") {
		t.Errorf("after two replaces at once: url %q, want one of theirs", winner)
	}
	for i, a := range got {
		if u := urlOf(t, a); u != winner {
			t.Errorf("b%d reads url %q, b1 %q: the bridges disagree after the replaces answered", i+1, u, winner)
		}
	}

	wantAnswers(t, "delete through b2 and b3 at once", atOnce(others, "DELETE", "/v1/registrations/shared", nil, nil), http.StatusNoContent)
	wantAnswers(t, "read after the deletes", atOnce(all, "GET", "/v1/registrations/shared", nil, nil), http.StatusNotFound)

	key := http.Header{"Idempotency-Key": {"create-idem-1"}}
	body := `{"id": "idem", "namespace": "outbox", "subject": "journal.>", "url": "` + c.sink.url("idem") + `"}`
	first := atOnce([]*daemon{b1}, "POST", "/v1/registrations", []string{body}, key)
	wantAnswers(t, "idempotent create through b1", first, http.StatusCreated)
	for i, a := range atOnce(others, "POST", "/v1/registrations", []string{body, body}, key) {
		if a.err != nil || a.code != first[0].code || a.body != first[0].body {
			t.Errorf("the key replayed through b%d: %d %q %v, want b1's %d %q byte for byte", i+2, a.code, a.body, a.err, first[0].code, first[0].body)
		}
	}
	other := strings.Replace(body, `"idem"`, `"idem-2"`, 1)
	wantAnswers(t, "the key with another body through b3", atOnce(others[1:], "POST", "/v1/registrations", []string{other}, key), http.StatusUnprocessableEntity)
}

// Six registrations over three bridges are two each (§6: within 20 % of
// an equal share, ± 1), wherever their ids fall among the shards: after
// the start, after a fourth bridge joins and after one leaves.
func TestClusterBalancesFewRegistrations(t *testing.T) {
	c := newBridgeCluster(t, 3)
	c.register("six", 6)
	// Closer than §6 asks: an equal share, or one more or less when
	// the registrations do not divide evenly.
	even := func(live []string) func(map[string]string) string {
		return func(o map[string]string) string {
			if why := ownedBy(o, live); why != "" {
				return why
			}
			n := shares(o)
			for _, b := range live {
				if k := n[b]; k < len(o)/len(live) || k > (len(o)+len(live)-1)/len(live) {
					return fmt.Sprintf("%s owns %d of %d: %v", b, k, len(o), n)
				}
			}
			return ""
		}
	}
	d := c.bridges[0].daemon
	t.Logf("three bridges: %v", shares(c.waitOwners(d, 2*clusterTTL, even(c.namesBut(3, -1)))))
	c.launchBridge()
	c.awaitReady(3)
	t.Logf("a fourth joined: %v", shares(c.waitOwners(d, 2*clusterTTL, even(c.namesBut(4, -1)))))
	if code := c.bridges[1].stop(); code != 0 {
		t.Fatalf("%s exited %d on SIGTERM, want 0", c.name(1), code)
	}
	t.Logf("b2 left: %v", shares(c.waitOwners(d, 2*clusterTTL, even(c.namesBut(4, 1)))))
}

// Three bridges split thirty registrations fairly within 2 × TTL, and
// GET /v1/cluster on each says the same split.
func TestClusterSharesRegistrationsFairly(t *testing.T) {
	c := newBridgeCluster(t, 3)
	c.register("fair", 30)
	live := []string{"b1", "b2", "b3"}
	n := shares(c.waitFair(c.bridges[0].daemon, 2*clusterTTL, live))
	t.Logf("split %v", n)
	for i, b := range c.bridges {
		var v clusterView
		waitFor(t, 2*clusterTTL, "GET /v1/cluster on "+c.name(i)+" to say the split", func() bool {
			v = c.cluster(b.daemon)
			if v.Store != "kv" || v.Replicas != 3 || !slices.Equal(v.names(), live) {
				return false
			}
			for _, in := range v.Instances {
				if in.Registrations != n[in.Name] || in.Self != (in.Name == c.name(i)) {
					return false
				}
			}
			return true
		})
	}
}

// Registrations created through one bridge and delivered by the others:
// once the shards are settled, every registration is created through b1,
// and each is delivered every message published after, by whichever
// bridge owns it.
func TestClusterDeliversWhatAnyBridgeCreated(t *testing.T) {
	c := newBridgeCluster(t, 3)
	c.waitLeasesSettled()
	b1 := c.bridges[0]
	for i := range 12 {
		id := fmt.Sprintf("via-b1-%02d", i)
		b1.create(map[string]any{"id": id, "namespace": "outbox", "subject": "journal.>", "url": c.sink.url(id), "start": "first"})
		c.ids = append(c.ids, id)
	}
	t.Logf("owners %v", shares(c.waitOwned(b1.daemon, 2*clusterTTL, c.namesBut(3, -1))))
	for _, b := range seqBodies("m", 0, 20) {
		if err := publishOnce(c.js, "journal.e2e", b); err != nil {
			t.Fatal(err)
		}
	}
	c.waitDelivered(30*time.Second, 20)
	c.checkDelivered()
}

// newBusyCluster is three bridges sharing n registrations, and the one
// owning most of them.
func newBusyCluster(t *testing.T, prefix string, n int) (*bridgeCluster, int) {
	t.Helper()
	c := newBridgeCluster(t, 3)
	c.register(prefix, n)
	return c, c.busiest(c.waitOwned(c.bridges[0].daemon, 2*clusterTTL, c.namesBut(3, -1)))
}

// finish stops the feed once the new owners have delivered for a TTL,
// and checks every message reached every registration.
func (c *bridgeCluster) finish(f *feed) map[string]int {
	c.t.Helper()
	time.Sleep(clusterTTL)
	f.stop(c.t)
	return c.checkDelivered()
}

// busiest is the bridge owning most registrations.
func (c *bridgeCluster) busiest(owners map[string]string) int {
	n := shares(owners)
	best := 0
	for i := range c.bridges {
		if n[c.name(i)] > n[c.name(best)] {
			best = i
		}
	}
	return best
}

// namesBut names the first n bridges but the one at index except.
func (c *bridgeCluster) namesBut(n, except int) []string {
	var names []string
	for i := range n {
		if i != except {
			names = append(names, c.name(i))
		}
	}
	return names
}

// streamIn starts a feed and waits until deliveries are under way.
func (c *bridgeCluster) streamIn() *feed {
	c.t.Helper()
	f := c.startFeed("m", 10*time.Millisecond)
	c.waitDelivered(30*time.Second, 30)
	return f
}

// kill -9 of the bridge owning most registrations while messages stream
// in: the others own its registrations within 2 × TTL and deliver every
// message, first arrivals in stream order, repeating at most what was in
// flight or acknowledged within the last --flush-interval.
func TestClusterKillNineOfBusiestBridge(t *testing.T) {
	c, victim := newBusyCluster(t, "k9", 12)
	f := c.streamIn()
	killed := time.Now()
	c.bridges[victim].kill9()
	c.waitOwned(c.live(victim), 2*clusterTTL, c.namesBut(3, victim))
	t.Logf("%s killed; its registrations owned by the others after %v", c.name(victim), time.Since(killed).Round(time.Millisecond))
	c.checkRepeats("kill -9 of "+c.name(victim), c.finish(f), killed)
}

// SIGTERM: the bridge exits 0, its registrations have other owners
// within a second of its exit, and what it acknowledged is not repeated.
func TestClusterSIGTERMHandsOver(t *testing.T) {
	c, victim := newBusyCluster(t, "term", 12)
	f := c.streamIn()
	if code := c.bridges[victim].stop(); code != 0 {
		t.Fatalf("%s exited %d on SIGTERM, want 0", c.name(victim), code)
	}
	exited := time.Now()
	c.waitOwned(c.live(victim), time.Second, c.namesBut(3, victim))
	t.Logf("%s stopped; its registrations owned by the others after %v", c.name(victim), time.Since(exited).Round(time.Millisecond))
	for id, n := range c.finish(f) {
		if n > 1 {
			t.Errorf("%s: %d repeats after a SIGTERM, more than the one POST that can be in flight", id, n)
		}
	}
}

// resumeBound is how soon after the new leaders' election deliveries
// must resume after the loss of a NATS node: 2 × --lease-ttl (§6).
var resumeBound = 2 * clusterTTL

// kill -9 of the NATS node leading the journal stream, once, in the
// default suite: every registration receives a message published after
// the kill within §6's resumeBound of the new leaders' election, every
// bridge names each registration's owner by then, nothing is lost, first
// arrivals stay in stream order.
func TestClusterResumesAfterJournalLeaderKilled(t *testing.T) {
	c := newBridgeCluster(t, 3)
	c.register("elect", 3)
	f := c.streamIn()
	l := c.killStreamLeader(f, "JOURNAL")
	l.check(t, resumeBound)
	c.checkOwnersShown(l)
	c.finish(f)
}

// kill -9 of the NATS node leading the journal stream, then of the one
// leading the registrations' bucket: deliveries resume within 2 × TTL
// of each election, nothing is lost, first arrivals stay in stream
// order.
//
// It once failed in about a third of runs: the tail of a bridge whose
// server was killed waited forever on a replacement consumer placed on
// that server (see journal's tailResetAttempts). It runs with `make soak`
// only, for its length: two kills and their recoveries, with six
// registrations.
func TestClusterSurvivesLossOfNATSLeaders(t *testing.T) {
	if os.Getenv("BRIDGE_SOAK") == "" {
		t.Skip("a drill of up to two minutes; runs under BRIDGE_SOAK=1 (make soak)")
	}
	c := newBridgeCluster(t, 3)
	c.register("lead", 6)
	f := c.streamIn()
	for _, stream := range []string{"JOURNAL", "KV_BRIDGE_regs"} {
		l := c.killStreamLeader(f, stream)
		l.check(t, resumeBound)
		c.checkOwnersShown(l)
		c.nats.restart(l.node)
	}
	c.finish(f)
}

// leaderLoss is what the kill -9 of the NATS node leading a stream
// showed.
type leaderLoss struct {
	stream string
	node   int
	killed time.Time // the kill
	// elected is when the last of the streams the node led (the journal,
	// the registrations' and the leases' buckets) was seen with a new
	// leader through another node: §6 counts from the new leaders'
	// election, and deliveries need all of them.
	elected time.Time
	led     []string             // the bridge's streams the node led
	stored  time.Time            // the first message surely stored after the kill acknowledged
	resumed map[string]time.Time // each registration's first POST of a message published after the kill
}

// bridgeStreams are the streams deliveries depend on: the journal, and
// the buckets of the registrations and of the leases.
var bridgeStreams = []string{"JOURNAL", "KV_BRIDGE_regs", "KV_BRIDGE_leases"}

// killStreamLeader kills the node leading stream with SIGKILL while f
// feeds the journal, watches every bridge stream that node led elect a
// new leader through a client of another node (asking every 250 ms, so
// an election is seen at most that late), and waits until every
// registration received a message published after the kill.
func (c *bridgeCluster) killStreamLeader(f *feed, stream string) leaderLoss {
	c.t.Helper()
	l := leaderLoss{stream: stream, node: c.nats.streamLeader(c.js, stream), resumed: map[string]time.Time{}}
	watch := testutil.JetStream(c.t, fmt.Sprintf("nats://127.0.0.1:%d", c.nats.nodes[(l.node+1)%len(c.nats.nodes)].client))
	for _, s := range bridgeStreams {
		if c.nats.streamLeader(watch, s) == l.node {
			l.led = append(l.led, s)
		}
	}
	l.killed = time.Now()
	c.nats.kill9(l.node)
	// Message n, the first not acknowledged once the node is dead, may
	// have been stored before; n+1 is sent once n is acknowledged, after
	// the kill, and stored by the new leader.
	first := f.published() + 1
	for _, s := range l.led {
		c.nats.streamLeaderAsking(watch, s, 250*time.Millisecond)
	}
	l.elected = time.Now()
	waitFor(c.t, time.Minute, fmt.Sprintf("every registration to receive a message published after the kill of n%d leading %s", l.node+1, stream), func() bool {
		f.alive(c.t)
		for _, id := range c.ids {
			if _, ok := l.resumed[id]; ok {
				continue
			}
			for _, a := range c.sink.acks(id) {
				if f.index(a.body) >= first {
					l.resumed[id] = a.at
					break
				}
			}
			if _, ok := l.resumed[id]; !ok {
				return false
			}
		}
		return true
	})
	l.stored, _ = f.storedAt(first)
	return l
}

// checkOwnersShown fails the test unless, by resumeBound after the new
// leaders' election, every running bridge names as each registration's
// owner the bridge its shard's lease names in the leases' bucket (§6:
// `owner` is right through any bridge within 2 × TTL).
func (c *bridgeCluster) checkOwnersShown(l leaderLoss) {
	c.t.Helper()
	deadline := l.elected.Add(resumeBound)
	for {
		wrong := c.ownersNotShown()
		if wrong == "" {
			return
		}
		if time.Now().After(deadline) {
			c.t.Errorf("%v after the new leaders of %v were seen: %s", time.Since(l.elected).Round(time.Millisecond), l.led, wrong)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ownersNotShown says which bridge's view of an owner is not the holder
// of the registration's lease, read from the bucket itself, or is empty
// when every view is right.
func (c *bridgeCluster) ownersNotShown() string {
	holders, err := c.leaseHolders()
	if err != nil {
		return err.Error()
	}
	for i, b := range c.bridges {
		if !b.running() {
			continue
		}
		owners := c.owners(b.daemon)
		for _, id := range c.ids {
			if h := holders[id]; h == "" || owners[id] != h {
				return fmt.Sprintf("%s names %q as the owner of %s, whose lease names %q", c.name(i), owners[id], id, h)
			}
		}
	}
	return ""
}

// leaseHolders reads, for each registration, the instance its shard's
// lease names in the bucket BRIDGE_leases ("" when none holds it).
func (c *bridgeCluster) leaseHolders() (map[string]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	kv, err := c.js.KeyValue(ctx, "BRIDGE_leases")
	if err != nil {
		return nil, fmt.Errorf("the leases' bucket: %w", err)
	}
	holders := make(map[string]string, len(c.ids))
	for _, id := range c.ids {
		e, err := kv.Get(ctx, strconv.Itoa(lease.ShardOf(id, lease.DefaultShards)))
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			holders[id] = ""
		case err != nil:
			return nil, fmt.Errorf("the lease of %s: %w", id, err)
		default:
			holders[id] = string(e.Value())
		}
	}
	return holders, nil
}

// check fails the test unless every registration received a message
// published after the kill within bound of the new leader's election, or
// of the message's being stored when the publisher came back later, and
// logs the figures.
func (l leaderLoss) check(t *testing.T, bound time.Duration) {
	t.Helper()
	from := l.elected
	if l.stored.After(from) {
		from = l.stored
	}
	var last time.Time
	for _, id := range slices.Sorted(maps.Keys(l.resumed)) {
		at := l.resumed[id]
		if at.After(last) {
			last = at
		}
		if late := at.Sub(from); late > bound {
			t.Errorf("after the kill of n%d leading %s: %s received its first message published after the kill %v after the new leaders were seen (and %v after the message was stored), more than %v",
				l.node+1, l.stream, id, at.Sub(l.elected).Round(time.Millisecond), at.Sub(l.stored).Round(time.Millisecond), bound)
		}
	}
	t.Logf("n%d leading %s killed (it led %v): new leaders seen after %v, the first message published after the kill stored %v after it, every registration receiving one %v after the election (bound %v)",
		l.node+1, l.stream, l.led, l.elected.Sub(l.killed).Round(time.Millisecond), l.stored.Sub(l.elected).Round(time.Millisecond),
		last.Sub(l.elected).Round(time.Millisecond), bound)
}

// A bridge paused (SIGSTOP) past 3 × TTL loses its share to the others;
// continued, its late cursor writes are refused and counted
// (bridge_fenced_writes_total rises), it sends no POST that repeats what
// the new owners delivered of its lost share, it rejoins, nothing is
// lost, and the takeover repeats at most what was in flight or
// acknowledged within the last --flush-interval before the pause.
func TestClusterPausedBridgeIsFencedAndRejoins(t *testing.T) {
	c, victim := newBusyCluster(t, "stop", 9)
	v := c.bridges[victim]
	f := c.streamIn()
	fencedBefore := metricSum(t, v.admin, "bridge_fenced_writes_total")
	var lost []string
	for id, o := range c.owners(c.live(victim)) {
		if o == c.name(victim) {
			lost = append(lost, id)
		}
	}
	paused := time.Now()
	if err := v.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = v.cmd.Process.Signal(syscall.SIGCONT) })
	c.waitOwned(c.live(victim), 2*clusterTTL, c.namesBut(3, victim))
	time.Sleep(time.Until(paused.Add(3 * clusterTTL)))
	continued := time.Now()
	if err := v.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, c.name(victim)+" to rejoin GET /v1/cluster", func() bool {
		return slices.Contains(c.cluster(c.live(victim)).names(), c.name(victim))
	})
	rejoined := time.Now()
	c.waitOwners(c.live(victim), 2*clusterTTL, func(o map[string]string) string {
		if shares(o)[c.name(victim)] == 0 {
			return fmt.Sprintf("%s rejoined and owns nothing: %v", c.name(victim), shares(o))
		}
		return ""
	})
	if !v.running() || healthzStatus(v.admin) != http.StatusOK {
		t.Fatalf("%s did not go on running after SIGCONT", c.name(victim))
	}
	fenced := metricSum(t, v.admin, "bridge_fenced_writes_total")
	t.Logf("%s paused %v owning %v; bridge_fenced_writes_total %v → %v", c.name(victim), 3*clusterTTL, lost, fencedBefore, fenced)
	if fenced <= fencedBefore {
		// Only a cursor write is fenced: a pause that lands between two
		// flushes with no POST in flight leaves the bridge nothing to
		// write (seen in 1 of 3 runs), and what it must not do then is
		// POST, which checkNoStalePOST checks.
		t.Logf("%s had no cursor write to refuse after its pause: bridge_fenced_writes_total %v → %v",
			c.name(victim), fencedBefore, fenced)
	}
	c.checkRepeats(c.name(victim)+" paused", c.finish(f), paused)
	c.checkNoStalePOST(c.name(victim), lost, continued, rejoined)
}

// checkNoStalePOST fails the test when bridge name, continued at
// continued after it lost the registrations named, POSTed one of them,
// before it rejoined (seen at rejoined), a message a receiver had
// already acknowledged: it went on delivering a share no longer its own.
func (c *bridgeCluster) checkNoStalePOST(name string, lost []string, continued, rejoined time.Time) {
	c.t.Helper()
	before, posted := 0, 0
	for _, id := range lost {
		acks := c.sink.acks(id)
		for _, a := range acks {
			switch {
			case a.from != name:
				continue
			case a.at.Before(continued):
				before++
				continue
			case a.at.After(rejoined):
				continue
			}
			posted++
			for _, b := range acks {
				if b.body == a.body && b.answered.Before(a.at) {
					c.t.Errorf("%s, continued and not yet rejoined, POSTed %s message %q %v after it was continued, acknowledged to %s %v before: it delivered a share it had lost",
						name, id, a.body, a.at.Sub(continued).Round(time.Millisecond), b.from, a.at.Sub(b.answered).Round(time.Millisecond))
					break
				}
			}
		}
	}
	if before == 0 {
		c.t.Errorf("the receiver names %s as the sender of none of the POSTs to %v before the pause: it cannot tell the bridges apart", name, lost)
	}
	c.t.Logf("%s POSTed %d messages to the %d registrations it then lost before its pause, %d between being continued and rejoining (%v)",
		name, before, len(lost), posted, rejoined.Sub(continued).Round(time.Millisecond))
}

// A fourth bridge takes its fair share of the shards within 2 × TTL and
// delivers registrations, and a rolling restart of all four, SIGTERM and
// start again one by one, loses and repeats nothing.
//
// The bridges divide registrations, not shards: thirty registrations
// over four bridges are within §6's bound of an equal share.
func TestClusterJoinAndRollingRestart(t *testing.T) {
	c := newBridgeCluster(t, 3)
	c.register("roll", 30)
	c.waitOwned(c.bridges[0].daemon, 2*clusterTTL, c.namesBut(3, -1))
	f := c.streamIn()
	c.launchBridge()
	c.awaitReady(3)
	c.waitLeasesSettled()
	owners := c.waitFair(c.bridges[0].daemon, 2*clusterTTL, c.namesBut(4, -1))
	t.Logf("after b4 joined, registrations: %v", shares(owners))
	for i := range c.bridges {
		if code := c.bridges[i].stop(); code != 0 {
			t.Fatalf("%s exited %d on SIGTERM, want 0", c.name(i), code)
		}
		c.waitOwned(c.live(i), time.Second, c.namesBut(4, i))
		c.restart(i)
		c.waitLeasesSettled()
	}
	// A clean stop repeats nothing (§5), and neither does a hand-over to
	// a bridge joining: shards are settled before their leases go.
	for id, n := range c.finish(f) {
		if n > 0 {
			t.Errorf("%s: %d repeats in a rolling restart with SIGTERM; a clean stop repeats nothing", id, n)
		}
	}
}

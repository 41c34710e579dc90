package bridge_test

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/jetstream-bridge/bridge/bridge"
	"github.com/jetstream-bridge/bridge/cursor"
	"github.com/jetstream-bridge/bridge/netguard"
	"github.com/jetstream-bridge/bridge/projection"
	"github.com/jetstream-bridge/bridge/webhook"
)

// keyedReceiver records the body of every POST, in arrival order, and the
// most POSTs it ever had open at once.
type keyedReceiver struct {
	*httptest.Server
	mu      sync.Mutex
	got     []string
	ok      map[string]int
	open    atomic.Int32
	maxOpen atomic.Int32
}

// newKeyedReceiver answers each body with what answer says; configure,
// when given, edits the server before it starts.
func newKeyedReceiver(t *testing.T, answer func(body string) int, configure ...func(*http.Server)) *keyedReceiver {
	rc := &keyedReceiver{ok: make(map[string]int)}
	rc.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := rc.open.Add(1)
		defer rc.open.Add(-1)
		for m := rc.maxOpen.Load(); n > m && !rc.maxOpen.CompareAndSwap(m, n); m = rc.maxOpen.Load() {
		}
		b, _ := io.ReadAll(r.Body)
		code := answer(string(b))
		rc.mu.Lock()
		rc.got = append(rc.got, string(b))
		if code < 300 {
			rc.ok[string(b)]++
		}
		rc.mu.Unlock()
		w.WriteHeader(code)
	}))
	for _, c := range configure {
		c(rc.Config)
	}
	rc.Start()
	t.Cleanup(rc.Close)
	return rc
}

func (rc *keyedReceiver) acked() map[string]int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := make(map[string]int, len(rc.ok))
	for k, v := range rc.ok {
		out[k] = v
	}
	return out
}

func (rc *keyedReceiver) arrivals() []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]string(nil), rc.got...)
}

// keyed makes the env's registrations keyed by subject, width n.
func keyedBy(key string, n int) func(*cursor.Config) {
	return func(c *cursor.Config) { c.Ordering = &cursor.Ordering{Key: key, MaxInFlight: n} }
}

// sweepUntil sweeps w at now() until done holds, at most 200 times.
func (e *env) sweepUntil(w *bridge.Worker, now func() time.Time, done func() bool) {
	e.t.Helper()
	for range 200 {
		if done() {
			return
		}
		if _, err := w.Sweep(context.Background(), now(), 100); err != nil {
			e.t.Fatal(err)
		}
	}
	if !done() {
		e.t.Fatal("still not done after 200 sweeps")
	}
}

// checkFirstArrivalsInOrder fails when the first arrival of a body
// "<key>:<n>" precedes the first arrival of "<key>:<m>" for some m < n.
func checkFirstArrivalsInOrder(t *testing.T, arrivals []string) {
	t.Helper()
	seen := make(map[string]bool)
	last := make(map[string]int)
	for _, b := range arrivals {
		if seen[b] {
			continue
		}
		seen[b] = true
		key, n, _ := strings.Cut(b, ":")
		var i int
		fmt.Sscan(n, &i)
		if prev, ok := last[key]; ok && i != prev+1 || !ok && i != 0 {
			t.Fatalf("first arrival of %s follows %s:%d", b, key, last[key])
		}
		last[key] = i
	}
}

func TestKeyedKeepsOrderPerKeyWithManyInFlight(t *testing.T) {
	for _, tc := range []struct{ key, subject string }{
		{"subject", "journal.k%02d"},
		{"tokens:2", "journal.k%02d.x"},
		{"tokens:1,3", "journal.x.k%02d"},
	} {
		t.Run(tc.key, func(t *testing.T) {
			e := newEnv(t)
			e.shape = keyedBy(tc.key, 8)
			rc := newKeyedReceiver(t, func(string) int {
				time.Sleep(time.Duration(rand.IntN(5)) * time.Millisecond)
				return http.StatusOK
			})
			e.register("k", rc.URL, "journal.>")
			const keys, per = 12, 10
			for i := range per {
				for k := range keys {
					e.publish(fmt.Sprintf(tc.subject, k), fmt.Sprintf("k%02d:%d", k, i))
				}
			}
			w := e.worker()
			e.sweepUntil(w, time.Now, func() bool { return len(rc.acked()) == keys*per })
			checkFirstArrivalsInOrder(t, rc.arrivals())
			if m := rc.maxOpen.Load(); m < 2 || m > 8 {
				t.Fatalf("the receiver had at most %d POSTs open at once; want 2..8", m)
			}
			if r := e.get("k"); r.NextSeq != keys*per+1 || len(r.Ahead) != 0 || w.InFlight("k") != 0 {
				t.Fatalf("nextSeq %d, ahead %v, in flight %d; want %d, none, 0", r.NextSeq, r.Ahead, w.InFlight("k"), keys*per+1)
			}
		})
	}
}

func TestKeyedHeaderKey(t *testing.T) {
	e := newEnv(t)
	e.shape = keyedBy("header:Tenant", 4)
	rc := newKeyedReceiver(t, func(string) int { return http.StatusOK })
	e.register("h", rc.URL, "journal.>")
	for i := range 6 {
		for k := range 3 {
			m := nats.NewMsg(fmt.Sprintf("journal.s%d", i))
			m.Data = fmt.Appendf(nil, "t%d:%d", k, i)
			m.Header["tenant"] = []string{fmt.Sprint(k)}
			if _, err := e.js.PublishMsg(context.Background(), m); err != nil {
				t.Fatal(err)
			}
		}
	}
	w := e.worker()
	e.sweepUntil(w, time.Now, func() bool { return len(rc.acked()) == 18 })
	checkFirstArrivalsInOrder(t, rc.arrivals())
}

func TestKeyedFailingKeyBacksOffAloneAndKeepsItsOrder(t *testing.T) {
	e := newEnv(t)
	e.shape = keyedBy("subject", 4)
	var failing atomic.Bool
	failing.Store(true)
	rc := newKeyedReceiver(t, func(b string) int {
		if strings.HasPrefix(b, "bad:") && failing.Load() {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	e.register("f", rc.URL, "journal.>")
	e.publish("journal.bad", "bad:0")
	for i := range 10 {
		e.publish(fmt.Sprintf("journal.g%d", i%5), fmt.Sprintf("g%d:%d", i%5, i/5))
	}
	e.publish("journal.bad", "bad:1")
	var clock atomic.Int64
	clock.Store(t0.UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()).UTC() }
	w := e.worker(bridge.WithClock(now))
	e.sweepUntil(w, now, func() bool { return len(rc.acked()) == 10 })
	r := e.get("f")
	if r.NextSeq != 1 || len(r.Ahead) != 10 || r.Attempts == 0 || r.LastError == "" {
		t.Fatalf("while bad:0 fails: nextSeq %d ahead %v attempts %d lastError %q; want 1, ten, failing", r.NextSeq, r.Ahead, r.Attempts, r.LastError)
	}
	for _, b := range rc.arrivals() {
		if b == "bad:1" {
			t.Fatal("bad:1 was POSTed before bad:0 was acknowledged")
		}
	}
	failing.Store(false)
	clock.Add(int64(10 * time.Minute))
	e.sweepUntil(w, now, func() bool { return len(rc.acked()) == 12 })
	checkFirstArrivalsInOrder(t, rc.arrivals())
	if r := e.get("f"); r.NextSeq != 13 || len(r.Ahead) != 0 || r.Attempts != 0 {
		t.Fatalf("after recovery: nextSeq %d ahead %v attempts %d", r.NextSeq, r.Ahead, r.Attempts)
	}
	for b, n := range rc.acked() {
		if n != 1 {
			t.Fatalf("%s acknowledged %d times", b, n)
		}
	}
}

func TestKeyedGoneParksAndUnparkPostsNothingAcknowledgedAgain(t *testing.T) {
	e := newEnv(t)
	e.shape = keyedBy("subject", 4)
	var gone atomic.Bool
	gone.Store(true)
	rc := newKeyedReceiver(t, func(b string) int {
		if strings.HasPrefix(b, "gone:") && gone.Load() {
			// Slow to refuse, so other keys are acknowledged past it.
			time.Sleep(30 * time.Millisecond)
			return http.StatusGone
		}
		time.Sleep(2 * time.Millisecond)
		return http.StatusOK
	})
	e.register("p", rc.URL, "journal.>")
	for i := range 20 {
		e.publish(fmt.Sprintf("journal.g%d", i%4), fmt.Sprintf("g%d:%d", i%4, i/4))
		if i == 1 {
			e.publish("journal.gone", "gone:0")
		}
	}
	w := e.worker()
	e.sweepUntil(w, time.Now, func() bool { return e.get("p").State == cursor.Parked })
	r := e.get("p")
	if r.NextSeq != 3 || len(r.Ahead) == 0 {
		t.Fatalf("parked at nextSeq %d with ahead %v; want 3 (gone:0) with acknowledgements ahead", r.NextSeq, r.Ahead)
	}
	// A restart between the parking and the unpark: the window is read
	// from the file.
	if err := e.db.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	_ = e.db.Close()
	e.openStore()
	w = e.worker()
	gone.Store(false)
	if ok, err := e.db.Unpark(context.Background(), "p", time.Time{}); !ok || err != nil {
		t.Fatalf("unpark: %v %v", ok, err)
	}
	e.sweepUntil(w, time.Now, func() bool { return len(rc.acked()) == 21 })
	for b, n := range rc.acked() {
		if n != 1 {
			t.Fatalf("%s acknowledged %d times; unpark POSTed it again", b, n)
		}
	}
	checkFirstArrivalsInOrder(t, rc.arrivals())
}

func TestKeyedRetryAfterHoldsEveryKey(t *testing.T) {
	e := newEnv(t)
	e.shape = keyedBy("subject", 4)
	var asked atomic.Bool
	rc := newKeyedReceiver(t, func(b string) int {
		if b == "a:1" && asked.CompareAndSwap(false, true) {
			return http.StatusTooManyRequests
		}
		return http.StatusOK
	}, func(s *http.Server) { s.Handler = retryAfter(s.Handler, "a:1", "2") })
	e.register("r", rc.URL, "journal.>")
	e.publish("journal.a", "a:0")
	e.publish("journal.a", "a:1")
	var clock atomic.Int64
	clock.Store(t0.UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()).UTC() }
	w := e.worker(bridge.WithClock(now))
	e.sweepUntil(w, now, func() bool { return asked.Load() && w.InFlight("r") == 0 })
	for i := range 5 {
		e.publish(fmt.Sprintf("journal.b%d", i), fmt.Sprintf("b%d:0", i))
	}
	before := len(rc.arrivals())
	clock.Add(int64(time.Second))
	w.Wake("r")
	e.sweep(w, now(), 10)
	if got := len(rc.arrivals()); got != before {
		t.Fatalf("%d POSTs within the receiver's 2 s pause; want none", got-before)
	}
	if r := e.get("r"); !r.NextAttemptAt.Equal(t0.Add(2 * time.Second)) {
		t.Fatalf("row due at %v during the pause; want %v", r.NextAttemptAt, t0.Add(2*time.Second))
	}
	clock.Add(int64(2 * time.Second))
	e.sweepUntil(w, now, func() bool { return len(rc.acked()) == 7 })
	checkFirstArrivalsInOrder(t, rc.arrivals())
}

// retryAfter adds a Retry-After header to the answer to body.
func retryAfter(h http.Handler, body, secs string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if string(b) == body {
			w.Header().Set("Retry-After", secs)
		}
		r.Body = io.NopCloser(strings.NewReader(string(b)))
		h.ServeHTTP(w, r)
	})
}

// A key that keeps failing holds the registration once the window is
// full, never more: nothing 4,096 or more sequences past nextSeq is
// POSTed.
func TestKeyedWindowIsBounded(t *testing.T) {
	e := newEnv(t)
	e.shape = keyedBy("subject", 16)
	rc := newKeyedReceiver(t, func(b string) int {
		if strings.HasPrefix(b, "stuck:") {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	e.register("w", rc.URL, "journal.>")
	e.publish("journal.stuck", "stuck:0")
	const n = cursor.WindowSize + 200
	for i := range n {
		if _, err := e.js.PublishAsync(fmt.Sprintf("journal.k%d", i%64), fmt.Appendf(nil, "k%d:%d", i%64, i/64)); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-e.js.PublishAsyncComplete():
	case <-time.After(30 * time.Second):
		t.Fatal("publishing did not complete")
	}
	w := e.worker()
	e.sweepUntil(w, time.Now, func() bool { return len(rc.acked()) >= cursor.WindowSize-1 })
	for range 3 {
		w.Wake("w")
		e.sweep(w, time.Now(), 10)
	}
	if got := len(rc.acked()); got != cursor.WindowSize-1 {
		t.Fatalf("%d messages acknowledged past a stuck first message; want the window's %d", got, cursor.WindowSize-1)
	}
	r := e.get("w")
	if r.NextSeq != 1 || len(r.Ahead) != cursor.WindowSize-1 || r.Ahead[len(r.Ahead)-1] != cursor.WindowSize {
		t.Fatalf("nextSeq %d with %d ahead up to %d; want 1 with %d up to %d", r.NextSeq, len(r.Ahead), r.Ahead[len(r.Ahead)-1], cursor.WindowSize-1, cursor.WindowSize)
	}
}

// Live: messages published while the daemon runs reach a keyed
// registration as they land, and a wide registration leaves slots to the
// strict ones while they wait.
func TestKeyedLiveAndFairToStrictRegistrations(t *testing.T) {
	e := newEnv(t)
	slow := newKeyedReceiver(t, func(string) int {
		time.Sleep(10 * time.Millisecond)
		return http.StatusOK
	})
	var keyedDone atomic.Int32
	strict := newKeyedReceiver(t, func(string) int { return http.StatusOK })
	e.shape = keyedBy("subject", 8)
	e.register("wide", slow.URL, "journal.wide.>")
	e.shape = nil
	for i := range 4 {
		e.register(fmt.Sprintf("strict%d", i), strict.URL, "journal.strict")
	}
	w := e.worker(bridge.WithMaxInFlight(8), bridge.WithTick(50*time.Millisecond))
	runDaemon(t, bridge.NewDaemon(e.db, e.reader, []*bridge.Worker{w}))
	const wide = 400
	for i := range wide {
		e.publish(fmt.Sprintf("journal.wide.k%d", i%20), fmt.Sprintf("k%d:%d", i%20, i/20))
	}
	for i := range 5 {
		e.publish("journal.strict", fmt.Sprintf("s:%d", i))
	}
	waitUntil(t, "the strict registrations' messages", func() bool {
		keyedDone.Store(int32(len(slow.acked())))
		return len(strict.acked()) == 5 && len(strict.arrivals()) == 20
	})
	if n := keyedDone.Load(); n == wide {
		t.Fatalf("the strict registrations were served only after the wide one's %d messages", n)
	}
	waitUntil(t, "the wide registration's messages", func() bool { return len(slow.acked()) == wide })
	checkFirstArrivalsInOrder(t, slow.arrivals())
	if m := slow.maxOpen.Load(); m > 8 {
		t.Fatalf("%d POSTs of a registration of width 8 at once", m)
	}
	e.publish("journal.wide.k0", "k0:20")
	waitUntil(t, "a message published after the registration went idle", func() bool { return len(slow.acked()) == wide+1 })
}

// A keyed registration's POSTs reuse the sender's keep-alive connections:
// at 16 in flight to one receiver, the receiver sees about 16 connections,
// not one per POST.
func TestKeyedReusesConnections(t *testing.T) {
	e := newEnv(t)
	e.shape = keyedBy("subject", 16)
	var conns atomic.Int32
	rc := newKeyedReceiver(t, func(string) int {
		time.Sleep(time.Millisecond)
		return http.StatusOK
	}, func(s *http.Server) {
		s.ConnState = func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				conns.Add(1)
			}
		}
	})
	e.register("c", rc.URL, "journal.>")
	const n = 800
	for i := range n {
		e.publish(fmt.Sprintf("journal.k%d", i%40), fmt.Sprintf("k%d:%d", i%40, i/40))
	}
	w := e.worker()
	e.sweepUntil(w, time.Now, func() bool { return len(rc.acked()) == n })
	if c := conns.Load(); c > 2*16 {
		t.Fatalf("%d connections for %d POSTs at 16 in flight; want at most 32", c, n)
	}
}

// --max-in-flight bounds the POSTs of the whole bridge: two namespaces'
// workers under one daemon share its slots.
func TestMaxInFlightBoundsTheWholeBridge(t *testing.T) {
	e := newEnv(t)
	var open, most atomic.Int32
	hold := make(chan struct{})
	rc := newKeyedReceiver(t, func(string) int {
		n := open.Add(1)
		defer open.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		<-hold
		return http.StatusOK
	})
	e.shape = keyedBy("subject", 8)
	e.register("o", rc.URL, "journal.>")
	e.shape = nil
	for i := range 4 {
		e.registerNS(fmt.Sprintf("a%d", i), "a2a", rc.URL, "journal.>", t0)
	}
	for i := range 16 {
		e.publish(fmt.Sprintf("journal.k%d", i), fmt.Sprintf("k%d:0", i))
	}
	// A2A webhooks on plain loopback HTTP, as --a2a-allow-loopback allows.
	e.sender = webhook.NewSender(webhook.WithPolicy(netguard.NewPolicy(netguard.WithAllowLoopbackHTTP(true))))
	t.Cleanup(e.sender.Close)
	outbox := e.worker(bridge.WithMaxInFlight(6))
	a2a := e.workerFor(a2aPassThrough{}, bridge.WithMaxInFlight(6))
	runDaemon(t, bridge.NewDaemon(e.db, e.reader, []*bridge.Worker{outbox, a2a}))
	waitUntil(t, "six POSTs open", func() bool { return open.Load() == 6 })
	time.Sleep(100 * time.Millisecond)
	close(hold)
	waitUntil(t, "every POST", func() bool { return len(rc.arrivals()) >= 16+4*16 })
	if m := most.Load(); m != 6 {
		t.Fatalf("%d POSTs at once over both namespaces; --max-in-flight is 6", m)
	}
}

// a2aPassThrough is passThrough for the a2a namespace's worker.
type a2aPassThrough struct{ passThrough }

func (a2aPassThrough) Namespace() projection.Namespace { return projection.A2A }

// A slow POST holds only its own key: messages of other keys published
// while it is in flight are delivered before it is answered, including
// after the turn has run for longer than it trusts its row.
func TestKeyedSlowPostHoldsOnlyItsKey(t *testing.T) {
	e := newEnv(t)
	e.shape = keyedBy("subject", 4)
	release := make(chan struct{})
	rc := newKeyedReceiver(t, func(b string) int {
		if b == "slow:0" {
			<-release
		}
		return http.StatusOK
	})
	defer close(release)
	e.register("s", rc.URL, "journal.>")
	w := e.worker()
	runDaemon(t, bridge.NewDaemon(e.db, e.reader, []*bridge.Worker{w}))
	e.publish("journal.slow", "slow:0")
	waitUntil(t, "the slow POST in flight", func() bool { return w.InFlight("s") == 1 })
	for round := range 2 {
		for i := range 5 {
			e.publish(fmt.Sprintf("journal.k%d", i), fmt.Sprintf("k%d:%d", i, round))
		}
		waitUntil(t, "other keys' messages while the slow POST is in flight", func() bool { return len(rc.acked()) == 5*(round+1) })
		// Past the span after which the turn reads its row again.
		time.Sleep(1100 * time.Millisecond)
	}
	checkFirstArrivalsInOrder(t, rc.arrivals())
}

// A PUT during a keyed registration's backlog takes effect within about a
// second: the turn reads its row again and POSTs nothing more to the old
// URL, and the rest of the backlog goes to the new one.
func TestKeyedTurnFollowsAPut(t *testing.T) {
	e := newEnv(t)
	e.shape = keyedBy("subject", 2)
	slow := func(string) int {
		time.Sleep(20 * time.Millisecond)
		return http.StatusOK
	}
	before, after := newKeyedReceiver(t, slow), newKeyedReceiver(t, slow)
	reg := e.register("p", before.URL, "journal.>")
	const n = 300
	for i := range n {
		e.publish(fmt.Sprintf("journal.k%d", i%10), fmt.Sprintf("k%d:%d", i%10, i/10))
	}
	w := e.worker(bridge.WithTick(50 * time.Millisecond))
	runDaemon(t, bridge.NewDaemon(e.db, e.reader, []*bridge.Worker{w}))
	waitUntil(t, "the backlog under way", func() bool { return len(before.acked()) >= 20 })
	cfg := reg.Config
	cfg.URL = after.URL
	if _, err := e.db.Replace(context.Background(), cfg, time.Time{}); err != nil {
		t.Fatal(err)
	}
	replaced := len(before.arrivals())
	waitUntil(t, "the rest at the new URL", func() bool { return len(before.acked())+len(after.acked()) >= n })
	if late := len(before.arrivals()) - replaced; late > 2*50+2 {
		t.Fatalf("%d POSTs to the old URL after the PUT; want those of about a second at most", late)
	}
	if len(after.acked()) == 0 {
		t.Fatal("nothing reached the new URL")
	}
}

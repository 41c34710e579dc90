package bridge_test

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
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

// newKeyedReceiver answers each body with what answer says.
func newKeyedReceiver(t *testing.T, answer func(body string) int) *keyedReceiver {
	rc := &keyedReceiver{ok: make(map[string]int)}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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

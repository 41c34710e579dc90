package kvstore

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/jetstream-bridge/bridge/cursor"
	"github.com/jetstream-bridge/bridge/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// t0 is the fake clock's start.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: t0} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

// startNATS starts an embedded JetStream server and returns its URL.
func startNATS(t testing.TB) string {
	t.Helper()
	return testutil.NATS(t, t.TempDir(), -1).ClientURL()
}

// connect opens a client, closed when the test ends.
func connect(t testing.TB, url string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// openKV opens a store on its own connection (as a bridge would) on the
// buckets of the server at url, one replica, closed when the test ends.
func openKV(t testing.TB, url string, opts ...Option) *Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Open(ctx, connect(t, url), append([]Option{WithReplicas(1)}, opts...)...)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// crash drops s without flushing and opens a store on the same buckets.
func crash(t testing.TB, url string, s *Store, opts ...Option) *Store {
	t.Helper()
	s.closeWithoutFlush()
	return openKV(t, url, opts...)
}

// opener opens an empty store of one kind with the given clock.
type opener func(t *testing.T, now func() time.Time) cursor.Store

// kinds are the two stores every conformance case runs on; the kv ones
// share the server at url, each on buckets of its own.
func kinds(url string) map[string]opener {
	var n atomic.Int64
	return map[string]opener{
		"bolt": func(t *testing.T, now func() time.Time) cursor.Store {
			db, err := cursor.Open(filepath.Join(t.TempDir(), "bridge.db"), cursor.WithClock(now))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = db.Close() })
			return db
		},
		"kv": func(t *testing.T, now func() time.Time) cursor.Store {
			return openKV(t, url, WithClock(now), WithPrefix(fmt.Sprintf("C%d", n.Add(1))))
		},
	}
}

func reg(id, ns string) cursor.Registration {
	return cursor.Registration{Config: cursor.Config{
		ID:        id,
		Namespace: ns,
		Subject:   "journal.orders.>",
		URL:       "https://receiver.example/hook",
		Secret:    "whsec_c2VjcmV0",
	}}
}

func on(id, ns, subject string) cursor.Registration {
	r := reg(id, ns)
	r.Subject = subject
	return r
}

func create(t testing.TB, s cursor.Store, r cursor.Registration) cursor.Registration {
	t.Helper()
	got, _, err := s.Create(context.Background(), r, nil)
	if err != nil {
		t.Fatalf("Create(%q): %v", r.ID, err)
	}
	return got
}

func get(t testing.TB, s cursor.Store, id string) cursor.Registration {
	t.Helper()
	r, err := s.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("Get(%q): %v", id, err)
	}
	return r
}

func advance(t testing.TB, s cursor.Store, id string, p cursor.Progress) {
	t.Helper()
	if err := s.Advance(context.Background(), id, p); err != nil {
		t.Fatalf("Advance(%q, %+v): %v", id, p, err)
	}
}

func flush(t testing.TB, s cursor.Store) {
	t.Helper()
	if err := s.Flush(context.Background()); err != nil {
		t.Fatalf("Flush: %v", err)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func dueIDs(t testing.TB, s cursor.Store, at time.Time, limit int, ns string) ([]string, int) {
	t.Helper()
	d, err := s.Due(context.Background(), at, limit, ns)
	if err != nil {
		t.Fatalf("Due(%v, %d, %q): %v", at, limit, ns, err)
	}
	ids := make([]string, 0, len(d.Rows))
	for _, r := range d.Rows {
		ids = append(ids, r.ID)
	}
	return ids, d.Unserved
}

func routes(t testing.TB, s cursor.Store, filter string) []string {
	t.Helper()
	var ids []string
	must(t, s.Routes(context.Background(), filter, func(id, ns string) { ids = append(ids, ns+"/"+id) }))
	return ids
}

func wantErrIs(t testing.TB, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error = %v, want %v", err, target)
	}
}

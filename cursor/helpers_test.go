package cursor_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/jetstream-bridge/bridge/cursor"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// t0 is the fake clock's start: a fixed instant, so tests can name times.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// clock is a settable clock for the store.
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

// open opens a store at a new path in t.TempDir, closed at cleanup.
func open(t testing.TB, opts ...cursor.Option) (*cursor.DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "bridge.db")
	return reopen(t, path, opts...), path
}

// reopen opens path, closed at cleanup.
func reopen(t testing.TB, path string, opts ...cursor.Option) *cursor.DB {
	t.Helper()
	db, err := cursor.Open(path, opts...)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// crash closes db without flushing and opens the file again.
func crash(t testing.TB, db *cursor.DB, opts ...cursor.Option) *cursor.DB {
	t.Helper()
	path := db.Path()
	if err := db.CloseWithoutFlush(); err != nil {
		t.Fatalf("close without flush: %v", err)
	}
	return reopen(t, path, opts...)
}

// check fails the test when an index or count disagrees with the rows.
func check(t testing.TB, db *cursor.DB) {
	t.Helper()
	if err := db.CheckIndexes(); err != nil {
		t.Fatal(err)
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

func create(t testing.TB, db *cursor.DB, r cursor.Registration) cursor.Registration {
	t.Helper()
	got, _, err := db.Create(context.Background(), r, nil)
	if err != nil {
		t.Fatalf("Create(%q): %v", r.ID, err)
	}
	return got
}

func get(t testing.TB, db *cursor.DB, id string) cursor.Registration {
	t.Helper()
	r, err := db.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("Get(%q): %v", id, err)
	}
	return r
}

func advance(t testing.TB, db *cursor.DB, id string, p cursor.Progress) {
	t.Helper()
	if err := db.Advance(context.Background(), id, p); err != nil {
		t.Fatalf("Advance(%q, %+v): %v", id, p, err)
	}
}

func flush(t testing.TB, db *cursor.DB) {
	t.Helper()
	if err := db.Flush(context.Background()); err != nil {
		t.Fatalf("Flush: %v", err)
	}
}

// dueIDs returns the ids Due answers, in order.
func dueIDs(t testing.TB, db *cursor.DB, at time.Time, limit int, ns string) ([]string, int) {
	t.Helper()
	d, err := db.Due(context.Background(), at, limit, ns)
	if err != nil {
		t.Fatalf("Due(%v, %d, %q): %v", at, limit, ns, err)
	}
	ids := make([]string, 0, len(d.Rows))
	for _, r := range d.Rows {
		ids = append(ids, r.ID)
	}
	return ids, d.Unserved
}

func wantErrIs(t testing.TB, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error = %v, want %v", err, target)
	}
}

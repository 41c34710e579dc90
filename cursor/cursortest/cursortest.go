// Package cursortest is what every cursor.Store must do, written once:
// Run drives one implementation through every case, so the bolt store,
// the kv store and any store added later are held to the same behaviour.
//
// A case asserts what a user of the store sees through the cursor.Store
// interface (and the readers both stores offer for metrics: Pending,
// Counts, Backlog, IdleFloor); what one implementation does inside
// (fencing, incarnations, file damage, revisions) is tested beside it.
// It must never import an implementation, and every wait in it is
// bounded.
package cursortest

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jetstream-bridge/bridge/cursor"
)

// Options is what a case asks of a store it opens.
type Options struct {
	// Now is the clock the store stamps rows with; the suite always sets
	// it.
	Now func() time.Time
	// FlushInterval, when positive, starts the store's background
	// flusher (which Close stops, flushing once more).
	FlushInterval time.Duration
}

// Opener is one Store implementation as Run drives it.
type Opener struct {
	// Fresh makes an empty place for a store's data, private to t (a bolt
	// file in t.TempDir, kv buckets under a prefix of their own), and
	// returns what opens a store on it. Every store that function opens
	// reads and writes the same data; each is closed when t ends.
	Fresh func(t *testing.T) func(Options) cursor.Store
	// Crash stops s as a crash would: what it holds in memory is lost,
	// nothing more is written, and its data may be opened again.
	Crash func(t *testing.T, s cursor.Store)
	// Shared is true when several stores may be open on the same data at
	// once, as bridges of a cluster share kv buckets. Without it the suite
	// stops a store before it opens its data again.
	Shared bool
	// Check, when set, fails t when s's indexes (due, routes, counts)
	// disagree with its rows. It may wait, bounded, for what s learns
	// of other stores' writes. The suite calls it after every case.
	Check func(t testing.TB, s cursor.Store)
}

// T0 is where every case's clock starts.
var T0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// Run runs every case against stores o opens, each case in a subtest on
// data of its own.
func Run(t *testing.T, o Opener) {
	if o.Fresh == nil || o.Crash == nil {
		t.Fatal("cursortest: the Opener needs Fresh and Crash")
	}
	for _, c := range cases() {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, o)
			c.run(e)
			e.check()
		})
	}
}

type testCase struct {
	name string
	run  func(e *env)
}

func cases() []testCase {
	return slices.Concat(opCases, readCases, writeBehindCases, windowCases, filterCases, tokenCases)
}

// Clock is a settable clock for a store under test.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock is a Clock at T0.
func NewClock() *Clock { return &Clock{now: T0} }

// Now is the clock's time, for a store's WithClock option.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Add moves the clock on by d and returns the new time.
func (c *Clock) Add(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

// env is one case's store, clock and helpers.
type env struct {
	t    *testing.T
	o    Opener
	ctx  context.Context
	clk  *Clock
	open func(Options) cursor.Store
	// s is the store the case works with now.
	s cursor.Store
}

func newEnv(t *testing.T, o Opener) *env {
	e := &env{t: t, o: o, ctx: context.Background(), clk: NewClock(), open: o.Fresh(t)}
	e.s = e.open(Options{Now: e.clk.Now})
	return e
}

// reopen stops e.s — cleanly (Close), or as a crash when crash is set —
// and opens its data again with opt; the new store is e.s.
func (e *env) reopen(crash bool, opt Options) cursor.Store {
	e.t.Helper()
	if crash {
		e.o.Crash(e.t, e.s)
	} else if err := e.s.Close(); err != nil {
		e.t.Fatalf("Close: %v", err)
	}
	opt.Now = e.clk.Now
	e.s = e.open(opt)
	return e.s
}

// other is a store that did not make e.s's writes and reads what they
// stored: a second store beside e.s where stores share their data (a
// bridge taking over), else e.s closed and its data opened again. It
// becomes e.s.
func (e *env) other() cursor.Store {
	e.t.Helper()
	if !e.o.Shared {
		return e.reopen(false, Options{})
	}
	e.s = e.open(Options{Now: e.clk.Now})
	return e.s
}

func (e *env) check() {
	e.t.Helper()
	if e.o.Check != nil {
		e.o.Check(e.t, e.s)
	}
}

// Reg is a registration of namespace ns with a config every store takes.
func Reg(id, ns string) cursor.Registration {
	return cursor.Registration{Config: cursor.Config{
		ID:        id,
		Namespace: ns,
		Subject:   "journal.orders.>",
		URL:       "https://receiver.example/hook",
		Secret:    "whsec_c2VjcmV0",
	}}
}

var reg = Reg

func on(id, ns, subject string) cursor.Registration {
	r := reg(id, ns)
	r.Subject = subject
	return r
}

// Create creates r in s, failing t when it cannot.
func Create(t testing.TB, s cursor.Store, r cursor.Registration) cursor.Registration {
	t.Helper()
	got, _, err := s.Create(context.Background(), r, nil)
	if err != nil {
		t.Fatalf("Create(%q): %v", r.ID, err)
	}
	return got
}

// Get reads id from s, failing t when it cannot.
func Get(t testing.TB, s cursor.Store, id string) cursor.Registration {
	t.Helper()
	r, err := s.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("Get(%q): %v", id, err)
	}
	return r
}

// Advance records p for id in s, failing t when it cannot.
func Advance(t testing.TB, s cursor.Store, id string, p cursor.Progress) {
	t.Helper()
	if err := s.Advance(context.Background(), id, p); err != nil {
		t.Fatalf("Advance(%q, %+v): %v", id, p, err)
	}
}

// Flush flushes s, failing t when it cannot.
func Flush(t testing.TB, s cursor.Store) {
	t.Helper()
	if err := s.Flush(context.Background()); err != nil {
		t.Fatalf("Flush: %v", err)
	}
}

// DueIDs returns the ids s.Due answers, in order, and its Unserved.
func DueIDs(t testing.TB, s cursor.Store, at time.Time, limit int, ns string) ([]string, int) {
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

// WantErrIs fails t unless err is target.
func WantErrIs(t testing.TB, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error = %v, want %v", err, target)
	}
}

func (e *env) create(r cursor.Registration) cursor.Registration {
	e.t.Helper()
	return Create(e.t, e.s, r)
}

func (e *env) get(id string) cursor.Registration {
	e.t.Helper()
	return Get(e.t, e.s, id)
}

func (e *env) advance(id string, p cursor.Progress) {
	e.t.Helper()
	Advance(e.t, e.s, id, p)
}

func (e *env) flush() {
	e.t.Helper()
	Flush(e.t, e.s)
}

func (e *env) must(err error) {
	e.t.Helper()
	if err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) dueIDs(at time.Time, limit int, ns string) ([]string, int) {
	e.t.Helper()
	return DueIDs(e.t, e.s, at, limit, ns)
}

func (e *env) routes(filter string) []string {
	e.t.Helper()
	var ids []string
	e.must(e.s.Routes(e.ctx, filter, func(id, ns string) { ids = append(ids, ns+"/"+id) }))
	return ids
}

func (e *env) wantErrIs(err, target error) {
	e.t.Helper()
	WantErrIs(e.t, err, target)
}

// The readers both stores offer beyond cursor.Store; a store without one
// fails the case that needs it.
type (
	pender  interface{ Pending() int }
	counter interface {
		Counts(context.Context) (map[string]map[cursor.State]int, error)
	}
	backlogger interface {
		Backlog(context.Context, uint64) (map[string]uint64, error)
	}
	idleFloorer interface {
		IdleFloor(ctx context.Context) (uint64, bool, error)
	}
)

// as returns e.s as the reader I, failing the case when it is not one.
func as[I any](e *env) I {
	e.t.Helper()
	r, ok := e.s.(I)
	if !ok {
		e.t.Fatalf("%T lacks %v", e.s, reflect.TypeFor[I]())
	}
	return r
}

func (e *env) pending() int { e.t.Helper(); return as[pender](e).Pending() }

func (e *env) counts() map[string]map[cursor.State]int {
	e.t.Helper()
	c, err := as[counter](e).Counts(e.ctx)
	e.must(err)
	return c
}

// same compares registrations by value, times by instant.
func same(a, b cursor.Registration) bool {
	times := func(r *cursor.Registration) []*time.Time {
		return []*time.Time{&r.NextAttemptAt, &r.CreatedAt, &r.UpdatedAt, &r.CompletedAt, &r.PreviousSecretUntil}
	}
	ta, tb := times(&a), times(&b)
	for i := range ta {
		if !ta[i].Equal(*tb[i]) {
			return false
		}
		*ta[i], *tb[i] = time.Time{}, time.Time{}
	}
	return reflect.DeepEqual(a, b)
}

func equalCounts(got, want map[string]map[cursor.State]int) bool {
	for _, pair := range [][2]map[string]map[cursor.State]int{{got, want}, {want, got}} {
		for ns, states := range pair[0] {
			for st, n := range states {
				if pair[1][ns][st] != n {
					return false
				}
			}
		}
	}
	return true
}

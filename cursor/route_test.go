package cursor_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jetstream-bridge/bridge/cursor"
)

func routes(t *testing.T, db *cursor.DB, filter string) []string {
	t.Helper()
	var ids []string
	if err := db.Routes(context.Background(), filter, func(id, ns string) { ids = append(ids, ns+"/"+id) }); err != nil {
		t.Fatal(err)
	}
	return ids
}

func on(id, ns, subject string) cursor.Registration {
	r := reg(id, ns)
	r.Subject = subject
	return r
}

// A message's subject finds the active registrations of its literal filter
// in the store; parking, completing and deleting take them out, unparking
// and replacing put them back, each in the write that changes the row.
func TestRoutesFollowTheRows(t *testing.T) {
	db, _ := open(t)
	ctx := context.Background()
	create(t, db, on("a", "outbox", "journal.orders.1"))
	create(t, db, on("b", "a2a", "journal.orders.1"))
	create(t, db, on("c", "outbox", "journal.orders.10"))
	create(t, db, on("w", "outbox", "journal.orders.*"))
	if got := routes(t, db, "journal.orders.1"); !slices.Equal(got, []string{"outbox/a", "a2a/b"}) {
		t.Fatalf("routes of journal.orders.1 = %v", got)
	}
	if got := routes(t, db, "journal.orders.*"); !slices.Equal(got, []string{"outbox/w"}) {
		t.Fatalf("routes of the wildcard = %v", got)
	}

	if err := db.Park(ctx, "a", "gone"); err != nil {
		t.Fatal(err)
	}
	advance(t, db, "b", cursor.Progress{NextSeq: 4, Complete: true})
	flush(t, db)
	if got := routes(t, db, "journal.orders.1"); len(got) != 0 {
		t.Fatalf("a parked and a completed registration still routed: %v", got)
	}
	check(t, db)
	if _, err := db.Unpark(ctx, "a", t0); err != nil {
		t.Fatal(err)
	}
	c := on("c", "outbox", "journal.orders.1").Config
	if _, err := db.Replace(ctx, c, t0); err != nil {
		t.Fatal(err)
	}
	if got := routes(t, db, "journal.orders.1"); !slices.Equal(got, []string{"outbox/a", "outbox/c"}) {
		t.Fatalf("after unpark and replace: %v", got)
	}
	if got := routes(t, db, "journal.orders.10"); len(got) != 0 {
		t.Fatalf("the replaced filter still routes: %v", got)
	}
	if err := db.Delete(ctx, "w"); err != nil {
		t.Fatal(err)
	}
	var wild []string
	if err := db.WildcardFilters(ctx, func(f string) { wild = append(wild, f) }); err != nil {
		t.Fatal(err)
	}
	if len(wild) != 0 {
		t.Fatalf("wildcard filters after the delete: %v", wild)
	}
	check(t, db)
}

func TestWildcardFiltersAreDistinct(t *testing.T) {
	db, _ := open(t)
	for i, f := range []string{"journal.>", "journal.*.x", "journal.>", "journal.a.b", "journal.*.x", "journal.*"} {
		create(t, db, on(string(rune('a'+i)), "outbox", f))
	}
	var got []string
	if err := db.WildcardFilters(context.Background(), func(f string) { got = append(got, f) }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{"journal.*", "journal.*.x", "journal.>"}) {
		t.Fatalf("wildcard filters = %v", got)
	}
}

// WakeBehind makes due the idle registrations whose cursor is below the
// sequence the bridge starts following at, judged by acknowledged
// progress too, and leaves the rest idle.
func TestWakeBehindWakesOnlyTheIdleBehind(t *testing.T) {
	db, _ := open(t, cursor.WithClock(newClock().Now))
	ctx := context.Background()
	for _, id := range []string{"behind", "level", "ahead", "acked", "parked"} {
		create(t, db, on(id, "outbox", "journal."+id))
	}
	create(t, db, on("a2a-behind", "a2a", "journal.a2a.t"))
	for id, next := range map[string]uint64{"behind": 3, "level": 10, "ahead": 12, "acked": 4, "parked": 2, "a2a-behind": 9} {
		advance(t, db, id, cursor.Progress{NextSeq: next, Idle: true})
	}
	flush(t, db)
	if err := db.Park(ctx, "parked", "gone"); err != nil {
		t.Fatal(err)
	}
	// Acknowledged, not flushed: caught up past 10 by now.
	advance(t, db, "acked", cursor.Progress{NextSeq: 11, Idle: true})

	n, err := db.WakeBehind(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	due, _ := dueIDs(t, db, t0.Add(time.Second), 100, "outbox")
	a2a, _ := dueIDs(t, db, t0.Add(time.Second), 100, "a2a")
	if n != 2 || !slices.Equal(due, []string{"behind"}) || !slices.Equal(a2a, []string{"a2a-behind"}) {
		t.Fatalf("woke %d: due outbox %v, a2a %v; want behind and a2a-behind", n, due, a2a)
	}
	if r := get(t, db, "behind"); r.NextSeq != 3 || r.State != cursor.Active {
		t.Fatalf("a woken registration moved: %+v", r)
	}
	check(t, db)
	if n, err := db.WakeBehind(ctx, 10); err != nil || n != 0 {
		t.Fatalf("second WakeBehind woke %d (%v); the due ones are not idle", n, err)
	}
}

func TestBacklogFromSums(t *testing.T) {
	db, _ := open(t)
	ctx := context.Background()
	for id, next := range map[string]uint64{"o1": 1, "o2": 5, "o3": 3, "o4": 2} {
		r := on(id, "outbox", "journal.x")
		r.NextSeq = next
		create(t, db, r)
	}
	if err := db.Park(ctx, "o3", "gone"); err != nil {
		t.Fatal(err)
	}
	advance(t, db, "o4", cursor.Progress{NextSeq: 8, Complete: true})
	advance(t, db, "o1", cursor.Progress{NextSeq: 2})
	flush(t, db)
	got, err := db.Backlog(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	// (11-2) + (11-5) + (11-3); the completed one owes nothing.
	if got["outbox"] != 23 || len(got) != 1 {
		t.Fatalf("backlog %v, want outbox 23", got)
	}
	check(t, db)
}

// A store written by a bridge of schema version 1 gains the version 2
// indexes when it is opened, built from its rows.
func TestOpenMigratesSchema1(t *testing.T) {
	db, path := open(t)
	create(t, db, on("a", "outbox", "journal.a"))
	create(t, db, on("w", "outbox", "journal.>"))
	advance(t, db, "a", cursor.Progress{NextSeq: 7, Idle: true})
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := cursor.DowngradeToSchema1(path); err != nil {
		t.Fatal(err)
	}
	db = reopen(t, path)
	check(t, db)
	if got := routes(t, db, "journal.a"); !slices.Equal(got, []string{"outbox/a"}) {
		t.Fatalf("routes after migration: %v", got)
	}
	if n, err := db.WakeBehind(context.Background(), 8); err != nil || n != 1 {
		t.Fatalf("WakeBehind after migration woke %d (%v), want the idle one", n, err)
	}
}

// MakeDue makes idle registrations due and leaves the others' times alone:
// one backing off keeps its backoff, a parked one stays parked.
func TestMakeDueWakesTheIdleOnly(t *testing.T) {
	clk := newClock()
	db, _ := open(t, cursor.WithClock(clk.Now))
	ctx := context.Background()
	for _, id := range []string{"idle", "backoff", "parked"} {
		create(t, db, on(id, "outbox", "journal."+id))
		advance(t, db, id, cursor.Progress{NextSeq: 5, Idle: true})
	}
	flush(t, db)
	if err := db.Retry(ctx, "backoff", t0.Add(time.Hour), "503"); err != nil {
		t.Fatal(err)
	}
	if err := db.Park(ctx, "parked", "gone"); err != nil {
		t.Fatal(err)
	}
	if err := db.MakeDue(ctx, []string{"idle", "backoff", "parked", "missing"}); err != nil {
		t.Fatal(err)
	}
	if got := get(t, db, "idle").NextAttemptAt; !got.Equal(t0) {
		t.Errorf("idle registration due at %v, want now (%v)", got, t0)
	}
	if got := get(t, db, "backoff").NextAttemptAt; !got.Equal(t0.Add(time.Hour)) {
		t.Errorf("backing-off registration due at %v, want its backoff's end", got)
	}
	if r := get(t, db, "parked"); r.State != cursor.Parked || !r.NextAttemptAt.IsZero() {
		t.Errorf("parked registration became %s due at %v", r.State, r.NextAttemptAt)
	}
	check(t, db)
}

func TestIdleFloorIsTheLowestIdleCursor(t *testing.T) {
	db, _ := open(t)
	ctx := context.Background()
	if _, ok, err := db.IdleFloor(ctx); err != nil || ok {
		t.Fatalf("IdleFloor of an empty store: ok %v, %v", ok, err)
	}
	for id, next := range map[string]uint64{"o1": 9, "o2": 4, "parked": 2} {
		create(t, db, on(id, "outbox", "journal."+id))
		advance(t, db, id, cursor.Progress{NextSeq: next, Idle: true})
	}
	create(t, db, on("a1", "a2a", "journal.a2a.t"))
	advance(t, db, "a1", cursor.Progress{NextSeq: 6, Idle: true})
	create(t, db, on("due", "outbox", "journal.due")) // due, not idle, at 0
	if err := db.Park(ctx, "parked", "gone"); err != nil {
		t.Fatal(err)
	}
	// Acknowledged, not flushed yet: IdleFloor flushes first.
	advance(t, db, "o2", cursor.Progress{NextSeq: 5, Idle: true})
	if floor, ok, err := db.IdleFloor(ctx); err != nil || !ok || floor != 5 {
		t.Fatalf("IdleFloor = %d, %v, %v; want 5 (o2's cursor, parked and due rows aside)", floor, ok, err)
	}
}

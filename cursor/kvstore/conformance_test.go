package kvstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jetstream-bridge/bridge/cursor"
)

// conformance cases run on the bolt store and on this one: the interface
// must mean the same thing whichever store is behind it.
var conformance = map[string]func(t *testing.T, s cursor.Store, clk *clock){
	"create starts active and due at once":      createStartsActive,
	"create rejects what it cannot store":       createRejects,
	"ids the admin API accepts are stored":      oddIDs,
	"idempotent create":                         idempotentCreate,
	"replace keeps the cursor, resets failures": replaceKeepsCursor,
	"advance is monotonic, idle and complete":   advanceSemantics,
	"retry, park, unpark":                       retryParkUnpark,
	"rewind moves the cursor exactly":           rewind,
	"delete drops pending progress":             deleteDropsPending,
	"list pages in id order with filters":       listPages,
	"due is earliest first per namespace":       dueOrder,
	"routes follow the rows":                    routesFollowRows,
	"wake behind wakes only the idle behind":    wakeBehind,
	"make due wakes the idle only":              makeDue,
	"idle floor is the lowest idle cursor":      idleFloor,
	"counts and backlog":                        countsAndBacklog,
	"purge deletes old completed rows only":     purge,
}

func TestConformance(t *testing.T) {
	stores := kinds(startNATS(t))
	for _, name := range slices.Sorted(maps.Keys(conformance)) {
		for _, kind := range []string{"bolt", "kv"} {
			t.Run(name+"/"+kind, func(t *testing.T) {
				clk := newClock()
				conformance[name](t, stores[kind](t, clk.Now), clk)
			})
		}
	}
}

func createStartsActive(t *testing.T, s cursor.Store, _ *clock) {
	in := reg("billing", "outbox")
	in.NextSeq = 42
	in.State, in.Attempts, in.LastError, in.Delivered = cursor.Parked, 7, "old", 99
	got := create(t, s, in)
	if got.State != cursor.Active || got.NextSeq != 42 || got.Attempts != 0 || got.LastError != "" || got.Delivered != 0 {
		t.Fatalf("created = %+v", got)
	}
	if !got.CreatedAt.Equal(t0) || !got.UpdatedAt.Equal(t0) || !got.NextAttemptAt.Equal(t0) {
		t.Fatalf("times = %v %v %v, want %v", got.CreatedAt, got.UpdatedAt, got.NextAttemptAt, t0)
	}
	if ids, _ := dueIDs(t, s, t0, 10, "outbox"); !slices.Equal(ids, []string{"billing"}) {
		t.Fatalf("Due right after Create = %v", ids)
	}
	if g := get(t, s, "billing"); g.Secret != in.Secret || g.URL != in.URL || g.Subject != in.Subject || g.NextSeq != 42 {
		t.Fatalf("Get lost the config: %+v", g)
	}
	later := reg("later", "outbox")
	later.NextAttemptAt = t0.Add(time.Minute)
	create(t, s, later)
	if ids, _ := dueIDs(t, s, t0.Add(time.Second), 10, "outbox"); !slices.Equal(ids, []string{"billing"}) {
		t.Fatalf("Due before the scheduled one's time = %v", ids)
	}
}

func createRejects(t *testing.T, s cursor.Store, _ *clock) {
	ctx := context.Background()
	for name, r := range map[string]cursor.Registration{"empty id": reg("", "outbox"), "empty namespace": reg("x", "")} {
		if _, _, err := s.Create(ctx, r, nil); err == nil {
			t.Errorf("%s: Create succeeded", name)
		}
	}
	if _, _, err := s.Create(ctx, reg("x", "outbox"), &cursor.Idempotency{}); err == nil {
		t.Error("Create with an empty idempotency key succeeded")
	}
	create(t, s, reg("x", "outbox"))
	_, _, err := s.Create(ctx, reg("x", "a2a"), nil)
	wantErrIs(t, err, cursor.ErrExists)
	if !strings.Contains(err.Error(), `"x"`) {
		t.Errorf("ErrExists does not name the id: %v", err)
	}
	_, err = s.Get(ctx, "nobody")
	wantErrIs(t, err, cursor.ErrNotFound)
}

// oddIDs: every id of [A-Za-z0-9._-]{1,128} is a key, dots and all, and a
// deleted id can be created again.
func oddIDs(t *testing.T, s cursor.Store, _ *clock) {
	ctx := context.Background()
	ids := []string{"a..b", ".x", "x.", "-", "_", "a.b.c", strings.Repeat("Z", 128)}
	for _, id := range ids {
		create(t, s, reg(id, "outbox"))
		if got := get(t, s, id); got.ID != id {
			t.Fatalf("Get(%q).ID = %q", id, got.ID)
		}
	}
	must(t, s.Delete(ctx, "a..b"))
	r := reg("a..b", "outbox")
	r.NextSeq = 7
	if got := create(t, s, r); got.NextSeq != 7 {
		t.Fatalf("recreated = %+v", got)
	}
	rows, _, err := s.List(ctx, cursor.ListOptions{})
	must(t, err)
	var got []string
	for _, r := range rows {
		got = append(got, r.ID)
	}
	slices.Sort(ids)
	if !slices.Equal(got, ids) {
		t.Fatalf("List = %v, want %v", got, ids)
	}
}

func idempotentCreate(t *testing.T, s cursor.Store, _ *clock) {
	ctx := context.Background()
	calls := 0
	idem := func(key, hash string) *cursor.Idempotency {
		return &cursor.Idempotency{Key: key, Hash: []byte(hash), Answer: func(r cursor.Registration) ([]byte, error) {
			calls++
			return []byte(`{"id":"` + r.ID + `"}`), nil
		}}
	}
	first, answer, err := s.Create(ctx, reg("a", "outbox"), idem("k.1", "body-1"))
	if err != nil || string(answer) != `{"id":"a"}` {
		t.Fatalf("first create: %q, %v", answer, err)
	}
	r, again, err := s.Create(ctx, reg("a", "outbox"), idem("k.1", "body-1"))
	if err != nil || string(again) != string(answer) || r.ID != "a" || !r.CreatedAt.Equal(first.CreatedAt) || calls != 1 {
		t.Fatalf("replay = %+v, %q, %v (answer rendered %d times)", r, again, err, calls)
	}
	_, _, err = s.Create(ctx, reg("b", "outbox"), idem("k.1", "body-2"))
	wantErrIs(t, err, cursor.ErrIdempotencyConflict)
	if _, err := s.Get(ctx, "b"); !errors.Is(err, cursor.ErrNotFound) {
		t.Fatalf("a conflicting create stored b: %v", err)
	}
	_, _, err = s.Create(ctx, reg("a", "outbox"), idem("k2", "body-3"))
	wantErrIs(t, err, cursor.ErrExists)
	if r, ans, err := s.Create(ctx, reg("c", "outbox"), idem("k2", "body-4")); err != nil || r.ID != "c" || string(ans) != `{"id":"c"}` {
		t.Fatalf("create after a failed one = %+v, %q, %v", r, ans, err)
	}
	bad := &cursor.Idempotency{Key: "k3", Hash: []byte("x"), Answer: func(cursor.Registration) ([]byte, error) {
		return nil, errors.New("render failed")
	}}
	if _, _, err := s.Create(ctx, reg("d", "outbox"), bad); err == nil {
		t.Fatal("Create with a failing Answer succeeded")
	}
	if _, err := s.Get(ctx, "d"); !errors.Is(err, cursor.ErrNotFound) {
		t.Fatalf("stored although its answer failed: %v", err)
	}
	must(t, s.Delete(ctx, "a"))
	r, ans, err := s.Create(ctx, reg("a", "outbox"), idem("k.1", "body-1"))
	if err != nil || string(ans) != string(answer) || r.ID != "" {
		t.Fatalf("replay after delete = %+v, %q, %v", r, ans, err)
	}
	if _, err := s.Get(ctx, "a"); !errors.Is(err, cursor.ErrNotFound) {
		t.Fatalf("replay recreated the registration: %v", err)
	}
}

func replaceKeepsCursor(t *testing.T, s cursor.Store, clk *clock) {
	ctx := context.Background()
	r := reg("billing", "outbox")
	r.NextSeq = 5
	create(t, s, r)
	advance(t, s, "billing", cursor.Progress{NextSeq: 9, Delivered: 4})
	must(t, s.Park(ctx, "billing", "410 Gone"))
	clk.Add(time.Hour)
	c := r.Config
	c.URL, c.Namespace = "https://new.example/hook", ""
	at := t0.Add(2 * time.Hour)
	got, err := s.Replace(ctx, c, at)
	must(t, err)
	for _, g := range []cursor.Registration{got, get(t, s, "billing")} {
		if g.State != cursor.Active || g.NextSeq != 9 || g.Delivered != 4 || g.Attempts != 0 || g.LastError != "" ||
			!g.NextAttemptAt.Equal(at) || g.URL != c.URL || g.Namespace != "outbox" || !g.UpdatedAt.Equal(t0.Add(time.Hour)) {
			t.Fatalf("replaced = %+v", g)
		}
	}
	c.Namespace = "a2a"
	if _, err := s.Replace(ctx, c, at); err == nil || !strings.Contains(err.Error(), "namespace") {
		t.Fatalf("Replace into another namespace: %v", err)
	}
	_, err = s.Replace(ctx, cursor.Config{ID: "nobody"}, at)
	wantErrIs(t, err, cursor.ErrNotFound)

	create(t, s, reg("task", "a2a"))
	advance(t, s, "task", cursor.Progress{NextSeq: 3, Complete: true})
	tc := reg("task", "a2a").Config
	tc.URL = "https://new.example/hook"
	if got, err := s.Replace(ctx, tc, at); err != nil || got.State != cursor.Completed || !got.NextAttemptAt.IsZero() {
		t.Fatalf("replaced completed = %+v, %v", got, err)
	}
}

func advanceSemantics(t *testing.T, s cursor.Store, clk *clock) {
	ctx := context.Background()
	create(t, s, reg("a", "outbox"))
	must(t, s.Retry(ctx, "a", t0.Add(time.Second), "503"))
	advance(t, s, "a", cursor.Progress{NextSeq: 10, Delivered: 3})
	advance(t, s, "a", cursor.Progress{NextSeq: 4, Delivered: 2})
	for stage := range 2 {
		if r := get(t, s, "a"); r.NextSeq != 10 || r.Delivered != 5 || r.Attempts != 0 || r.LastError != "" {
			t.Fatalf("stage %d: after advances = %+v", stage, r)
		}
		flush(t, s)
	}
	wantErrIs(t, s.Advance(ctx, "nobody", cursor.Progress{NextSeq: 1}), cursor.ErrNotFound)

	create(t, s, reg("idle", "outbox"))
	advance(t, s, "idle", cursor.Progress{NextSeq: 5, Idle: true})
	advance(t, s, "a", cursor.Progress{NextSeq: 11})
	for _, stage := range []string{"pending", "flushed"} {
		if ids, _ := dueIDs(t, s, t0.Add(time.Second), 10, "outbox"); !slices.Equal(ids, []string{"a"}) {
			t.Fatalf("%s: Due = %v, want [a]", stage, ids)
		}
		if r := get(t, s, "idle"); !r.NextAttemptAt.IsZero() {
			t.Fatalf("%s: idle row still scheduled at %v", stage, r.NextAttemptAt)
		}
		flush(t, s)
	}
	clk.Add(time.Minute)
	advance(t, s, "idle", cursor.Progress{NextSeq: 6})
	flush(t, s)
	if ids, _ := dueIDs(t, s, clk.Now(), 10, "outbox"); len(ids) != 2 {
		t.Fatalf("Due after waking = %v", ids)
	}

	create(t, s, reg("task", "a2a"))
	advance(t, s, "task", cursor.Progress{NextSeq: 8, Delivered: 1, Complete: true})
	advance(t, s, "task", cursor.Progress{NextSeq: 8})
	if r := get(t, s, "task"); r.State != cursor.Completed || !r.CompletedAt.Equal(clk.Now()) || !r.NextAttemptAt.IsZero() {
		t.Fatalf("completed = %+v", r)
	}
	counts, err := s.(interface {
		Counts(context.Context) (map[string]map[cursor.State]int, error)
	}).Counts(ctx)
	if err != nil || counts["a2a"][cursor.Completed] != 1 || counts["a2a"][cursor.Active] != 0 {
		t.Fatalf("Counts with a pending completion = %v, %v", counts, err)
	}
	flush(t, s)
	if ids, _ := dueIDs(t, s, t0.Add(time.Hour), 10, "a2a"); len(ids) != 0 {
		t.Fatalf("completed row is due: %v", ids)
	}
}

func retryParkUnpark(t *testing.T, s cursor.Store, _ *clock) {
	ctx := context.Background()
	create(t, s, reg("a", "outbox"))
	next := t0.Add(time.Hour)
	for i := 1; i <= 2; i++ {
		must(t, s.Retry(ctx, "a", next, "503 Service Unavailable"))
		if r := get(t, s, "a"); r.Attempts != uint32(i) || !r.NextAttemptAt.Equal(next) || r.LastError != "503 Service Unavailable" {
			t.Fatalf("after %d retries: %+v", i, r)
		}
	}
	if ids, _ := dueIDs(t, s, next.Add(-time.Nanosecond), 10, "outbox"); len(ids) != 0 {
		t.Fatalf("due before its retry: %v", ids)
	}
	if ids, _ := dueIDs(t, s, next, 10, "outbox"); len(ids) != 1 {
		t.Fatalf("not due at its retry: %v", ids)
	}
	wantErrIs(t, s.Retry(ctx, "nobody", next, "x"), cursor.ErrNotFound)

	advance(t, s, "a", cursor.Progress{NextSeq: 12})
	if ok, err := s.Unpark(ctx, "a", t0); ok || err != nil {
		t.Fatalf("Unpark of an active registration = %v, %v", ok, err)
	}
	must(t, s.Park(ctx, "a", "410 Gone"))
	if r := get(t, s, "a"); r.State != cursor.Parked || r.NextSeq != 12 || r.Attempts != 1 || r.LastError != "410 Gone" || !r.NextAttemptAt.IsZero() {
		t.Fatalf("parked = %+v", r)
	}
	if ids, _ := dueIDs(t, s, t0.Add(2*time.Hour), 10, "outbox"); len(ids) != 0 {
		t.Fatalf("parked row is due: %v", ids)
	}
	at := t0.Add(time.Minute)
	if ok, err := s.Unpark(ctx, "a", at); !ok || err != nil {
		t.Fatalf("Unpark = %v, %v", ok, err)
	}
	if r := get(t, s, "a"); r.State != cursor.Active || r.NextSeq != 12 || r.Attempts != 0 || r.LastError != "" || !r.NextAttemptAt.Equal(at) {
		t.Fatalf("unparked = %+v", r)
	}
	_, err := s.Unpark(ctx, "nobody", at)
	wantErrIs(t, err, cursor.ErrNotFound)
	wantErrIs(t, s.Park(ctx, "nobody", "x"), cursor.ErrNotFound)
	must(t, s.Retry(ctx, "a", next, strings.Repeat("é", 5000)))
	if r := get(t, s, "a"); len(r.LastError) > 4096 || !strings.HasPrefix(r.LastError, "é") {
		t.Fatalf("LastError is %d bytes", len(r.LastError))
	}
}

func rewind(t *testing.T, s cursor.Store, _ *clock) {
	ctx := context.Background()
	r := reg("a", "outbox")
	r.NextSeq = 10
	create(t, s, r)
	advance(t, s, "a", cursor.Progress{NextSeq: 20, Delivered: 10})
	at := t0.Add(time.Minute)
	got, err := s.Rewind(ctx, "a", 5, at)
	if err != nil || got.NextSeq != 5 || got.Delivered != 10 || !got.NextAttemptAt.Equal(at) {
		t.Fatalf("Rewind back = %+v, %v", got, err)
	}
	flush(t, s)
	if r := get(t, s, "a"); r.NextSeq != 5 || r.HighWater() != 20 {
		t.Fatalf("after Flush the cursor is %d and the furthest %d, want 5 and 20", r.NextSeq, r.HighWater())
	}
	advance(t, s, "a", cursor.Progress{NextSeq: 8, Delivered: 3})
	if got, err = s.Rewind(ctx, "a", 6, at); err != nil || got.HighWater() != 20 {
		t.Fatalf("a second rewind below the furthest cursor = %+v, %v; want the furthest kept at 20", got, err)
	}
	if got, err = s.Rewind(ctx, "a", 50, at); err != nil || got.NextSeq != 50 || got.HighWater() != 50 {
		t.Fatalf("Rewind forward = %+v, %v", got, err)
	}
	must(t, s.Park(ctx, "a", "cannot project message 50"))
	got, err = s.Rewind(ctx, "a", 51, at)
	if err != nil || got.State != cursor.Parked || got.NextSeq != 51 || got.Attempts != 0 || got.LastError == "" {
		t.Fatalf("Rewind of a parked registration = %+v, %v", got, err)
	}
	if ids, _ := dueIDs(t, s, at, 10, "outbox"); len(ids) != 0 {
		t.Fatalf("a rewound parked row is due: %v", ids)
	}
	_, err = s.Rewind(ctx, "nobody", 1, at)
	wantErrIs(t, err, cursor.ErrNotFound)
}

func deleteDropsPending(t *testing.T, s cursor.Store, _ *clock) {
	ctx := context.Background()
	create(t, s, reg("a", "outbox"))
	advance(t, s, "a", cursor.Progress{NextSeq: 30})
	for range 2 {
		must(t, s.Delete(ctx, "a"))
	}
	if n := s.(interface{ Pending() int }).Pending(); n != 0 {
		t.Fatalf("Pending after Delete = %d", n)
	}
	create(t, s, reg("a", "outbox"))
	flush(t, s)
	if r := get(t, s, "a"); r.NextSeq != 0 {
		t.Fatalf("a new registration inherited the deleted one's cursor: %d", r.NextSeq)
	}
	if ids, _ := dueIDs(t, s, t0.Add(time.Hour), 10, "outbox"); len(ids) != 1 {
		t.Fatalf("Due = %v", ids)
	}
}

func listPages(t *testing.T, s cursor.Store, _ *clock) {
	ctx := context.Background()
	for _, id := range []string{"e", "a", "d", "b", "c"} {
		ns := "outbox"
		if id == "b" || id == "d" {
			ns = "a2a"
		}
		create(t, s, reg(id, ns))
	}
	must(t, s.Park(ctx, "c", "gone"))
	page := func(opt cursor.ListOptions) ([]string, string) {
		rows, next, err := s.List(ctx, opt)
		must(t, err)
		var ids []string
		for _, r := range rows {
			ids = append(ids, r.ID)
		}
		return ids, next
	}
	if ids, next := page(cursor.ListOptions{Limit: 2}); !slices.Equal(ids, []string{"a", "b"}) || next != "b" {
		t.Fatalf("page 1 = %v next %q", ids, next)
	}
	if ids, next := page(cursor.ListOptions{Limit: 2, After: "b"}); !slices.Equal(ids, []string{"c", "d"}) || next != "d" {
		t.Fatalf("page 2 = %v next %q", ids, next)
	}
	if ids, next := page(cursor.ListOptions{Limit: 2, After: "d"}); !slices.Equal(ids, []string{"e"}) || next != "" {
		t.Fatalf("page 3 = %v next %q", ids, next)
	}
	if ids, _ := page(cursor.ListOptions{Namespace: "a2a"}); !slices.Equal(ids, []string{"b", "d"}) {
		t.Fatalf("a2a = %v", ids)
	}
	if ids, _ := page(cursor.ListOptions{State: cursor.Parked}); !slices.Equal(ids, []string{"c"}) {
		t.Fatalf("parked = %v", ids)
	}
	if ids, _ := page(cursor.ListOptions{After: "bb"}); !slices.Equal(ids, []string{"c", "d", "e"}) {
		t.Fatalf("after a missing id = %v", ids)
	}
	create(t, s, reg("bb", "a2a"))
	if ids, next := page(cursor.ListOptions{Prefix: "b", Limit: 1}); !slices.Equal(ids, []string{"b"}) || next != "b" {
		t.Fatalf("prefix b, page 1 = %v next %q", ids, next)
	}
	if ids, next := page(cursor.ListOptions{Prefix: "b", After: "b"}); !slices.Equal(ids, []string{"bb"}) || next != "" {
		t.Fatalf("prefix b after b = %v next %q", ids, next)
	}
	if ids, _ := page(cursor.ListOptions{Prefix: "b", After: "a"}); !slices.Equal(ids, []string{"b", "bb"}) {
		t.Fatalf("prefix b after a = %v", ids)
	}
	if ids, _ := page(cursor.ListOptions{Prefix: "c", After: "d"}); len(ids) != 0 {
		t.Fatalf("prefix c after d = %v", ids)
	}
	if ids, _ := page(cursor.ListOptions{Prefix: "bz"}); len(ids) != 0 {
		t.Fatalf("prefix bz = %v", ids)
	}
}

func dueOrder(t *testing.T, s cursor.Store, _ *clock) {
	for i, off := range []int{4, 2, 5, 1, 3} {
		r := reg(fmt.Sprintf("r%d", i), "outbox")
		r.NextAttemptAt = t0.Add(time.Duration(off) * time.Second)
		create(t, s, r)
	}
	if ids, _ := dueIDs(t, s, t0.Add(3*time.Second), 10, "outbox"); !slices.Equal(ids, []string{"r3", "r1", "r4"}) {
		t.Fatalf("Due(t0+3s) = %v, want [r3 r1 r4]", ids)
	}
	if ids, _ := dueIDs(t, s, t0.Add(time.Hour), 2, "outbox"); !slices.Equal(ids, []string{"r3", "r1"}) {
		t.Fatalf("Due(limit 2) = %v", ids)
	}
	if ids, unserved := dueIDs(t, s, t0.Add(time.Hour), 0, "a2a"); len(ids) != 0 || unserved != 5 {
		t.Fatalf("Due(a2a, limit 0) = %v unserved %d", ids, unserved)
	}
	if _, unserved := dueIDs(t, s, t0.Add(2*time.Second), 0, "out"); unserved != 2 {
		t.Fatalf("Unserved at t0+2s for a namespace sharing a prefix = %d, want 2", unserved)
	}
	for i := range 3 {
		create(t, s, reg(fmt.Sprintf("a2a-%d", i), "a2a"))
	}
	if ids, unserved := dueIDs(t, s, t0, 2, "a2a"); len(ids) != 2 || unserved != 0 {
		t.Fatalf("Due(a2a) = %v unserved %d", ids, unserved)
	}
}

func routesFollowRows(t *testing.T, s cursor.Store, _ *clock) {
	ctx := context.Background()
	create(t, s, on("a", "outbox", "journal.orders.1"))
	create(t, s, on("b", "a2a", "journal.orders.1"))
	create(t, s, on("c", "outbox", "journal.orders.10"))
	create(t, s, on("w", "outbox", "journal.orders.*"))
	create(t, s, on("v", "outbox", "journal.>"))
	create(t, s, on("u", "outbox", "journal.*"))
	if got := routes(t, s, "journal.orders.1"); !slices.Equal(got, []string{"outbox/a", "a2a/b"}) {
		t.Fatalf("routes of journal.orders.1 = %v", got)
	}
	if got := routes(t, s, "journal.orders.*"); !slices.Equal(got, []string{"outbox/w"}) {
		t.Fatalf("routes of the wildcard = %v", got)
	}
	must(t, s.Park(ctx, "a", "gone"))
	advance(t, s, "b", cursor.Progress{NextSeq: 4, Complete: true})
	flush(t, s)
	if got := routes(t, s, "journal.orders.1"); len(got) != 0 {
		t.Fatalf("a parked and a completed registration still routed: %v", got)
	}
	if _, err := s.Unpark(ctx, "a", t0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Replace(ctx, on("c", "outbox", "journal.orders.1").Config, t0); err != nil {
		t.Fatal(err)
	}
	if got := routes(t, s, "journal.orders.1"); !slices.Equal(got, []string{"outbox/a", "outbox/c"}) {
		t.Fatalf("after unpark and replace: %v", got)
	}
	if got := routes(t, s, "journal.orders.10"); len(got) != 0 {
		t.Fatalf("the replaced filter still routes: %v", got)
	}
	must(t, s.Delete(ctx, "w"))
	var wild []string
	must(t, s.WildcardFilters(ctx, func(f string) { wild = append(wild, f) }))
	if !slices.Equal(wild, []string{"journal.*", "journal.>"}) {
		t.Fatalf("wildcard filters = %v", wild)
	}
}

func wakeBehind(t *testing.T, s cursor.Store, _ *clock) {
	ctx := context.Background()
	for _, id := range []string{"behind", "level", "ahead", "acked", "parked"} {
		create(t, s, on(id, "outbox", "journal."+id))
	}
	create(t, s, on("a2a-behind", "a2a", "journal.a2a.t"))
	for id, next := range map[string]uint64{"behind": 3, "level": 10, "ahead": 12, "acked": 4, "parked": 2, "a2a-behind": 9} {
		advance(t, s, id, cursor.Progress{NextSeq: next, Idle: true})
	}
	flush(t, s)
	must(t, s.Park(ctx, "parked", "gone"))
	advance(t, s, "acked", cursor.Progress{NextSeq: 11, Idle: true})
	n, err := s.WakeBehind(ctx, 10)
	must(t, err)
	due, _ := dueIDs(t, s, t0.Add(time.Second), 100, "outbox")
	a2a, _ := dueIDs(t, s, t0.Add(time.Second), 100, "a2a")
	if n != 2 || !slices.Equal(due, []string{"behind"}) || !slices.Equal(a2a, []string{"a2a-behind"}) {
		t.Fatalf("woke %d: due outbox %v, a2a %v", n, due, a2a)
	}
	if r := get(t, s, "behind"); r.NextSeq != 3 || r.State != cursor.Active {
		t.Fatalf("a woken registration moved: %+v", r)
	}
	if n, err := s.WakeBehind(ctx, 10); err != nil || n != 0 {
		t.Fatalf("second WakeBehind woke %d (%v)", n, err)
	}
}

func makeDue(t *testing.T, s cursor.Store, _ *clock) {
	ctx := context.Background()
	for _, id := range []string{"idle", "backoff", "parked"} {
		create(t, s, on(id, "outbox", "journal."+id))
		advance(t, s, id, cursor.Progress{NextSeq: 5, Idle: true})
	}
	flush(t, s)
	must(t, s.Retry(ctx, "backoff", t0.Add(time.Hour), "503"))
	must(t, s.Park(ctx, "parked", "gone"))
	must(t, s.MakeDue(ctx, []string{"idle", "backoff", "parked", "missing"}))
	if got := get(t, s, "idle").NextAttemptAt; !got.Equal(t0) {
		t.Errorf("idle registration due at %v, want %v", got, t0)
	}
	if got := get(t, s, "backoff").NextAttemptAt; !got.Equal(t0.Add(time.Hour)) {
		t.Errorf("backing-off registration due at %v", got)
	}
	if r := get(t, s, "parked"); r.State != cursor.Parked || !r.NextAttemptAt.IsZero() {
		t.Errorf("parked registration became %s due at %v", r.State, r.NextAttemptAt)
	}
}

// readers is what both stores offer beyond cursor.Store for metrics.
type readers interface {
	Counts(context.Context) (map[string]map[cursor.State]int, error)
	Backlog(context.Context, uint64) (map[string]uint64, error)
}

func countsAndBacklog(t *testing.T, s cursor.Store, _ *clock) {
	ctx := context.Background()
	for i, id := range []string{"a", "b", "c"} {
		r := reg(id, "outbox")
		r.NextSeq = uint64(5 * (i + 1)) // 5, 10, 15
		create(t, s, r)
	}
	create(t, s, reg("t", "a2a"))
	must(t, s.Park(ctx, "b", "gone"))
	advance(t, s, "t", cursor.Progress{NextSeq: 2, Complete: true})
	flush(t, s)
	counts, err := s.(readers).Counts(ctx)
	must(t, err)
	if counts["outbox"][cursor.Active] != 2 || counts["outbox"][cursor.Parked] != 1 || counts["a2a"][cursor.Completed] != 1 {
		t.Fatalf("Counts = %v", counts)
	}
	backlog, err := s.(readers).Backlog(ctx, 20)
	must(t, err)
	// 21-5 + 21-10 + 21-15 = 33; the completed task counts nothing.
	if backlog["outbox"] != 33 || backlog["a2a"] != 0 {
		t.Fatalf("Backlog = %v", backlog)
	}
}

func purge(t *testing.T, s cursor.Store, clk *clock) {
	ctx := context.Background()
	create(t, s, reg("old", "a2a"))
	create(t, s, reg("active", "a2a"))
	_, _, err := s.Create(ctx, reg("keyed", "a2a"), &cursor.Idempotency{Key: "k", Hash: []byte("h")})
	must(t, err)
	advance(t, s, "old", cursor.Progress{NextSeq: 2, Complete: true})
	flush(t, s)
	clk.Add(48 * time.Hour)
	create(t, s, reg("young", "a2a"))
	advance(t, s, "young", cursor.Progress{NextSeq: 2, Complete: true})
	flush(t, s)
	rep, err := s.Purge(ctx, cursor.NewRetentionPolicy(24*time.Hour))
	must(t, err)
	if rep.RegistrationsDeleted != 1 || rep.IdempotencyKeysDeleted != 1 || !rep.Complete {
		t.Fatalf("Purge = %+v", rep)
	}
	for id, want := range map[string]bool{"old": false, "active": true, "keyed": true, "young": true} {
		if _, err := s.Get(ctx, id); (err == nil) != want {
			t.Errorf("%s after Purge: %v", id, err)
		}
	}
	for _, id := range []string{"p1", "p2"} {
		create(t, s, reg(id, "a2a"))
		advance(t, s, id, cursor.Progress{NextSeq: 1, Complete: true})
	}
	flush(t, s)
	clk.Add(48 * time.Hour)
	one := cursor.NewRetentionPolicy(24 * time.Hour).WithBatchSize(1).WithMaxBatches(1)
	if rep, err := s.Purge(ctx, one); err != nil || rep.RegistrationsDeleted != 1 || rep.Batches != 1 || rep.Complete {
		t.Fatalf("Purge of one batch of one = %+v, %v; want one deleted, incomplete", rep, err)
	}
	if rep, err := s.Purge(ctx, one.WithMaxBatches(0)); err != nil || rep.RegistrationsDeleted != 2 || !rep.Complete {
		t.Fatalf("Purge of the rest = %+v, %v; want p2 and young, complete", rep, err)
	}
	if _, err := s.Purge(ctx, cursor.RetentionPolicy{CompletedMaxAge: -1}); err == nil {
		t.Error("Purge with a negative age succeeded")
	}
}

// idleFloorer is the capability the daemon uses to start without a mark.
type idleFloorer interface {
	IdleFloor(ctx context.Context) (uint64, bool, error)
}

func idleFloor(t *testing.T, s cursor.Store, _ *clock) {
	ctx := context.Background()
	f, ok := s.(idleFloorer)
	if !ok {
		t.Fatalf("%T cannot tell its idle floor", s)
	}
	if _, any, err := f.IdleFloor(ctx); err != nil || any {
		t.Fatalf("idle floor of an empty store: %v, %v", any, err)
	}
	for id, next := range map[string]uint64{"o1": 9, "o2": 4, "parked": 2} {
		create(t, s, on(id, "outbox", "journal."+id))
		advance(t, s, id, cursor.Progress{NextSeq: next, Idle: true})
	}
	create(t, s, on("due", "outbox", "journal.due"))
	flush(t, s)
	must(t, s.Park(ctx, "parked", "gone"))
	advance(t, s, "o2", cursor.Progress{NextSeq: 5, Idle: true}) // flushed by IdleFloor
	if floor, any, err := f.IdleFloor(ctx); err != nil || !any || floor != 5 {
		t.Fatalf("idle floor = %d, %v, %v; want 5", floor, any, err)
	}
}

package cursortest

import (
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/jetstream-bridge/bridge/cursor"
)

// opCases are the transitions: what each write does to a registration.
var opCases = []testCase{
	{"create starts active and due at once", createStartsActive},
	{"create rejects what it cannot store", createRejects},
	{"ids the admin API accepts are stored", oddIDs},
	{"idempotent create", idempotentCreate},
	{"replace keeps the cursor and resets failures", replaceKeepsCursor},
	{"advance is monotonic and counts", advanceIsMonotonic},
	{"advance idle leaves the due index and busy stays due", advanceIdle},
	{"advance complete completes in one step", advanceComplete},
	{"retry schedules and counts", retrySchedules},
	{"retry after a pending advance keeps the advanced cursor", retryCarriesAdvance},
	{"park and unpark", parkAndUnpark},
	{"last error is bounded", lastErrorIsBounded},
	{"rewind moves the cursor exactly and keeps the state", rewind},
	{"delete is idempotent and drops pending progress", deleteDropsPending},
	{"purge deletes old completed rows only", purge},
}

func createStartsActive(e *env) {
	in := reg("billing", "outbox")
	in.NextSeq = 42
	// Delivery state handed in by the caller is not taken over.
	in.State, in.Attempts, in.LastError, in.Delivered = cursor.Parked, 7, "old", 99
	got := e.create(in)
	if got.State != cursor.Active || got.NextSeq != 42 || got.Attempts != 0 || got.LastError != "" || got.Delivered != 0 {
		e.t.Fatalf("created = %+v", got)
	}
	if !got.CreatedAt.Equal(T0) || !got.UpdatedAt.Equal(T0) || !got.NextAttemptAt.Equal(T0) {
		e.t.Fatalf("times = created %v updated %v next %v, want all %v", got.CreatedAt, got.UpdatedAt, got.NextAttemptAt, T0)
	}
	if ids, _ := e.dueIDs(T0, 10, "outbox"); !slices.Equal(ids, []string{"billing"}) {
		e.t.Fatalf("Due right after Create = %v", ids)
	}
	if g := e.get("billing"); g.Secret != in.Secret || g.URL != in.URL || g.Subject != in.Subject || g.NextSeq != 42 {
		e.t.Fatalf("Get lost the config: %+v", g)
	}
	e.check()
	// A schedule the caller set is kept.
	later := reg("later", "outbox")
	later.NextAttemptAt = T0.Add(time.Minute)
	e.create(later)
	if ids, _ := e.dueIDs(T0.Add(time.Second), 10, "outbox"); !slices.Equal(ids, []string{"billing"}) {
		e.t.Fatalf("Due before the scheduled one's time = %v", ids)
	}
	if ids, _ := e.dueIDs(T0.Add(time.Minute), 10, "outbox"); !slices.Equal(ids, []string{"billing", "later"}) {
		e.t.Fatalf("Due at the scheduled one's time = %v", ids)
	}
}

func createRejects(e *env) {
	for name, r := range map[string]cursor.Registration{"empty id": reg("", "outbox"), "empty namespace": reg("x", "")} {
		if _, _, err := e.s.Create(e.ctx, r, nil); err == nil {
			e.t.Errorf("%s: Create succeeded", name)
		}
	}
	if _, _, err := e.s.Create(e.ctx, reg("x", "outbox"), &cursor.Idempotency{}); err == nil {
		e.t.Error("Create with an empty idempotency key succeeded")
	}
	e.create(reg("x", "outbox"))
	_, _, err := e.s.Create(e.ctx, reg("x", "a2a"), nil)
	e.wantErrIs(err, cursor.ErrExists)
	if !strings.Contains(err.Error(), `"x"`) {
		e.t.Errorf("ErrExists does not name the id: %v", err)
	}
	_, err = e.s.Get(e.ctx, "nobody")
	e.wantErrIs(err, cursor.ErrNotFound)
}

// oddIDs: every id of [A-Za-z0-9._-]{1,128} is a key, dots and all, and a
// deleted id can be created again.
func oddIDs(e *env) {
	ids := []string{"a..b", ".x", "x.", "-", "_", "a.b.c", strings.Repeat("Z", 128)}
	for _, id := range ids {
		e.create(reg(id, "outbox"))
		if got := e.get(id); got.ID != id {
			e.t.Fatalf("Get(%q).ID = %q", id, got.ID)
		}
	}
	e.must(e.s.Delete(e.ctx, "a..b"))
	r := reg("a..b", "outbox")
	r.NextSeq = 7
	if got := e.create(r); got.NextSeq != 7 {
		e.t.Fatalf("recreated = %+v", got)
	}
	rows, _, err := e.s.List(e.ctx, cursor.ListOptions{})
	e.must(err)
	var got []string
	for _, r := range rows {
		got = append(got, r.ID)
	}
	slices.Sort(ids)
	if !slices.Equal(got, ids) {
		e.t.Fatalf("List = %v, want %v", got, ids)
	}
}

func idempotentCreate(e *env) {
	calls := 0
	idem := func(key, hash string) *cursor.Idempotency {
		return &cursor.Idempotency{Key: key, Hash: []byte(hash), Answer: func(r cursor.Registration) ([]byte, error) {
			calls++
			return []byte(`{"id":"` + r.ID + `"}`), nil
		}}
	}
	first, answer, err := e.s.Create(e.ctx, reg("a", "outbox"), idem("k.1", "body-1"))
	if err != nil || string(answer) != `{"id":"a"}` {
		e.t.Fatalf("first create: %q, %v", answer, err)
	}
	// A replay answers the same and creates nothing.
	r, again, err := e.s.Create(e.ctx, reg("a", "outbox"), idem("k.1", "body-1"))
	if err != nil || string(again) != string(answer) || r.ID != "a" || !r.CreatedAt.Equal(first.CreatedAt) || calls != 1 {
		e.t.Fatalf("replay = %+v, %q, %v (answer rendered %d times, want once)", r, again, err, calls)
	}
	// Another body is a conflict.
	_, _, err = e.s.Create(e.ctx, reg("b", "outbox"), idem("k.1", "body-2"))
	e.wantErrIs(err, cursor.ErrIdempotencyConflict)
	if _, err := e.s.Get(e.ctx, "b"); !errors.Is(err, cursor.ErrNotFound) {
		e.t.Fatalf("a conflicting create stored b: %v", err)
	}
	// A failed create releases the key.
	_, _, err = e.s.Create(e.ctx, reg("a", "outbox"), idem("k2", "body-3"))
	e.wantErrIs(err, cursor.ErrExists)
	if r, ans, err := e.s.Create(e.ctx, reg("c", "outbox"), idem("k2", "body-4")); err != nil || r.ID != "c" || string(ans) != `{"id":"c"}` {
		e.t.Fatalf("create after a failed one = %+v, %q, %v", r, ans, err)
	}
	// A failing answer stores nothing, not even the key.
	bad := &cursor.Idempotency{Key: "k3", Hash: []byte("x"), Answer: func(cursor.Registration) ([]byte, error) {
		return nil, errors.New("render failed")
	}}
	if _, _, err := e.s.Create(e.ctx, reg("d", "outbox"), bad); err == nil {
		e.t.Fatal("Create with a failing Answer succeeded")
	}
	if _, err := e.s.Get(e.ctx, "d"); !errors.Is(err, cursor.ErrNotFound) {
		e.t.Fatalf("stored although its answer failed: %v", err)
	}
	if _, _, err := e.s.Create(e.ctx, reg("d", "outbox"), idem("k3", "other")); err != nil {
		e.t.Fatalf("key k3 was kept after a failed create: %v", err)
	}
	// A replay after a delete returns the answer, not another registration.
	e.must(e.s.Delete(e.ctx, "a"))
	r, ans, err := e.s.Create(e.ctx, reg("a", "outbox"), idem("k.1", "body-1"))
	if err != nil || string(ans) != string(answer) || r.ID != "" {
		e.t.Fatalf("replay after delete = %+v, %q, %v", r, ans, err)
	}
	if _, err := e.s.Get(e.ctx, "a"); !errors.Is(err, cursor.ErrNotFound) {
		e.t.Fatalf("replay recreated the registration: %v", err)
	}
}

func replaceKeepsCursor(e *env) {
	r := reg("billing", "outbox")
	r.NextSeq = 5
	e.create(r)
	e.advance("billing", cursor.Progress{NextSeq: 9, Delivered: 4})
	e.must(e.s.Park(e.ctx, "billing", "410 Gone"))
	e.clk.Add(time.Hour)
	c := r.Config
	c.URL, c.Namespace = "https://new.example/hook", ""
	at := T0.Add(2 * time.Hour)
	got, err := e.s.Replace(e.ctx, c, at)
	e.must(err)
	want := cursor.Registration{Config: r.Config, State: cursor.Active, NextSeq: 9, Delivered: 4,
		NextAttemptAt: at, CreatedAt: T0, UpdatedAt: T0.Add(time.Hour)}
	want.URL = c.URL
	for _, g := range []cursor.Registration{got, e.get("billing")} {
		if !same(g, want) {
			e.t.Fatalf("replaced = %+v\nwant       %+v", g, want)
		}
	}
	e.check()
	c.Namespace = "a2a"
	if _, err := e.s.Replace(e.ctx, c, at); err == nil || !strings.Contains(err.Error(), "namespace") {
		e.t.Fatalf("Replace into another namespace: %v", err)
	}
	_, err = e.s.Replace(e.ctx, cursor.Config{ID: "nobody"}, at)
	e.wantErrIs(err, cursor.ErrNotFound)

	// A completed registration stays completed, with its new Config.
	e.create(reg("task", "a2a"))
	e.advance("task", cursor.Progress{NextSeq: 3, Complete: true})
	tc := reg("task", "a2a").Config
	tc.URL = "https://new.example/hook"
	if got, err := e.s.Replace(e.ctx, tc, at); err != nil || got.State != cursor.Completed || !got.NextAttemptAt.IsZero() || got.URL != tc.URL {
		e.t.Fatalf("replaced completed = %+v, %v", got, err)
	}
}

func advanceIsMonotonic(e *env) {
	e.create(reg("a", "outbox"))
	e.must(e.s.Retry(e.ctx, "a", T0.Add(time.Second), "503"))
	e.advance("a", cursor.Progress{NextSeq: 10, Delivered: 3})
	e.advance("a", cursor.Progress{NextSeq: 4, Delivered: 2})
	for _, stage := range []string{"pending", "flushed"} {
		if r := e.get("a"); r.NextSeq != 10 || r.Delivered != 5 || r.Attempts != 0 || r.LastError != "" {
			e.t.Fatalf("%s: after advances = %+v", stage, r)
		}
		// A busy Advance keeps the schedule the Retry set.
		if ids, _ := e.dueIDs(T0.Add(time.Second), 10, "outbox"); !slices.Equal(ids, []string{"a"}) {
			e.t.Fatalf("%s: Due = %v, want [a]", stage, ids)
		}
		e.flush()
	}
	e.wantErrIs(e.s.Advance(e.ctx, "nobody", cursor.Progress{NextSeq: 1}), cursor.ErrNotFound)
}

func advanceIdle(e *env) {
	e.create(reg("idle", "outbox"))
	e.create(reg("busy", "outbox"))
	e.advance("idle", cursor.Progress{NextSeq: 5, Idle: true})
	e.advance("busy", cursor.Progress{NextSeq: 5})
	for _, stage := range []string{"pending", "flushed"} {
		if ids, _ := e.dueIDs(T0, 10, "outbox"); !slices.Equal(ids, []string{"busy"}) {
			e.t.Fatalf("%s: Due = %v, want [busy]", stage, ids)
		}
		if r := e.get("idle"); !r.NextAttemptAt.IsZero() {
			e.t.Fatalf("%s: idle row still scheduled at %v", stage, r.NextAttemptAt)
		}
		e.flush()
		e.check()
	}
	// An Advance that is not idle wakes an idle row, due from the Advance.
	e.clk.Add(time.Minute)
	e.advance("idle", cursor.Progress{NextSeq: 6})
	e.flush()
	if ids, _ := e.dueIDs(e.clk.Now(), 10, "outbox"); len(ids) != 2 {
		e.t.Fatalf("Due after waking = %v", ids)
	}
}

func advanceComplete(e *env) {
	e.create(reg("task", "a2a"))
	e.clk.Add(time.Minute)
	e.advance("task", cursor.Progress{NextSeq: 8, Delivered: 1, Complete: true})
	// A later, non-terminal Advance cannot undo the completion.
	e.advance("task", cursor.Progress{NextSeq: 8})
	want := func(stage string, r cursor.Registration) {
		e.t.Helper()
		if r.State != cursor.Completed || r.NextSeq != 8 || !r.CompletedAt.Equal(T0.Add(time.Minute)) || !r.NextAttemptAt.IsZero() {
			e.t.Fatalf("%s: %+v", stage, r)
		}
	}
	want("pending", e.get("task"))
	if ids, _ := e.dueIDs(T0.Add(time.Hour), 10, "a2a"); len(ids) != 0 {
		e.t.Fatalf("completed row is due: %v", ids)
	}
	if c := e.counts(); c["a2a"][cursor.Completed] != 1 || c["a2a"][cursor.Active] != 0 {
		e.t.Fatalf("Counts with a pending completion = %v", c)
	}
	e.reopen(false, Options{})
	want("after Close", e.get("task"))
	if ids, _ := e.dueIDs(T0.Add(time.Hour), 10, "a2a"); len(ids) != 0 {
		e.t.Fatalf("completed row is due after Close: %v", ids)
	}
}

func retrySchedules(e *env) {
	e.create(reg("a", "outbox"))
	next := T0.Add(time.Hour)
	for i := 1; i <= 2; i++ {
		e.must(e.s.Retry(e.ctx, "a", next, "503 Service Unavailable"))
		if r := e.get("a"); r.Attempts != uint32(i) || !r.NextAttemptAt.Equal(next) || r.LastError != "503 Service Unavailable" {
			e.t.Fatalf("after %d retries: %+v", i, r)
		}
	}
	if ids, _ := e.dueIDs(next.Add(-time.Nanosecond), 10, "outbox"); len(ids) != 0 {
		e.t.Fatalf("due before its retry: %v", ids)
	}
	if ids, _ := e.dueIDs(next, 10, "outbox"); len(ids) != 1 {
		e.t.Fatalf("not due at its retry: %v", ids)
	}
	e.wantErrIs(e.s.Retry(e.ctx, "nobody", next, "x"), cursor.ErrNotFound)
}

// The Retry's write carries the pending Advance: it is durable without a
// Flush, and a later Flush cannot reset the failure the Retry recorded.
func retryCarriesAdvance(e *env) {
	e.create(reg("a", "outbox"))
	e.advance("a", cursor.Progress{NextSeq: 7, Delivered: 6})
	e.must(e.s.Retry(e.ctx, "a", T0.Add(time.Hour), "timeout"))
	e.flush()
	e.reopen(true, Options{})
	if r := e.get("a"); r.NextSeq != 7 || r.Delivered != 6 || r.Attempts != 1 || r.LastError != "timeout" {
		e.t.Fatalf("after Retry over a pending Advance and a crash: %+v", r)
	}
}

func parkAndUnpark(e *env) {
	e.create(reg("a", "outbox"))
	e.advance("a", cursor.Progress{NextSeq: 12})
	if ok, err := e.s.Unpark(e.ctx, "a", T0); ok || err != nil {
		e.t.Fatalf("Unpark of an active registration = %v, %v; want false, nil", ok, err)
	}
	e.must(e.s.Park(e.ctx, "a", "410 Gone"))
	if r := e.get("a"); r.State != cursor.Parked || r.NextSeq != 12 || r.Attempts != 1 || r.LastError != "410 Gone" || !r.NextAttemptAt.IsZero() {
		e.t.Fatalf("parked = %+v", r)
	}
	if ids, _ := e.dueIDs(T0.Add(2*time.Hour), 10, "outbox"); len(ids) != 0 {
		e.t.Fatalf("parked row is due: %v", ids)
	}
	e.check()
	at := T0.Add(time.Minute)
	if ok, err := e.s.Unpark(e.ctx, "a", at); !ok || err != nil {
		e.t.Fatalf("Unpark = %v, %v", ok, err)
	}
	if r := e.get("a"); r.State != cursor.Active || r.NextSeq != 12 || r.Attempts != 0 || r.LastError != "" || !r.NextAttemptAt.Equal(at) {
		e.t.Fatalf("unparked = %+v", r)
	}
	e.check()
	_, err := e.s.Unpark(e.ctx, "nobody", at)
	e.wantErrIs(err, cursor.ErrNotFound)
	e.wantErrIs(e.s.Park(e.ctx, "nobody", "x"), cursor.ErrNotFound)
}

func lastErrorIsBounded(e *env) {
	e.create(reg("a", "outbox"))
	huge := strings.Repeat("é", 10_000)
	e.must(e.s.Retry(e.ctx, "a", T0, huge))
	if r := e.get("a"); len(r.LastError) > 4096 || !strings.HasPrefix(huge, r.LastError) || len(r.LastError) < 4000 {
		e.t.Fatalf("stored LastError is %d bytes", len(r.LastError))
	}
}

func rewind(e *env) {
	r := reg("a", "outbox")
	r.NextSeq = 10
	e.create(r)
	e.advance("a", cursor.Progress{NextSeq: 20, Delivered: 10})
	at := T0.Add(time.Minute)
	got, err := e.s.Rewind(e.ctx, "a", 5, at)
	if err != nil || got.NextSeq != 5 || got.Delivered != 10 || !got.NextAttemptAt.Equal(at) {
		e.t.Fatalf("Rewind back = %+v, %v", got, err)
	}
	e.flush() // the Advance to 20 was folded, not kept to land later
	if r := e.get("a"); r.NextSeq != 5 || r.HighWater() != 20 {
		e.t.Fatalf("after Flush the cursor is %d and the furthest %d, want 5 and 20", r.NextSeq, r.HighWater())
	}
	e.advance("a", cursor.Progress{NextSeq: 8, Delivered: 3})
	if got, err = e.s.Rewind(e.ctx, "a", 6, at); err != nil || got.HighWater() != 20 {
		e.t.Fatalf("a second rewind below the furthest cursor = %+v, %v; want the furthest kept at 20", got, err)
	}
	if got, err = e.s.Rewind(e.ctx, "a", 50, at); err != nil || got.NextSeq != 50 || got.HighWater() != 50 {
		e.t.Fatalf("Rewind forward = %+v, %v", got, err)
	}
	e.must(e.s.Park(e.ctx, "a", "cannot project message 50"))
	got, err = e.s.Rewind(e.ctx, "a", 51, at)
	if err != nil || got.State != cursor.Parked || got.NextSeq != 51 || got.Attempts != 0 || got.LastError == "" {
		e.t.Fatalf("Rewind of a parked registration = %+v, %v", got, err)
	}
	if ids, _ := e.dueIDs(at, 10, "outbox"); len(ids) != 0 {
		e.t.Fatalf("a rewound parked row is due: %v", ids)
	}
	_, err = e.s.Rewind(e.ctx, "nobody", 1, at)
	e.wantErrIs(err, cursor.ErrNotFound)
}

func deleteDropsPending(e *env) {
	e.create(reg("a", "outbox"))
	e.advance("a", cursor.Progress{NextSeq: 30})
	for range 2 {
		e.must(e.s.Delete(e.ctx, "a"))
	}
	if n := e.pending(); n != 0 {
		e.t.Fatalf("Pending after Delete = %d", n)
	}
	e.create(reg("a", "outbox"))
	e.flush()
	if r := e.get("a"); r.NextSeq != 0 {
		e.t.Fatalf("a new registration inherited the deleted one's cursor: %d", r.NextSeq)
	}
	if ids, _ := e.dueIDs(T0.Add(time.Hour), 10, "outbox"); len(ids) != 1 {
		e.t.Fatalf("Due = %v", ids)
	}
}

func purge(e *env) {
	e.create(reg("old", "a2a"))
	e.create(reg("active", "a2a"))
	_, _, err := e.s.Create(e.ctx, reg("keyed", "a2a"), &cursor.Idempotency{Key: "k", Hash: []byte("h")})
	e.must(err)
	e.advance("old", cursor.Progress{NextSeq: 2, Complete: true})
	e.flush()
	e.clk.Add(48 * time.Hour)
	e.create(reg("young", "a2a"))
	e.advance("young", cursor.Progress{NextSeq: 2, Complete: true})
	e.flush()
	rep, err := e.s.Purge(e.ctx, cursor.NewRetentionPolicy(24*time.Hour))
	e.must(err)
	if rep.RegistrationsDeleted != 1 || rep.IdempotencyKeysDeleted != 1 || !rep.Complete {
		e.t.Fatalf("Purge = %+v", rep)
	}
	for id, want := range map[string]bool{"old": false, "active": true, "keyed": true, "young": true} {
		if _, err := e.s.Get(e.ctx, id); (err == nil) != want {
			e.t.Errorf("%s after Purge: %v", id, err)
		}
	}
	for _, id := range []string{"p1", "p2"} {
		e.create(reg(id, "a2a"))
		e.advance(id, cursor.Progress{NextSeq: 1, Complete: true})
	}
	e.flush()
	e.clk.Add(48 * time.Hour)
	one := cursor.NewRetentionPolicy(24 * time.Hour).WithBatchSize(1).WithMaxBatches(1)
	if rep, err := e.s.Purge(e.ctx, one); err != nil || rep.RegistrationsDeleted != 1 || rep.Batches != 1 || rep.Complete {
		e.t.Fatalf("Purge of one batch of one = %+v, %v; want one deleted, incomplete", rep, err)
	}
	if rep, err := e.s.Purge(e.ctx, one.WithMaxBatches(0)); err != nil || rep.RegistrationsDeleted != 2 || !rep.Complete {
		e.t.Fatalf("Purge of the rest = %+v, %v; want p2 and young, complete", rep, err)
	}
	if _, err := e.s.Purge(e.ctx, cursor.RetentionPolicy{CompletedMaxAge: -1}); err == nil {
		e.t.Error("Purge with a negative age succeeded")
	}
}

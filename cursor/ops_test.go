package cursor_test

import (
	"context"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jetstream-bridge/bridge/cursor"
)

func TestCreateStartsActiveAndDueAtOnce(t *testing.T) {
	clk := newClock()
	db, _ := open(t, cursor.WithClock(clk.Now))
	in := reg("billing", "outbox")
	in.NextSeq = 42
	// Delivery state handed in by the caller is not taken over.
	in.State, in.Attempts, in.LastError, in.Delivered = cursor.Parked, 7, "old", 99
	got := create(t, db, in)
	if got.State != cursor.Active || got.NextSeq != 42 || got.Attempts != 0 || got.LastError != "" || got.Delivered != 0 {
		t.Fatalf("created = %+v", got)
	}
	if !got.CreatedAt.Equal(t0) || !got.UpdatedAt.Equal(t0) || !got.NextAttemptAt.Equal(t0) {
		t.Fatalf("times = created %v updated %v next %v, want all %v", got.CreatedAt, got.UpdatedAt, got.NextAttemptAt, t0)
	}
	if ids, _ := dueIDs(t, db, t0, 10, "outbox"); len(ids) != 1 || ids[0] != "billing" {
		t.Fatalf("Due right after Create = %v", ids)
	}
	if g := get(t, db, "billing"); g.Secret != in.Secret || g.URL != in.URL || g.Subject != in.Subject {
		t.Fatalf("Get lost the config: %+v", g)
	}
	check(t, db)
}

func TestCreateKeepsAScheduleTheCallerSet(t *testing.T) {
	clk := newClock()
	db, _ := open(t, cursor.WithClock(clk.Now))
	in := reg("later", "outbox")
	in.NextAttemptAt = t0.Add(time.Minute)
	create(t, db, in)
	if ids, _ := dueIDs(t, db, t0, 10, "outbox"); len(ids) != 0 {
		t.Fatalf("Due before its time = %v", ids)
	}
	if ids, _ := dueIDs(t, db, t0.Add(time.Minute), 10, "outbox"); len(ids) != 1 {
		t.Fatalf("Due at its time = %v", ids)
	}
	check(t, db)
}

func TestCreateRejectsWhatItCannotStore(t *testing.T) {
	db, _ := open(t)
	ctx := context.Background()
	for name, r := range map[string]cursor.Registration{
		"empty id":        reg("", "outbox"),
		"empty namespace": reg("x", ""),
	} {
		if _, _, err := db.Create(ctx, r, nil); err == nil {
			t.Errorf("%s: Create succeeded", name)
		}
	}
	if _, _, err := db.Create(ctx, reg("x", "outbox"), &cursor.Idempotency{}); err == nil {
		t.Error("Create with an empty idempotency key succeeded")
	}
	create(t, db, reg("x", "outbox"))
	_, _, err := db.Create(ctx, reg("x", "a2a"), nil)
	wantErrIs(t, err, cursor.ErrExists)
	if !strings.Contains(err.Error(), `"x"`) {
		t.Errorf("ErrExists does not name the id: %v", err)
	}
	check(t, db)
}

func TestIdempotentCreate(t *testing.T) {
	ctx := context.Background()
	db, _ := open(t)
	calls := 0
	idem := func(key, hash string) *cursor.Idempotency {
		return &cursor.Idempotency{Key: key, Hash: []byte(hash), Answer: func(r cursor.Registration) ([]byte, error) {
			calls++
			return []byte(`{"id":"` + r.ID + `"}`), nil
		}}
	}

	first, answer, err := db.Create(ctx, reg("a", "outbox"), idem("k1", "body-1"))
	if err != nil || string(answer) != `{"id":"a"}` {
		t.Fatalf("first create: %q, %v", answer, err)
	}

	t.Run("replay answers the same and creates nothing", func(t *testing.T) {
		r, again, err := db.Create(ctx, reg("a", "outbox"), idem("k1", "body-1"))
		if err != nil || string(again) != string(answer) || r.ID != "a" || !r.CreatedAt.Equal(first.CreatedAt) {
			t.Fatalf("replay = %+v, %q, %v", r, again, err)
		}
		if calls != 1 {
			t.Fatalf("Answer rendered %d times, want once", calls)
		}
	})

	t.Run("another body is a conflict", func(t *testing.T) {
		_, _, err := db.Create(ctx, reg("b", "outbox"), idem("k1", "body-2"))
		wantErrIs(t, err, cursor.ErrIdempotencyConflict)
		if _, err := db.Get(ctx, "b"); !errors.Is(err, cursor.ErrNotFound) {
			t.Fatalf("a conflicting create stored %q: %v", "b", err)
		}
	})

	t.Run("a failed create releases the key", func(t *testing.T) {
		_, _, err := db.Create(ctx, reg("a", "outbox"), idem("k2", "body-3"))
		wantErrIs(t, err, cursor.ErrExists)
		r, ans, err := db.Create(ctx, reg("c", "outbox"), idem("k2", "body-4"))
		if err != nil || r.ID != "c" || string(ans) != `{"id":"c"}` {
			t.Fatalf("create after the failed one = %+v, %q, %v", r, ans, err)
		}
	})

	t.Run("a failing answer stores nothing", func(t *testing.T) {
		bad := &cursor.Idempotency{Key: "k3", Hash: []byte("x"), Answer: func(cursor.Registration) ([]byte, error) {
			return nil, errors.New("render failed")
		}}
		if _, _, err := db.Create(ctx, reg("d", "outbox"), bad); err == nil {
			t.Fatal("Create with a failing Answer succeeded")
		}
		if _, err := db.Get(ctx, "d"); !errors.Is(err, cursor.ErrNotFound) {
			t.Fatalf("registration stored although its answer failed: %v", err)
		}
		if _, _, err := db.Create(ctx, reg("d", "outbox"), idem("k3", "other")); err != nil {
			t.Fatalf("key k3 was kept after a failed create: %v", err)
		}
	})

	t.Run("replay after delete returns the answer, not another registration", func(t *testing.T) {
		if err := db.Delete(ctx, "a"); err != nil {
			t.Fatal(err)
		}
		r, ans, err := db.Create(ctx, reg("a", "outbox"), idem("k1", "body-1"))
		if err != nil || string(ans) != string(answer) || r.ID != "" {
			t.Fatalf("replay after delete = %+v, %q, %v", r, ans, err)
		}
		if _, err := db.Get(ctx, "a"); !errors.Is(err, cursor.ErrNotFound) {
			t.Fatalf("replay recreated the registration: %v", err)
		}
	})
	check(t, db)
}

func TestReplaceKeepsTheCursorAndResetsFailures(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	db, _ := open(t, cursor.WithClock(clk.Now))
	r := reg("billing", "outbox")
	r.NextSeq = 5
	create(t, db, r)
	advance(t, db, "billing", cursor.Progress{NextSeq: 9, Delivered: 4})
	if err := db.Park(ctx, "billing", "410 Gone"); err != nil {
		t.Fatal(err)
	}
	clk.Add(time.Hour)

	c := r.Config
	c.URL = "https://new.example/hook"
	c.Namespace = ""
	at := t0.Add(2 * time.Hour)
	got, err := db.Replace(ctx, c, at)
	if err != nil {
		t.Fatal(err)
	}
	want := cursor.Registration{Config: r.Config, State: cursor.Active, NextSeq: 9, Delivered: 4,
		NextAttemptAt: at, CreatedAt: t0, UpdatedAt: t0.Add(time.Hour)}
	want.URL = c.URL
	if !same(got, want) || !same(get(t, db, "billing"), want) {
		t.Fatalf("replaced = %+v\nwant       %+v", got, want)
	}
	check(t, db)

	c.Namespace = "a2a"
	if _, err := db.Replace(ctx, c, at); err == nil || !strings.Contains(err.Error(), "namespace") {
		t.Fatalf("Replace into another namespace: %v", err)
	}
	_, err = db.Replace(ctx, cursor.Config{ID: "nobody"}, at)
	wantErrIs(t, err, cursor.ErrNotFound)
}

func TestReplaceOfACompletedRegistrationKeepsItCompleted(t *testing.T) {
	ctx := context.Background()
	db, _ := open(t)
	r := create(t, db, reg("task", "a2a"))
	advance(t, db, "task", cursor.Progress{NextSeq: 3, Complete: true})
	c := r.Config
	c.URL = "https://new.example/hook"
	got, err := db.Replace(ctx, c, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if got.State != cursor.Completed || !got.NextAttemptAt.IsZero() || got.URL != c.URL {
		t.Fatalf("replaced completed = %+v", got)
	}
	check(t, db)
}

func TestAdvanceIsMonotonicAndCounts(t *testing.T) {
	clk := newClock()
	db, _ := open(t, cursor.WithClock(clk.Now))
	create(t, db, reg("a", "outbox"))
	if err := db.Retry(context.Background(), "a", t0.Add(time.Second), "503"); err != nil {
		t.Fatal(err)
	}
	advance(t, db, "a", cursor.Progress{NextSeq: 10, Delivered: 3})
	advance(t, db, "a", cursor.Progress{NextSeq: 4, Delivered: 2})
	for _, r := range []cursor.Registration{get(t, db, "a"), func() cursor.Registration { flush(t, db); return get(t, db, "a") }()} {
		if r.NextSeq != 10 || r.Delivered != 5 || r.Attempts != 0 || r.LastError != "" {
			t.Fatalf("after advances = %+v", r)
		}
	}
	err := db.Advance(context.Background(), "nobody", cursor.Progress{NextSeq: 1})
	wantErrIs(t, err, cursor.ErrNotFound)
	check(t, db)
}

func TestAdvanceIdleLeavesTheDueIndexAndBusyStaysDue(t *testing.T) {
	clk := newClock()
	db, _ := open(t, cursor.WithClock(clk.Now))
	create(t, db, reg("idle", "outbox"))
	create(t, db, reg("busy", "outbox"))
	advance(t, db, "idle", cursor.Progress{NextSeq: 5, Idle: true})
	advance(t, db, "busy", cursor.Progress{NextSeq: 5})
	for _, stage := range []string{"pending", "flushed"} {
		if ids, _ := dueIDs(t, db, t0, 10, "outbox"); len(ids) != 1 || ids[0] != "busy" {
			t.Fatalf("%s: Due = %v, want [busy]", stage, ids)
		}
		if r := get(t, db, "idle"); !r.NextAttemptAt.IsZero() {
			t.Fatalf("%s: idle row still scheduled at %v", stage, r.NextAttemptAt)
		}
		flush(t, db)
		check(t, db)
	}
	// An Advance that is not idle wakes an idle row, due from the Advance.
	clk.Add(time.Minute)
	advance(t, db, "idle", cursor.Progress{NextSeq: 6})
	flush(t, db)
	if ids, _ := dueIDs(t, db, clk.Now(), 10, "outbox"); len(ids) != 2 {
		t.Fatalf("Due after waking = %v", ids)
	}
	check(t, db)
}

func TestAdvanceCompleteCompletesInOneStep(t *testing.T) {
	clk := newClock()
	db, path := open(t, cursor.WithClock(clk.Now))
	create(t, db, reg("task", "a2a"))
	clk.Add(time.Minute)
	advance(t, db, "task", cursor.Progress{NextSeq: 8, Delivered: 1, Complete: true})
	// A later, non-terminal Advance cannot undo the completion.
	advance(t, db, "task", cursor.Progress{NextSeq: 8})
	want := func(stage string, r cursor.Registration) {
		t.Helper()
		if r.State != cursor.Completed || r.NextSeq != 8 || !r.CompletedAt.Equal(t0.Add(time.Minute)) || !r.NextAttemptAt.IsZero() {
			t.Fatalf("%s: %+v", stage, r)
		}
	}
	want("pending", get(t, db, "task"))
	if ids, _ := dueIDs(t, db, t0.Add(time.Hour), 10, "a2a"); len(ids) != 0 {
		t.Fatalf("completed row is due: %v", ids)
	}
	counts, err := db.Counts(context.Background())
	if err != nil || counts["a2a"][cursor.Completed] != 1 || counts["a2a"][cursor.Active] != 0 {
		t.Fatalf("Counts with a pending completion = %v, %v", counts, err)
	}
	closeNow(t, db)
	db = reopen(t, path)
	want("after Close", get(t, db, "task"))
	check(t, db)
}

func TestRetrySchedulesAndCounts(t *testing.T) {
	ctx := context.Background()
	db, _ := open(t)
	create(t, db, reg("a", "outbox"))
	next := t0.Add(time.Hour)
	for i := 1; i <= 2; i++ {
		if err := db.Retry(ctx, "a", next, "503 Service Unavailable"); err != nil {
			t.Fatal(err)
		}
		if r := get(t, db, "a"); r.Attempts != uint32(i) || !r.NextAttemptAt.Equal(next) || r.LastError != "503 Service Unavailable" {
			t.Fatalf("after %d retries: %+v", i, r)
		}
	}
	if ids, _ := dueIDs(t, db, next.Add(-time.Nanosecond), 10, "outbox"); len(ids) != 0 {
		t.Fatalf("due before its retry: %v", ids)
	}
	if ids, _ := dueIDs(t, db, next, 10, "outbox"); len(ids) != 1 {
		t.Fatalf("not due at its retry: %v", ids)
	}
	wantErrIs(t, db.Retry(ctx, "nobody", next, "x"), cursor.ErrNotFound)
	check(t, db)
}

func TestRetryAfterAPendingAdvanceKeepsTheAdvancedCursor(t *testing.T) {
	db, _ := open(t)
	create(t, db, reg("a", "outbox"))
	advance(t, db, "a", cursor.Progress{NextSeq: 7, Delivered: 6})
	if err := db.Retry(context.Background(), "a", t0.Add(time.Hour), "timeout"); err != nil {
		t.Fatal(err)
	}
	// The Retry's transaction carried the Advance: it is durable without a
	// Flush, and a later Flush cannot reset the failure the Retry recorded.
	flush(t, db)
	db = crash(t, db)
	r := get(t, db, "a")
	if r.NextSeq != 7 || r.Delivered != 6 || r.Attempts != 1 || r.LastError != "timeout" {
		t.Fatalf("after Retry over a pending Advance: %+v", r)
	}
	check(t, db)
}

func TestParkAndUnpark(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	db, _ := open(t, cursor.WithClock(clk.Now))
	create(t, db, reg("a", "outbox"))
	advance(t, db, "a", cursor.Progress{NextSeq: 12})
	if ok, err := db.Unpark(ctx, "a", t0); ok || err != nil {
		t.Fatalf("Unpark of an active registration = %v, %v; want false, nil", ok, err)
	}
	if err := db.Park(ctx, "a", "410 Gone"); err != nil {
		t.Fatal(err)
	}
	r := get(t, db, "a")
	if r.State != cursor.Parked || r.NextSeq != 12 || r.Attempts != 1 || r.LastError != "410 Gone" || !r.NextAttemptAt.IsZero() {
		t.Fatalf("parked = %+v", r)
	}
	if ids, _ := dueIDs(t, db, t0.Add(time.Hour), 10, "outbox"); len(ids) != 0 {
		t.Fatalf("parked row is due: %v", ids)
	}
	check(t, db)

	at := t0.Add(time.Minute)
	ok, err := db.Unpark(ctx, "a", at)
	if !ok || err != nil {
		t.Fatalf("Unpark = %v, %v", ok, err)
	}
	r = get(t, db, "a")
	if r.State != cursor.Active || r.NextSeq != 12 || r.Attempts != 0 || r.LastError != "" || !r.NextAttemptAt.Equal(at) {
		t.Fatalf("unparked = %+v", r)
	}
	check(t, db)
	_, err = db.Unpark(ctx, "nobody", at)
	wantErrIs(t, err, cursor.ErrNotFound)
	wantErrIs(t, db.Park(ctx, "nobody", "x"), cursor.ErrNotFound)
}

func TestRewindMovesTheCursorExactlyAndKeepsTheState(t *testing.T) {
	ctx := context.Background()
	db, _ := open(t)
	r := reg("a", "outbox")
	r.NextSeq = 10
	create(t, db, r)
	advance(t, db, "a", cursor.Progress{NextSeq: 20, Delivered: 10})

	at := t0.Add(time.Minute)
	got, err := db.Rewind(ctx, "a", 5, at)
	if err != nil || got.NextSeq != 5 || got.Delivered != 10 || !got.NextAttemptAt.Equal(at) {
		t.Fatalf("Rewind back = %+v, %v", got, err)
	}
	flush(t, db) // the Advance to 20 was folded, not kept to land later
	if r := get(t, db, "a"); r.NextSeq != 5 {
		t.Fatalf("after Flush the cursor is %d, want 5", r.NextSeq)
	}

	if got, err = db.Rewind(ctx, "a", 50, at); err != nil || got.NextSeq != 50 {
		t.Fatalf("Rewind forward = %+v, %v", got, err)
	}

	if err := db.Park(ctx, "a", "cannot project message 50"); err != nil {
		t.Fatal(err)
	}
	got, err = db.Rewind(ctx, "a", 51, at)
	if err != nil || got.State != cursor.Parked || got.NextSeq != 51 || got.Attempts != 0 || got.LastError == "" {
		t.Fatalf("Rewind of a parked registration = %+v, %v", got, err)
	}
	if ids, _ := dueIDs(t, db, at, 10, "outbox"); len(ids) != 0 {
		t.Fatalf("a rewound parked row is due: %v", ids)
	}
	_, err = db.Rewind(ctx, "nobody", 1, at)
	wantErrIs(t, err, cursor.ErrNotFound)
	check(t, db)
}

func TestDeleteIsIdempotentAndDropsPendingProgress(t *testing.T) {
	ctx := context.Background()
	db, _ := open(t, cursor.WithClock(newClock().Now))
	create(t, db, reg("a", "outbox"))
	advance(t, db, "a", cursor.Progress{NextSeq: 30})
	for range 2 {
		if err := db.Delete(ctx, "a"); err != nil {
			t.Fatal(err)
		}
	}
	if n := db.Pending(); n != 0 {
		t.Fatalf("Pending after Delete = %d", n)
	}
	create(t, db, reg("a", "outbox"))
	flush(t, db)
	if r := get(t, db, "a"); r.NextSeq != 0 {
		t.Fatalf("a new registration inherited the deleted one's cursor: %d", r.NextSeq)
	}
	if ids, _ := dueIDs(t, db, t0.Add(time.Hour), 10, "outbox"); len(ids) != 1 {
		t.Fatalf("Due = %v", ids)
	}
	check(t, db)
}

func TestListPagesInIDOrderWithFilters(t *testing.T) {
	ctx := context.Background()
	db, _ := open(t)
	for _, id := range []string{"e", "a", "d", "b", "c", "bb", "bc"} {
		ns := "outbox"
		if id[0] == 'b' || id == "d" {
			ns = "a2a"
		}
		create(t, db, reg(id, ns))
	}
	if err := db.Park(ctx, "c", "gone"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		opt      cursor.ListOptions
		want     string
		wantNext string
	}{
		{cursor.ListOptions{}, "a b bb bc c d e", ""},
		{cursor.ListOptions{Limit: 2}, "a b", "b"},
		{cursor.ListOptions{Limit: 2, After: "bc"}, "c d", "d"},
		{cursor.ListOptions{Limit: 2, After: "d"}, "e", ""},
		{cursor.ListOptions{Limit: 2, After: "bd"}, "c d", "d"},
		{cursor.ListOptions{Namespace: "outbox", Limit: 2}, "a c", "c"},
		{cursor.ListOptions{Namespace: "outbox", Limit: 2, After: "c"}, "e", ""},
		{cursor.ListOptions{Namespace: "a2a", Limit: 2}, "b bb", "bb"},
		{cursor.ListOptions{State: cursor.Parked}, "c", ""},
		{cursor.ListOptions{Namespace: "a2a", State: cursor.Parked}, "", ""},
		{cursor.ListOptions{Prefix: "b"}, "b bb bc", ""},
		{cursor.ListOptions{Prefix: "b", Limit: 2}, "b bb", "bb"},
		{cursor.ListOptions{Prefix: "b", Limit: 2, After: "bb"}, "bc", ""},
		{cursor.ListOptions{Prefix: "b", After: "a"}, "b bb bc", ""},
		{cursor.ListOptions{Prefix: "b", After: "b"}, "bb bc", ""},
		{cursor.ListOptions{Prefix: "b", After: "c"}, "", ""},
		{cursor.ListOptions{Prefix: "bb"}, "bb", ""},
		{cursor.ListOptions{Prefix: "bd"}, "", ""},
		{cursor.ListOptions{Prefix: "c", State: cursor.Parked}, "c", ""},
		{cursor.ListOptions{Prefix: "e", State: cursor.Parked}, "", ""},
	} {
		rows, next, err := db.List(ctx, tc.opt)
		if err != nil {
			t.Fatal(err)
		}
		ids := make([]string, len(rows))
		for i, r := range rows {
			ids[i] = r.ID
		}
		if got := strings.Join(ids, " "); got != tc.want || next != tc.wantNext {
			t.Errorf("List(%+v) = %q next %q, want %q next %q", tc.opt, got, next, tc.want, tc.wantNext)
		}
	}
}

func TestListCapsThePage(t *testing.T) {
	db, _ := open(t)
	rows := make([]cursor.Registration, 1200)
	for i := range rows {
		rows[i] = reg(strings.Repeat("0", 4-len(itoa(i)))+itoa(i), "outbox")
		rows[i].State = cursor.Active
	}
	if err := db.InsertForTest(rows); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ limit, want int }{{0, 100}, {-1, 100}, {5000, 1000}} {
		got, next, err := db.List(context.Background(), cursor.ListOptions{Limit: tc.limit})
		if err != nil || len(got) != tc.want || next != got[len(got)-1].ID {
			t.Errorf("List(limit %d) = %d rows next %q, %v; want %d", tc.limit, len(got), next, err, tc.want)
		}
	}
}

func TestCountsFollowEveryTransition(t *testing.T) {
	ctx := context.Background()
	db, _ := open(t)
	for _, id := range []string{"a", "b", "c", "d"} {
		create(t, db, reg(id, "outbox"))
	}
	create(t, db, reg("t", "a2a"))
	if err := db.Park(ctx, "a", "gone"); err != nil {
		t.Fatal(err)
	}
	advance(t, db, "b", cursor.Progress{NextSeq: 2, Complete: true})
	flush(t, db)
	if err := db.Delete(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	got, err := db.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[cursor.State]int{
		"outbox": {cursor.Active: 1, cursor.Parked: 1, cursor.Completed: 1},
		"a2a":    {cursor.Active: 1},
	}
	if !equalCounts(got, want) {
		t.Fatalf("Counts = %v, want %v", got, want)
	}
	check(t, db)
}

func TestLastErrorIsBounded(t *testing.T) {
	db, _ := open(t)
	create(t, db, reg("a", "outbox"))
	huge := strings.Repeat("é", 10_000)
	if err := db.Retry(context.Background(), "a", t0, huge); err != nil {
		t.Fatal(err)
	}
	if r := get(t, db, "a"); len(r.LastError) > 4096 || !strings.HasPrefix(huge, r.LastError) || len(r.LastError) < 4000 {
		t.Fatalf("stored LastError is %d bytes", len(r.LastError))
	}
}

// same compares registrations by value, times by instant.
func same(a, b cursor.Registration) bool {
	times := func(r *cursor.Registration) []time.Time {
		return []time.Time{r.NextAttemptAt, r.CreatedAt, r.UpdatedAt, r.CompletedAt, r.PreviousSecretUntil}
	}
	ta, tb := times(&a), times(&b)
	for i := range ta {
		if !ta[i].Equal(tb[i]) {
			return false
		}
	}
	a.NextAttemptAt, a.CreatedAt, a.UpdatedAt, a.CompletedAt, a.PreviousSecretUntil = time.Time{}, time.Time{}, time.Time{}, time.Time{}, time.Time{}
	b.NextAttemptAt, b.CreatedAt, b.UpdatedAt, b.CompletedAt, b.PreviousSecretUntil = time.Time{}, time.Time{}, time.Time{}, time.Time{}, time.Time{}
	return reflect.DeepEqual(a, b)
}

func equalCounts(got, want map[string]map[cursor.State]int) bool {
	for ns, states := range want {
		for st, n := range states {
			if got[ns][st] != n {
				return false
			}
		}
	}
	for ns, states := range got {
		for st, n := range states {
			if want[ns][st] != n {
				return false
			}
		}
	}
	return true
}

func itoa(i int) string { return strconv.Itoa(i) }

package cursor_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/jetstream-bridge/bridge/cursor"
)

// inGroup makes calls one group commit: while the test holds the write
// turn, each call is started and queues behind it, in order; then they
// are committed together, as the caller that gets the turn would.
func inGroup(t *testing.T, db *cursor.DB, calls ...func()) {
	t.Helper()
	commit := db.HoldWriteTurn()
	var wg sync.WaitGroup
	for _, c := range calls {
		wg.Go(c)
		synctest.Wait()
	}
	if n := db.Queued(); n != len(calls) {
		t.Fatalf("%d writes queued for the group, want %d", n, len(calls))
	}
	commit()
	wg.Wait()
}

// groupTest runs test in a synctest bubble, so inGroup can tell when a
// call is queued, on a store of its own.
func groupTest(t *testing.T, test func(t *testing.T, db *cursor.DB)) {
	synctest.Test(t, func(t *testing.T) {
		db, _ := open(t)
		test(t, db)
	})
}

func TestGroupedCreatesOfOneIDGiveOneSuccess(t *testing.T) {
	groupTest(t, func(t *testing.T, db *cursor.DB) {
		errs := make([]error, 16)
		calls := make([]func(), len(errs))
		for i := range calls {
			calls[i] = func() {
				r := reg("dup", "outbox")
				r.URL = fmt.Sprintf("https://receiver.example/%d", i)
				_, _, errs[i] = db.Create(t.Context(), r, nil)
			}
		}
		inGroup(t, db, calls...)

		if errs[0] != nil {
			t.Fatalf("the first create of the group failed: %v", errs[0])
		}
		for i, err := range errs[1:] {
			if !errors.Is(err, cursor.ErrExists) {
				t.Errorf("create %d of the same id: %v, want ErrExists", i+1, err)
			}
		}
		if got := get(t, db, "dup"); got.URL != "https://receiver.example/0" {
			t.Errorf("stored URL %q, want the first create's", got.URL)
		}
		check(t, db)
	})
}

func TestGroupedIdempotentReplaysGetTheFirstAnswer(t *testing.T) {
	groupTest(t, func(t *testing.T, db *cursor.DB) {
		idem := func(hash string) *cursor.Idempotency {
			return &cursor.Idempotency{Key: "k", Hash: []byte(hash), Answer: func(r cursor.Registration) ([]byte, error) {
				return []byte(`{"id":"` + r.ID + `"}`), nil
			}}
		}
		type result struct {
			id     string
			answer string
			err    error
		}
		res := make([]result, 8)
		calls := make([]func(), len(res)+1)
		for i := range res {
			calls[i] = func() {
				// A client retrying one request: each try names another id,
				// as the admin API's generated ids do.
				r, ans, err := db.Create(t.Context(), reg(fmt.Sprintf("r%d", i), "outbox"), idem("body"))
				res[i] = result{r.ID, string(ans), err}
			}
		}
		var conflict error
		calls[len(res)] = func() {
			_, _, conflict = db.Create(t.Context(), reg("other", "outbox"), idem("another body"))
		}
		inGroup(t, db, calls...)

		for i, r := range res {
			if r.err != nil || r.id != "r0" || r.answer != `{"id":"r0"}` {
				t.Errorf("try %d: id %q answer %q, %v; want r0's registration and answer", i, r.id, r.answer, r.err)
			}
		}
		wantErrIs(t, conflict, cursor.ErrIdempotencyConflict)
		rows, _, err := db.List(t.Context(), cursor.ListOptions{})
		if err != nil || len(rows) != 1 {
			t.Fatalf("%d registrations stored (%v), want the first try's alone", len(rows), err)
		}
		check(t, db)
	})
}

func TestGroupedFailuresAffectNoOtherCall(t *testing.T) {
	groupTest(t, func(t *testing.T, db *cursor.DB) {
		ctx := t.Context()
		create(t, db, reg("old", "outbox"))
		var errA, errMissing, errB, errDupA, errMove, errDel error
		moved := reg("b", "a2a").Config
		inGroup(t, db,
			func() { _, _, errA = db.Create(ctx, reg("a", "outbox"), nil) },
			func() { _, errMissing = db.Replace(ctx, reg("missing", "outbox").Config, t0) },
			func() { _, _, errB = db.Create(ctx, reg("b", "outbox"), nil) },
			func() { _, _, errDupA = db.Create(ctx, reg("a", "a2a"), nil) },
			func() { _, errMove = db.Replace(ctx, moved, t0) },
			func() { errDel = db.Delete(ctx, "old") },
		)

		for name, err := range map[string]error{"create a": errA, "create b": errB, "delete old": errDel} {
			if err != nil {
				t.Errorf("%s failed beside failing calls: %v", name, err)
			}
		}
		wantErrIs(t, errMissing, cursor.ErrNotFound)
		wantErrIs(t, errDupA, cursor.ErrExists)
		if errMove == nil || errors.Is(errMove, cursor.ErrNotFound) {
			t.Errorf("replace into another namespace: %v, want the namespace refused", errMove)
		}
		if a, b := get(t, db, "a"), get(t, db, "b"); a.Namespace != "outbox" || b.Namespace != "outbox" {
			t.Errorf("namespaces a %q b %q, want both outbox as created", a.Namespace, b.Namespace)
		}
		if _, err := db.Get(ctx, "old"); !errors.Is(err, cursor.ErrNotFound) {
			t.Errorf("old survived its delete: %v", err)
		}
		check(t, db)
	})
}

// A group rolled back for one failing call is run again: the progress its
// first attempt claimed must be claimed and committed by the second, not
// dropped with the first.
func TestGroupRetryKeepsClaimedProgress(t *testing.T) {
	groupTest(t, func(t *testing.T, db *cursor.DB) {
		ctx := t.Context()
		create(t, db, reg("x", "outbox"))
		advance(t, db, "x", cursor.Progress{NextSeq: 10, Delivered: 3})
		moved := reg("x", "outbox").Config
		moved.URL = "https://receiver.example/new"
		var errReplace, errDup error
		inGroup(t, db,
			func() { _, errReplace = db.Replace(ctx, moved, t0) },
			func() { _, _, errDup = db.Create(ctx, reg("x", "outbox"), nil) },
		)
		if errReplace != nil {
			t.Fatal(errReplace)
		}
		wantErrIs(t, errDup, cursor.ErrExists)
		if n := db.Pending(); n != 0 {
			t.Errorf("%d registrations still pending after the replace folded x's progress", n)
		}

		db = crash(t, db)
		got := get(t, db, "x")
		if got.NextSeq != 10 || got.Delivered != 3 || got.URL != moved.URL {
			t.Errorf("after a crash: nextSeq %d delivered %d url %q, want 10, 3 and the new URL",
				got.NextSeq, got.Delivered, got.URL)
		}
	})
}

func TestGroupedCallCancelledWhileQueuedIsRemoved(t *testing.T) {
	groupTest(t, func(t *testing.T, db *cursor.DB) {
		commit := db.HoldWriteTurn()
		ctx, cancel := context.WithCancel(t.Context())
		var err error
		var wg sync.WaitGroup
		wg.Go(func() { _, _, err = db.Create(ctx, reg("late", "outbox"), nil) })
		synctest.Wait()
		cancel()
		wg.Wait()
		commit()

		wantErrIs(t, err, context.Canceled)
		if n := db.Queued(); n != 0 {
			t.Errorf("%d writes still queued", n)
		}
		if _, err := db.Get(t.Context(), "late"); !errors.Is(err, cursor.ErrNotFound) {
			t.Errorf("a create cancelled while queued was stored: %v", err)
		}
	})
}

func TestGroupedCallCancelledOnceTakenWaitsForTheOutcome(t *testing.T) {
	groupTest(t, func(t *testing.T, db *cursor.DB) {
		ctx, cancel := context.WithCancel(t.Context())
		idem := &cursor.Idempotency{Key: "k", Hash: []byte("h"), Answer: func(cursor.Registration) ([]byte, error) {
			// The committer runs the call now: the caller's ctx ends, and
			// the caller must wait for this transaction, not give up.
			cancel()
			synctest.Wait()
			return []byte("answer"), nil
		}}
		var err error
		inGroup(t, db, func() { _, _, err = db.Create(ctx, reg("taken", "outbox"), idem) })

		if err != nil {
			t.Fatalf("a create cancelled after it was taken: %v, want its committed outcome", err)
		}
		get(t, db, "taken")
	})
}

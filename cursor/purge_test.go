package cursor_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetstream-bridge/bridge/cursor"
)

// completedRows builds n small completed registrations, completed at when.
func completedRows(prefix string, n int, when time.Time) []cursor.Registration {
	rows := make([]cursor.Registration, n)
	for i := range rows {
		rows[i] = cursor.Registration{
			Config: cursor.Config{ID: fmt.Sprintf("%s-%06d", prefix, i), Namespace: "a2a"},
			State:  cursor.Completed, CompletedAt: when, CreatedAt: when,
		}
	}
	return rows
}

func noKeyAge(p cursor.RetentionPolicy) cursor.RetentionPolicy {
	return p.WithIdempotencyKeyMaxAge(nil)
}

func TestPurgeDeletesOnlyOldCompletedRegistrations(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	db, _ := open(t, cursor.WithClock(clk.Now))
	for _, id := range []string{"old-done", "young-done", "old-active", "old-parked"} {
		create(t, db, reg(id, "outbox"))
	}
	if err := db.Park(ctx, "old-parked", "410"); err != nil {
		t.Fatal(err)
	}
	advance(t, db, "old-done", cursor.Progress{NextSeq: 2, Complete: true})
	flush(t, db)
	clk.Add(47 * time.Hour)
	advance(t, db, "young-done", cursor.Progress{NextSeq: 2, Complete: true})
	flush(t, db)
	clk.Add(2 * time.Hour) // old-done completed 49 h ago, young-done 2 h ago

	rep, err := db.Purge(ctx, noKeyAge(cursor.NewRetentionPolicy(24*time.Hour)))
	if err != nil {
		t.Fatal(err)
	}
	if rep != (cursor.PurgeReport{RegistrationsDeleted: 1, Batches: 1, Complete: true}) {
		t.Fatalf("report = %+v", rep)
	}
	if _, err := db.Get(ctx, "old-done"); !errors.Is(err, cursor.ErrNotFound) {
		t.Fatalf("old completed registration survived: %v", err)
	}
	for _, id := range []string{"young-done", "old-active", "old-parked"} {
		get(t, db, id)
	}
	check(t, db)

	// Nothing left: a second purge deletes nothing and says it is complete.
	rep, err = db.Purge(ctx, noKeyAge(cursor.NewRetentionPolicy(24*time.Hour)))
	if err != nil || rep != (cursor.PurgeReport{Complete: true}) {
		t.Fatalf("second purge = %+v, %v", rep, err)
	}
}

func TestPurgeStopsAtMaxBatchesAndSaysSo(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	db, _ := open(t, cursor.WithClock(clk.Now))
	if err := db.InsertForTest(completedRows("done", 2500, t0.Add(-48*time.Hour))); err != nil {
		t.Fatal(err)
	}
	policy := noKeyAge(cursor.NewRetentionPolicy(24 * time.Hour).WithBatchSize(1000).WithMaxBatches(2))
	rep, err := db.Purge(ctx, policy)
	if err != nil || rep != (cursor.PurgeReport{RegistrationsDeleted: 2000, Batches: 2, Complete: false}) {
		t.Fatalf("first purge = %+v, %v; want 2000 deleted in 2 batches, not complete", rep, err)
	}
	rep, err = db.Purge(ctx, policy)
	if err != nil || rep != (cursor.PurgeReport{RegistrationsDeleted: 500, Batches: 1, Complete: true}) {
		t.Fatalf("second purge = %+v, %v; want 500 deleted, complete", rep, err)
	}
	check(t, db)
}

func TestPurgeThatEndsExactlyAtMaxBatchesIsComplete(t *testing.T) {
	clk := newClock()
	db, _ := open(t, cursor.WithClock(clk.Now))
	if err := db.InsertForTest(completedRows("done", 20, t0.Add(-48*time.Hour))); err != nil {
		t.Fatal(err)
	}
	policy := noKeyAge(cursor.NewRetentionPolicy(time.Hour).WithBatchSize(10).WithMaxBatches(2))
	rep, err := db.Purge(context.Background(), policy)
	if err != nil || rep != (cursor.PurgeReport{RegistrationsDeleted: 20, Batches: 2, Complete: true}) {
		t.Fatalf("purge = %+v, %v", rep, err)
	}
}

func TestPurgeWithBatchSizeZeroStillProgresses(t *testing.T) {
	clk := newClock()
	db, _ := open(t, cursor.WithClock(clk.Now))
	if err := db.InsertForTest(completedRows("done", 3, t0.Add(-48*time.Hour))); err != nil {
		t.Fatal(err)
	}
	rep, err := db.Purge(context.Background(), noKeyAge(cursor.NewRetentionPolicy(time.Hour).WithBatchSize(0)))
	if err != nil || rep != (cursor.PurgeReport{RegistrationsDeleted: 3, Batches: 3, Complete: true}) {
		t.Fatalf("purge = %+v, %v; want 3 deleted one per batch", rep, err)
	}
}

func TestPurgeOfIdempotencyKeys(t *testing.T) {
	ctx := context.Background()
	idem := func(key string) *cursor.Idempotency { return &cursor.Idempotency{Key: key, Hash: []byte("h")} }
	setup := func(t *testing.T) (*cursor.DB, *clock) {
		clk := newClock()
		db, _ := open(t, cursor.WithClock(clk.Now))
		if _, _, err := db.Create(ctx, reg("a", "outbox"), idem("k")); err != nil {
			t.Fatal(err)
		}
		return db, clk
	}
	// replays reports whether the key still answers instead of creating.
	replays := func(t *testing.T, db *cursor.DB) bool {
		t.Helper()
		_, _, err := db.Create(ctx, reg("b", "outbox"), idem("k"))
		if err != nil {
			t.Fatal(err)
		}
		_, err = db.Get(ctx, "b")
		return errors.Is(err, cursor.ErrNotFound)
	}

	t.Run("a key younger than the completed age survives a shorter key age", func(t *testing.T) {
		db, clk := setup(t)
		clk.Add(2 * time.Hour)
		age := time.Hour
		rep, err := db.Purge(ctx, cursor.NewRetentionPolicy(24*time.Hour).WithIdempotencyKeyMaxAge(&age))
		if err != nil || rep.IdempotencyKeysDeleted != 0 {
			t.Fatalf("purge = %+v, %v", rep, err)
		}
		if !replays(t, db) {
			t.Fatal("the key expired although the completed age floors it at 24 h")
		}
	})
	t.Run("an old key goes", func(t *testing.T) {
		db, clk := setup(t)
		clk.Add(2 * time.Hour)
		age := time.Hour
		rep, err := db.Purge(ctx, cursor.NewRetentionPolicy(time.Hour).WithIdempotencyKeyMaxAge(&age))
		if err != nil || rep != (cursor.PurgeReport{IdempotencyKeysDeleted: 1, Batches: 1, Complete: true}) {
			t.Fatalf("purge = %+v, %v", rep, err)
		}
		if replays(t, db) {
			t.Fatal("an expired key still replays")
		}
		get(t, db, "a") // the active registration it created stays
	})
	t.Run("no key age keeps keys", func(t *testing.T) {
		db, clk := setup(t)
		clk.Add(1000 * time.Hour)
		rep, err := db.Purge(ctx, noKeyAge(cursor.NewRetentionPolicy(time.Hour)))
		if err != nil || rep.IdempotencyKeysDeleted != 0 || !replays(t, db) {
			t.Fatalf("purge = %+v, %v; the key must stay", rep, err)
		}
	})
	t.Run("keys and registrations share a batch", func(t *testing.T) {
		db, clk := setup(t)
		if err := db.InsertForTest(completedRows("done", 2, t0)); err != nil {
			t.Fatal(err)
		}
		clk.Add(48 * time.Hour)
		rep, err := db.Purge(ctx, cursor.NewRetentionPolicy(time.Hour).WithBatchSize(2))
		want := cursor.PurgeReport{RegistrationsDeleted: 2, IdempotencyKeysDeleted: 1, Batches: 2, Complete: true}
		if err != nil || rep != want {
			t.Fatalf("purge = %+v, %v; want %+v", rep, err, want)
		}
	})
}

func TestPurgeRefusesANegativeAge(t *testing.T) {
	db, _ := open(t)
	if _, err := db.Purge(context.Background(), cursor.NewRetentionPolicy(-time.Hour)); err == nil {
		t.Fatal("Purge with a negative age succeeded")
	}
}

// TestFlushesInterleaveWithALongPurge purges 100,000 completed rows while
// a worker keeps acknowledging and flushing: every batch commits on its
// own, so flushes keep landing between batches instead of waiting for the
// whole purge.
func TestFlushesInterleaveWithALongPurge(t *testing.T) {
	if testing.Short() {
		t.Skip("100,000 rows")
	}
	ctx := context.Background()
	clk := newClock()
	db, _ := open(t, cursor.WithClock(clk.Now))
	if err := db.InsertForTest(completedRows("done", 100_000, t0.Add(-48*time.Hour))); err != nil {
		t.Fatal(err)
	}
	create(t, db, reg("live", "outbox"))

	var (
		purging   atomic.Bool
		during    atomic.Int64
		lastSeq   atomic.Uint64
		wg        sync.WaitGroup
		purgeDone = make(chan struct{})
	)
	purging.Store(true)
	wg.Go(func() {
		for seq := uint64(1); ; seq++ {
			select {
			case <-purgeDone:
				return
			default:
			}
			if err := db.Advance(ctx, "live", cursor.Progress{NextSeq: seq, Delivered: 1}); err != nil {
				t.Error(err)
				return
			}
			if err := db.Flush(ctx); err != nil {
				t.Error(err)
				return
			}
			lastSeq.Store(seq)
			if purging.Load() {
				during.Add(1)
			}
		}
	})
	rep, err := db.Purge(ctx, noKeyAge(cursor.NewRetentionPolicy(time.Hour)))
	purging.Store(false)
	close(purgeDone)
	wg.Wait()
	if err != nil || rep != (cursor.PurgeReport{RegistrationsDeleted: 100_000, Batches: 100, Complete: true}) {
		t.Fatalf("purge = %+v, %v", rep, err)
	}
	t.Logf("%d flushes landed during the purge", during.Load())
	if n := during.Load(); n < 10 {
		t.Fatalf("%d flushes landed during a 100-batch purge; flushes are waiting for the whole purge", n)
	}
	if r := get(t, crash(t, db), "live"); r.NextSeq != lastSeq.Load() {
		t.Fatalf("live cursor = %d, want the last flushed %d", r.NextSeq, lastSeq.Load())
	}
}

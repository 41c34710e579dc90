package cursor_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jetstream-bridge/bridge/cursor"
)

func TestFlushMakesProgressDurable(t *testing.T) {
	db, _ := open(t)
	create(t, db, reg("a", "outbox"))
	advance(t, db, "a", cursor.Progress{NextSeq: 10, Delivered: 9, Idle: true})
	if r := get(t, db, "a"); r.NextSeq != 10 || r.Delivered != 9 {
		t.Fatalf("Get before Flush = %+v; acknowledged progress must be visible", r)
	}
	if n := db.Pending(); n != 1 {
		t.Fatalf("Pending = %d, want 1", n)
	}
	flush(t, db)
	if n := db.Pending(); n != 0 {
		t.Fatalf("Pending after Flush = %d", n)
	}
	db = crash(t, db)
	if r := get(t, db, "a"); r.NextSeq != 10 || r.Delivered != 9 || !r.NextAttemptAt.IsZero() {
		t.Fatalf("after Flush and a crash = %+v", r)
	}
	check(t, db)
}

func TestACrashLosesUnflushedProgressAndNeverLeads(t *testing.T) {
	db, _ := open(t)
	create(t, db, reg("a", "outbox"))
	advance(t, db, "a", cursor.Progress{NextSeq: 10, Delivered: 9})
	flush(t, db)
	advance(t, db, "a", cursor.Progress{NextSeq: 20, Delivered: 10})
	db = crash(t, db)
	if r := get(t, db, "a"); r.NextSeq != 10 || r.Delivered != 9 {
		t.Fatalf("after a crash = %+v; want the last flushed cursor 10, repeating 10..19", r)
	}
	check(t, db)
}

func TestCloseFlushes(t *testing.T) {
	db, path := open(t, cursor.WithFlushInterval(time.Hour))
	create(t, db, reg("a", "outbox"))
	advance(t, db, "a", cursor.Progress{NextSeq: 3})
	closeNow(t, db)
	if r := get(t, reopen(t, path), "a"); r.NextSeq != 3 {
		t.Fatalf("after Close = %+v", r)
	}
}

func TestBackgroundFlusherMakesProgressDurable(t *testing.T) {
	db, _ := open(t, cursor.WithFlushInterval(2*time.Millisecond))
	create(t, db, reg("a", "outbox"))
	advance(t, db, "a", cursor.Progress{NextSeq: 3})
	deadline := time.Now().Add(10 * time.Second)
	for db.Pending() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the background flusher never flushed")
		}
		time.Sleep(time.Millisecond)
	}
	if r := get(t, crash(t, db), "a"); r.NextSeq != 3 {
		t.Fatalf("after the background flush and a crash = %+v", r)
	}
}

func TestAFailedFlushKeepsProgressForTheNext(t *testing.T) {
	db, _ := open(t)
	rows := make([]cursor.Registration, 400)
	for i := range rows {
		rows[i] = reg(fmt.Sprintf("r%03d", i), "outbox")
		rows[i].State = cursor.Active
		rows[i].URL = "https://receiver.example/" + string(make([]byte, 1000))
	}
	if err := db.InsertForTest(rows); err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		advance(t, db, r.ID, cursor.Progress{NextSeq: 5, Delivered: 1})
	}
	db.SetMaxSizeForTest(1) // the disk is full
	if err := db.Flush(context.Background()); err == nil {
		t.Fatal("Flush on a full disk succeeded")
	}
	// Progress acknowledged after the failure merges with the kept one.
	advance(t, db, "r000", cursor.Progress{NextSeq: 3, Delivered: 2})
	if r := get(t, db, "r000"); r.NextSeq != 5 || r.Delivered != 3 {
		t.Fatalf("Get after a failed Flush = %+v", r)
	}
	if n := db.Pending(); n != len(rows) {
		t.Fatalf("Pending after a failed Flush = %d, want %d", n, len(rows))
	}
	db.SetMaxSizeForTest(0)
	flush(t, db)
	db = crash(t, db)
	for _, id := range []string{"r000", "r199", "r399"} {
		want := uint64(1)
		if id == "r000" {
			want = 3
		}
		if r := get(t, db, id); r.NextSeq != 5 || r.Delivered != want {
			t.Fatalf("%s after the retried Flush = NextSeq %d Delivered %d", id, r.NextSeq, r.Delivered)
		}
	}
	check(t, db)
}

// TestReadsNeverGoBackwards races Advance, Flush and readers (Get, Due,
// List): a reader must never see a cursor behind one it already saw,
// whether the progress is pending, being flushed, or flushed, nor count a
// delivery twice.
func TestReadsNeverGoBackwards(t *testing.T) {
	ctx := context.Background()
	db, _ := open(t)
	create(t, db, reg("a", "outbox"))
	const last = 2000
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Go(func() {
		defer close(done)
		for seq := uint64(1); seq <= last; seq++ {
			if err := db.Advance(ctx, "a", cursor.Progress{NextSeq: seq, Delivered: 1}); err != nil {
				t.Error(err)
				return
			}
		}
	})
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			if err := db.Flush(ctx); err != nil {
				t.Error(err)
				return
			}
		}
	})
	readers := map[string]func() (cursor.Registration, error){
		"Get": func() (cursor.Registration, error) { return db.Get(ctx, "a") },
		"Due": func() (cursor.Registration, error) {
			d, err := db.Due(ctx, time.Now().Add(time.Hour), 10, "outbox")
			if err == nil && len(d.Rows) != 1 {
				err = fmt.Errorf("Due returned %d rows, want the one busy row", len(d.Rows))
			}
			if err != nil {
				return cursor.Registration{}, err
			}
			return d.Rows[0], nil
		},
		"List": func() (cursor.Registration, error) {
			rows, _, err := db.List(ctx, cursor.ListOptions{})
			if err != nil {
				return cursor.Registration{}, err
			}
			return rows[0], nil
		},
	}
	for name, read := range readers {
		wg.Go(func() {
			var seen, delivered uint64
			for {
				r, err := read()
				if err != nil {
					t.Errorf("%s: %v", name, err)
					return
				}
				if r.NextSeq < seen || r.Delivered < delivered || r.Delivered > r.NextSeq {
					t.Errorf("%s read NextSeq %d Delivered %d after NextSeq %d Delivered %d",
						name, r.NextSeq, r.Delivered, seen, delivered)
					return
				}
				seen, delivered = r.NextSeq, r.Delivered
				select {
				case <-done:
					return
				default:
				}
			}
		})
	}
	wg.Wait()
	flush(t, db)
	if r := get(t, crash(t, db), "a"); r.NextSeq != last || r.Delivered != last {
		t.Fatalf("final = NextSeq %d Delivered %d, want %d and %d", r.NextSeq, r.Delivered, last, last)
	}
}

// TestConcurrentOperationsKeepTheIndexesTrue runs every mutation at once on
// a few registrations and checks the indexes against the rows afterwards.
func TestConcurrentOperationsKeepTheIndexesTrue(t *testing.T) {
	ctx := context.Background()
	db, _ := open(t)
	ids := []string{"a", "b", "c", "d"}
	for _, id := range ids {
		create(t, db, reg(id, "outbox"))
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(w), 7))
			for i := range 200 {
				id := ids[rnd.IntN(len(ids))]
				at := t0.Add(time.Duration(rnd.IntN(100)) * time.Second)
				var err error
				switch rnd.IntN(8) {
				case 0, 1, 2:
					err = db.Advance(ctx, id, cursor.Progress{NextSeq: uint64(i), Delivered: 1, Idle: rnd.IntN(2) == 0})
				case 3:
					err = db.Retry(ctx, id, at, "503")
				case 4:
					err = db.Park(ctx, id, "410")
				case 5:
					_, err = db.Unpark(ctx, id, at)
				case 6:
					_, err = db.Rewind(ctx, id, uint64(i), at)
				case 7:
					err = db.Flush(ctx)
				}
				if err != nil {
					t.Error(err)
					return
				}
				if _, err := db.Due(ctx, t0.Add(time.Minute), 10, "outbox"); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	flush(t, db)
	check(t, db)
}

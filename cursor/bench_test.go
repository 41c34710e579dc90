package cursor_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetstream-bridge/bridge/cursor"
)

// BenchmarkDue100kRegistrations10Due: a sweep over 100,000 registrations,
// half idle and half scheduled for later, of which 10 are due. The due
// index makes it cost the 10 rows, not the 100,000: compare
// BenchmarkDue1kRegistrations10Due.
func BenchmarkDue100kRegistrations10Due(b *testing.B) { benchDue(b, 100_000) }

// BenchmarkDue1kRegistrations10Due is the same sweep over 1,000
// registrations.
func BenchmarkDue1kRegistrations10Due(b *testing.B) { benchDue(b, 1_000) }

func benchDue(b *testing.B, total int) {
	db, _ := open(b, cursor.WithClock(newClock().Now))
	rows := make([]cursor.Registration, total)
	for i := range rows {
		r := reg(fmt.Sprintf("r%06d", i), "outbox")
		r.State = cursor.Active
		switch {
		case i%(total/10) == 0:
			r.NextAttemptAt = t0.Add(-time.Second)
		case i%2 == 0:
			r.NextAttemptAt = t0.Add(time.Hour)
		}
		rows[i] = r
	}
	if err := db.InsertForTest(rows); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for b.Loop() {
		d, err := db.Due(ctx, t0, 100, "outbox")
		if err != nil || len(d.Rows) != 10 {
			b.Fatalf("Due = %d rows, %v", len(d.Rows), err)
		}
	}
}

// BenchmarkFlush1000Cursors: one Flush committing the acknowledged progress
// of 1,000 registrations in one transaction (one fsync).
func BenchmarkFlush1000Cursors(b *testing.B) { benchFlush(b, 1000) }

// BenchmarkFlush1Cursor: the commit a single draining registration pays
// for, which sets how often a drain can afford to flush.
func BenchmarkFlush1Cursor(b *testing.B) { benchFlush(b, 1) }

func benchFlush(b *testing.B, n int) {
	db, _ := open(b)
	ids := make([]string, n)
	rows := make([]cursor.Registration, len(ids))
	for i := range rows {
		ids[i] = fmt.Sprintf("r%04d", i)
		rows[i] = reg(ids[i], "outbox")
		rows[i].State = cursor.Active
	}
	if err := db.InsertForTest(rows); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	seq := uint64(0)
	for b.Loop() {
		b.StopTimer()
		seq++
		for _, id := range ids {
			if err := db.Advance(ctx, id, cursor.Progress{NextSeq: seq, Delivered: 1}); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		if err := db.Flush(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(ids))/b.Elapsed().Seconds(), "cursors/s")
}

// BenchmarkAdvance: the in-memory part of an acknowledgement, which is all
// the delivery path waits for.
func BenchmarkAdvance(b *testing.B) {
	db, _ := open(b)
	ids := make([]string, 64)
	rows := make([]cursor.Registration, len(ids))
	for i := range rows {
		ids[i] = fmt.Sprintf("r%02d", i)
		rows[i] = reg(ids[i], "outbox")
		rows[i].State = cursor.Active
	}
	if err := db.InsertForTest(rows); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.Run("serial", func(b *testing.B) {
		seq := uint64(0)
		for b.Loop() {
			seq++
			if err := db.Advance(ctx, ids[seq%64], cursor.Progress{NextSeq: seq, Delivered: 1}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		var next atomic.Uint64
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				seq := next.Add(1)
				if err := db.Advance(ctx, ids[seq%64], cursor.Progress{NextSeq: seq, Delivered: 1}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkPositions100k and BenchmarkList100k: what one refresh of the
// registration and backlog gauges costs over 100,000 registrations, by
// state records alone and by listing whole rows.
func BenchmarkPositions100k(b *testing.B) {
	db := filled(b, 100_000)
	ctx := context.Background()
	for b.Loop() {
		n := 0
		if err := db.Positions(ctx, func(cursor.Position) { n++ }); err != nil || n != 100_000 {
			b.Fatalf("Positions saw %d rows: %v", n, err)
		}
	}
}

func BenchmarkList100k(b *testing.B) {
	db := filled(b, 100_000)
	ctx := context.Background()
	for b.Loop() {
		n, after := 0, ""
		for {
			rows, next, err := db.List(ctx, cursor.ListOptions{After: after, Limit: 1000})
			if err != nil {
				b.Fatal(err)
			}
			n += len(rows)
			if next == "" {
				break
			}
			after = next
		}
		if n != 100_000 {
			b.Fatalf("List saw %d rows", n)
		}
	}
}

// BenchmarkListParked100k: one poll of the console's parked registrations,
// a filtered listing that passes over every row to find a few.
func BenchmarkListParked100k(b *testing.B) {
	db := filled(b, 100_000)
	ctx := context.Background()
	for i := 0; i < 100_000; i += 10_000 {
		if err := db.Park(ctx, fmt.Sprintf("r%06d", i), "gone"); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		rows, _, err := db.List(ctx, cursor.ListOptions{State: cursor.Parked, Limit: 100})
		if err != nil || len(rows) != 10 {
			b.Fatalf("List saw %d parked rows: %v", len(rows), err)
		}
	}
}

func filled(b *testing.B, total int) *cursor.DB {
	db, _ := open(b)
	rows := make([]cursor.Registration, total)
	for i := range rows {
		rows[i] = reg(fmt.Sprintf("r%06d", i), "outbox")
		rows[i].State = cursor.Active
	}
	if err := db.InsertForTest(rows); err != nil {
		b.Fatal(err)
	}
	return db
}

// BenchmarkGet: the row read every delivery turn starts with, with
// progress pending in the write-behind as on a live registration.
func BenchmarkGet(b *testing.B) {
	db, _ := open(b)
	r := reg("live", "outbox")
	r.State = cursor.Active
	if err := db.InsertForTest([]cursor.Registration{r}); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := db.Advance(ctx, "live", cursor.Progress{NextSeq: 2, Delivered: 1}); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := db.Get(ctx, "live"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCreateParallel16: 16 goroutines creating registrations at
// once, each Create returning once it is committed and fsynced.
func BenchmarkCreateParallel16(b *testing.B) {
	db, _ := open(b)
	ctx := context.Background()
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for range 16 {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
				if _, _, err := db.Create(ctx, reg(fmt.Sprintf("r%d", i), "outbox"), nil); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "creates/s")
}

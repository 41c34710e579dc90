package cursortest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/jetstream-bridge/bridge/cursor"
)

// writeBehindCases are Advance and Flush: acknowledged progress is seen
// at once, made durable by Flush, and a crash repeats what was not
// flushed, never more.
var writeBehindCases = []testCase{
	{"flush makes progress durable", flushMakesDurable},
	{"a crash repeats unflushed progress and never leads", crashRepeatsUnflushed},
	{"close and the background flusher write", closeAndBackgroundFlusher},
	{"reads never go backwards", readsNeverGoBackwards},
	{"concurrent operations keep the indexes true", concurrentOperations},
}

func flushMakesDurable(e *env) {
	e.create(reg("a", "outbox"))
	e.advance("a", cursor.Progress{NextSeq: 10, Delivered: 9, Idle: true})
	if r := e.get("a"); r.NextSeq != 10 || r.Delivered != 9 {
		e.t.Fatalf("Get before Flush = %+v; acknowledged progress must be visible", r)
	}
	if n := e.pending(); n != 1 {
		e.t.Fatalf("Pending = %d, want 1", n)
	}
	e.flush()
	if n := e.pending(); n != 0 {
		e.t.Fatalf("Pending after Flush = %d", n)
	}
	e.reopen(true, Options{})
	if r := e.get("a"); r.NextSeq != 10 || r.Delivered != 9 || !r.NextAttemptAt.IsZero() {
		e.t.Fatalf("after Flush and a crash = %+v", r)
	}
}

func crashRepeatsUnflushed(e *env) {
	e.create(reg("a", "outbox"))
	e.create(reg("b", "outbox"))
	e.advance("a", cursor.Progress{NextSeq: 10, Delivered: 9, Idle: true})
	e.flush()
	e.advance("a", cursor.Progress{NextSeq: 20, Delivered: 10})
	e.advance("b", cursor.Progress{NextSeq: 5, Delivered: 5})
	if n := e.pending(); n != 2 {
		e.t.Fatalf("Pending = %d, want 2", n)
	}
	e.reopen(true, Options{})
	if r := e.get("a"); r.NextSeq != 10 || r.Delivered != 9 || !r.NextAttemptAt.IsZero() {
		e.t.Fatalf("a after a crash = %+v; want the flushed cursor 10, idle, repeating 10..19", r)
	}
	if r := e.get("b"); r.NextSeq != 0 || r.Delivered != 0 {
		e.t.Fatalf("b after a crash = %+v; nothing of it was flushed", r)
	}
	// The indexes hold the rows as stored.
	if ids, _ := e.dueIDs(T0.Add(time.Hour), 10, "outbox"); !slices.Equal(ids, []string{"b"}) {
		e.t.Fatalf("Due after reopening = %v, want [b]", ids)
	}
}

func closeAndBackgroundFlusher(e *env) {
	e.reopen(false, Options{FlushInterval: time.Hour})
	e.create(reg("a", "outbox"))
	e.advance("a", cursor.Progress{NextSeq: 3})
	e.reopen(false, Options{FlushInterval: 2 * time.Millisecond})
	if r := e.get("a"); r.NextSeq != 3 {
		e.t.Fatalf("after Close = %+v", r)
	}
	e.advance("a", cursor.Progress{NextSeq: 7})
	deadline := time.Now().Add(10 * time.Second)
	for e.pending() != 0 {
		if time.Now().After(deadline) {
			e.t.Fatal("the background flusher never flushed")
		}
		time.Sleep(time.Millisecond)
	}
	e.reopen(true, Options{})
	if r := e.get("a"); r.NextSeq != 7 {
		e.t.Fatalf("after the background flush and a crash = %+v", r)
	}
}

// readsNeverGoBackwards races Advance, Flush and readers (Get, Due,
// List): a reader must never see a cursor behind one it already saw,
// whether the progress is pending, being flushed, or flushed, nor count a
// delivery twice.
func readsNeverGoBackwards(e *env) {
	s, t := e.s, e.t
	e.create(reg("a", "outbox"))
	const last = 2000
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Go(func() {
		defer close(done)
		for seq := uint64(1); seq <= last; seq++ {
			if err := s.Advance(e.ctx, "a", cursor.Progress{NextSeq: seq, Delivered: 1}); err != nil {
				t.Error(err)
				return
			}
			if seq%8 == 0 {
				// Let flushes land between Advances on a store whose
				// Flush is slower than a loop of them.
				time.Sleep(100 * time.Microsecond)
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
			if err := s.Flush(e.ctx); err != nil {
				t.Error(err)
				return
			}
		}
	})
	at := e.clk.Now().Add(time.Hour)
	readers := map[string]func() (cursor.Registration, error){
		"Get": func() (cursor.Registration, error) { return s.Get(e.ctx, "a") },
		"Due": func() (cursor.Registration, error) {
			d, err := s.Due(e.ctx, at, 10, "outbox")
			if err == nil && len(d.Rows) != 1 {
				err = fmt.Errorf("Due returned %d rows, want the one busy row", len(d.Rows))
			}
			if err != nil {
				return cursor.Registration{}, err
			}
			return d.Rows[0], nil
		},
		"List": func() (cursor.Registration, error) {
			rows, _, err := s.List(e.ctx, cursor.ListOptions{})
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
	e.flush()
	e.reopen(true, Options{})
	if r := e.get("a"); r.NextSeq != last || r.Delivered != last {
		t.Fatalf("final = NextSeq %d Delivered %d, want %d and %d", r.NextSeq, r.Delivered, last, last)
	}
}

// concurrentOperations runs every mutation at once on a few
// registrations — through two stores where stores share their data — and
// checks the indexes against the rows afterwards.
func concurrentOperations(e *env) {
	stores := []cursor.Store{e.s, e.s}
	if e.o.Shared {
		stores[1] = e.open(Options{Now: e.clk.Now})
	}
	ids := []string{"a", "b", "c", "d"}
	for _, id := range ids {
		e.create(reg(id, "outbox"))
	}
	var wg sync.WaitGroup
	for w := range 4 {
		s := stores[w%2]
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(w), 7))
			for i := range 200 {
				id := ids[rnd.IntN(len(ids))]
				at := T0.Add(time.Duration(rnd.IntN(100)) * time.Second)
				var err error
				switch rnd.IntN(8) {
				case 0, 1, 2:
					err = s.Advance(e.ctx, id, cursor.Progress{NextSeq: uint64(i), Delivered: 1, Idle: rnd.IntN(2) == 0})
				case 3:
					err = s.Retry(e.ctx, id, at, "503")
				case 4:
					err = s.Park(e.ctx, id, "410")
				case 5:
					_, err = s.Unpark(e.ctx, id, at)
				case 6:
					_, err = s.Rewind(e.ctx, id, uint64(i), at)
				case 7:
					err = s.Flush(e.ctx)
				}
				if err == nil {
					_, err = s.Due(e.ctx, T0.Add(time.Minute), 10, "outbox")
				}
				if err != nil {
					e.t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, s := range stores {
		if err := s.Flush(e.ctx); err != nil {
			e.t.Fatalf("Flush: %v", err)
		}
	}
	if e.o.Check != nil {
		for _, s := range stores {
			e.o.Check(e.t, s)
		}
	}
}

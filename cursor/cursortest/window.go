package cursortest

import (
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/jetstream-bridge/bridge/cursor"
)

// windowCases are the window of a registration with ordering keys
// (CONTRACT §12): what its receiver acknowledged past NextSeq, carried
// whole by a windowed Advance and stored with the cursor.
var windowCases = []testCase{
	{"window: seen at once, after Flush and by another store", windowIsStored},
	{"window: a rewind clears it", windowRewind},
	{"window: park and unpark keep it", windowParkUnpark},
	{"window: replace keeps it and the cursor", windowReplace},
	{"window: a newer one with the cursor moved replaces the set and trims it", windowNewer},
	{"window: a stale one never moves the cursor back nor replaces a newer set", windowStale},
	{"window: a full one round-trips", windowFull},
	{"window: its failures and schedule land on an active row", windowFailures},
	{"window: an advance without one that moves the cursor trims it", windowTrimmedByAdvance},
	{"window: one that breaks its invariant is refused and the row stays readable", windowRefused},
}

// windowed is the progress of a registration with ordering keys.
func windowed(next uint64, ahead ...uint64) cursor.Progress {
	return cursor.Progress{NextSeq: next, Window: true, Ahead: ahead}
}

// keyed is a registration delivered with ordering keys.
func keyed(id string) cursor.Registration {
	r := reg(id, "outbox")
	r.Ordering = &cursor.Ordering{Key: cursor.OrderSubject, MaxInFlight: 8}
	return r
}

// wantWindow fails the case unless r stands at next with ahead past it.
func (e *env) wantWindow(stage string, r cursor.Registration, next uint64, ahead ...uint64) {
	e.t.Helper()
	if r.NextSeq != next || !slices.Equal(r.Ahead, ahead) {
		e.t.Fatalf("%s: %s at %d ahead %v, want %d ahead %v", stage, r.ID, r.NextSeq, r.Ahead, next, ahead)
	}
}

func windowIsStored(e *env) {
	e.create(keyed("a"))
	p := windowed(10, 12, 13, 20)
	p.Delivered = 4
	e.advance("a", p)
	for _, stage := range []string{"pending", "flushed"} {
		r := e.get("a")
		e.wantWindow(stage+" Get", r, 10, 12, 13, 20)
		if r.Delivered != 4 {
			e.t.Fatalf("%s: Delivered %d, want 4", stage, r.Delivered)
		}
		rows, _, err := e.s.List(e.ctx, cursor.ListOptions{})
		e.must(err)
		e.wantWindow(stage+" List", rows[0], 10, 12, 13, 20)
		d, err := e.s.Due(e.ctx, T0, 10, "outbox")
		e.must(err)
		if len(d.Rows) != 1 {
			e.t.Fatalf("%s: Due = %d rows, want a", stage, len(d.Rows))
		}
		e.wantWindow(stage+" Due", d.Rows[0], 10, 12, 13, 20)
		e.flush()
	}
	e.wantWindow("another store", Get(e.t, e.other(), "a"), 10, 12, 13, 20)

	// Durability may lag an acknowledgement, never lead it: a crash loses
	// the window acknowledged since the last Flush and keeps the flushed one.
	p = windowed(11, 12, 13, 20, 21)
	p.Delivered = 1
	e.advance("a", p)
	e.reopen(true, Options{})
	e.wantWindow("after a crash", e.get("a"), 10, 12, 13, 20)
	// Close flushes it.
	p = windowed(14, 20, 21)
	p.Delivered = 3
	e.advance("a", p)
	e.reopen(false, Options{})
	r := e.get("a")
	e.wantWindow("after Close", r, 14, 20, 21)
	if r.Delivered != 7 {
		e.t.Fatalf("after Close: Delivered %d, want 7", r.Delivered)
	}
}

func windowRewind(e *env) {
	e.create(keyed("a"))
	e.advance("a", windowed(10, 12, 13))
	e.flush()
	at := T0.Add(time.Minute)
	got, err := e.s.Rewind(e.ctx, "a", 5, at)
	e.must(err)
	e.wantWindow("Rewind's answer", got, 5)
	e.wantWindow("after Rewind", e.get("a"), 5)
	// A window acknowledged before a rewind, not flushed, does not land
	// after it.
	e.advance("a", windowed(8, 10, 11))
	got, err = e.s.Rewind(e.ctx, "a", 3, at)
	e.must(err)
	e.wantWindow("Rewind over a pending window", got, 3)
	e.flush()
	e.wantWindow("flushed after the rewind", e.get("a"), 3)
	e.wantWindow("another store", Get(e.t, e.other(), "a"), 3)
	// Forward too.
	e.advance("a", windowed(5, 7))
	e.flush()
	got, err = e.s.Rewind(e.ctx, "a", 50, at)
	e.must(err)
	e.wantWindow("Rewind forward", got, 50)
	e.reopen(true, Options{})
	e.wantWindow("after a crash", e.get("a"), 50)
}

func windowParkUnpark(e *env) {
	e.create(keyed("a"))
	p := windowed(10, 12, 13)
	p.Attempts, p.LastError = 2, "503"
	e.advance("a", p)
	e.must(e.s.Park(e.ctx, "a", "410 Gone")) // folds the pending window
	r := e.get("a")
	e.wantWindow("parked", r, 10, 12, 13)
	if r.State != cursor.Parked || r.Attempts != 3 || r.LastError != "410 Gone" {
		e.t.Fatalf("parked = %+v", r)
	}
	e.reopen(true, Options{})
	e.wantWindow("parked, after a crash", e.get("a"), 10, 12, 13)
	// A POST of another key answered after the park lands on the parked
	// row without unparking it.
	e.advance("a", windowed(10, 12, 13, 15))
	for _, stage := range []string{"pending", "flushed"} {
		r := e.get("a")
		e.wantWindow(stage+" window on a parked row", r, 10, 12, 13, 15)
		if r.State != cursor.Parked || r.Attempts != 3 || !r.NextAttemptAt.IsZero() {
			e.t.Fatalf("%s: a window unparked the row: %+v", stage, r)
		}
		e.flush()
	}
	at := T0.Add(time.Minute)
	if ok, err := e.s.Unpark(e.ctx, "a", at); !ok || err != nil {
		e.t.Fatalf("Unpark = %v, %v", ok, err)
	}
	r = e.get("a")
	e.wantWindow("unparked", r, 10, 12, 13, 15)
	if r.State != cursor.Active || r.Attempts != 0 || !r.NextAttemptAt.Equal(at) {
		e.t.Fatalf("unparked = %+v", r)
	}
	e.wantWindow("unparked, another store", Get(e.t, e.other(), "a"), 10, 12, 13, 15)
}

func windowReplace(e *env) {
	r := keyed("a")
	e.create(r)
	p := windowed(10, 12, 20)
	p.Attempts, p.LastError, p.RetryAt = 1, "503", T0.Add(10*time.Second)
	e.advance("a", p)
	e.flush()
	c := r.Config
	c.Ordering = &cursor.Ordering{Key: "tokens:3", MaxInFlight: 4}
	at := T0.Add(time.Minute)
	got, err := e.s.Replace(e.ctx, c, at)
	e.must(err)
	for _, g := range []cursor.Registration{got, e.get("a")} {
		e.wantWindow("replaced", g, 10, 12, 20)
		if g.Ordering == nil || *g.Ordering != *c.Ordering || g.Attempts != 0 || !g.NextAttemptAt.Equal(at) {
			e.t.Fatalf("replaced = %+v", g)
		}
	}
	// A pending window is folded into the Replace's write and kept.
	e.advance("a", windowed(11, 12, 20))
	c.Ordering = &cursor.Ordering{Key: "tokens:3", MaxInFlight: 16}
	got, err = e.s.Replace(e.ctx, c, at)
	e.must(err)
	e.wantWindow("replaced over a pending window", got, 11, 12, 20)
	e.reopen(true, Options{})
	r = e.get("a")
	e.wantWindow("replaced, after a crash", r, 11, 12, 20)
	if r.Ordering == nil || r.Ordering.MaxInFlight != 16 {
		e.t.Fatalf("the replaced ordering = %+v", r.Ordering)
	}
}

// eachPath creates two keyed registrations and runs first on both, then
// second: "flushed" has first flushed in between, "merged" has both
// pending at once, merged in the store's memory.
func (e *env) eachPath(first, second func(id string)) []string {
	ids := []string{"flushed", "merged"}
	for _, id := range ids {
		e.create(keyed(id))
		first(id)
		if id == "flushed" {
			e.flush()
		}
		second(id)
	}
	return ids
}

// wantEverywhere checks the windows of ids pending, flushed and after a
// crash.
func (e *env) wantEverywhere(ids []string, next uint64, ahead ...uint64) {
	e.t.Helper()
	for _, stage := range []string{"pending", "flushed", "after a crash"} {
		switch stage {
		case "flushed":
			e.flush()
		case "after a crash":
			e.reopen(true, Options{})
		}
		for _, id := range ids {
			e.wantWindow(stage, e.get(id), next, ahead...)
		}
	}
}

func windowNewer(e *env) {
	ids := e.eachPath(
		func(id string) { e.advance(id, windowed(10, 12, 13, 20, 25)) },
		func(id string) { e.advance(id, windowed(14, 20, 30)) })
	// 12 and 13 are behind the new cursor; 25 is not in the newer set.
	e.wantEverywhere(ids, 14, 20, 30)
	// At the same cursor the newer window replaces the set as well.
	for _, id := range ids {
		e.advance(id, windowed(14, 20, 30, 31))
	}
	e.wantEverywhere(ids, 14, 20, 30, 31)
}

func windowStale(e *env) {
	ids := e.eachPath(
		func(id string) { e.advance(id, windowed(14, 20, 30)) },
		func(id string) { e.advance(id, windowed(10, 12, 13, 20, 25)) })
	e.wantEverywhere(ids, 14, 20, 30)
}

func windowFull(e *env) {
	// The widest window the invariant allows: every sequence from the
	// cursor to NextSeq+WindowSize-1 acknowledged (a cursor that stopped
	// on an acknowledged message holds it too).
	const next = 1_000_000
	var full []uint64
	for s := uint64(next); s < next+cursor.WindowSize; s++ {
		full = append(full, s)
	}
	sparse := []uint64{next, next + cursor.WindowSize - 1}
	e.create(keyed("full"))
	e.create(keyed("sparse"))
	e.advance("full", windowed(next, full...))
	e.advance("sparse", windowed(next, sparse...))
	e.wantWindow("pending", e.get("full"), next, full...)
	e.flush()
	e.reopen(true, Options{})
	e.wantWindow("flushed, after a crash", e.get("full"), next, full...)
	e.wantWindow("flushed, after a crash", e.get("sparse"), next, sparse...)
	s := e.other()
	e.wantWindow("another store", Get(e.t, s, "full"), next, full...)
	e.wantWindow("another store", Get(e.t, s, "sparse"), next, sparse...)
}

func windowFailures(e *env) {
	e.create(keyed("a"))
	retryAt := T0.Add(30 * time.Second)
	p := windowed(10, 12)
	p.Delivered, p.Attempts, p.LastError, p.RetryAt = 2, 3, "503 Service Unavailable", retryAt
	e.advance("a", p)
	for _, stage := range []string{"pending", "flushed"} {
		r := e.get("a")
		if r.State != cursor.Active || r.Attempts != 3 || r.LastError != "503 Service Unavailable" || !r.NextAttemptAt.Equal(retryAt) {
			e.t.Fatalf("%s: %+v; want the window's failures, due at its RetryAt", stage, r)
		}
		if ids, _ := e.dueIDs(retryAt.Add(-time.Nanosecond), 10, "outbox"); len(ids) != 0 {
			e.t.Fatalf("%s: due before the window's RetryAt: %v", stage, ids)
		}
		if ids, _ := e.dueIDs(retryAt, 10, "outbox"); !slices.Equal(ids, []string{"a"}) {
			e.t.Fatalf("%s: Due at the window's RetryAt = %v", stage, ids)
		}
		e.flush()
		e.check()
	}
	// Another key's acknowledgement does not clear the oldest message's
	// failures: the next window carries them again.
	p = windowed(10, 12, 13)
	p.Delivered, p.Attempts, p.LastError, p.RetryAt = 1, 3, "503 Service Unavailable", retryAt
	e.advance("a", p)
	if r := e.get("a"); r.Attempts != 3 || r.LastError != "503 Service Unavailable" || r.Delivered != 3 {
		e.t.Fatalf("after another key's acknowledgement: %+v", r)
	}
	// An idle window makes the row idle.
	p = windowed(14)
	p.Idle = true
	e.advance("a", p)
	for _, stage := range []string{"pending", "flushed"} {
		r := e.get("a")
		e.wantWindow(stage, r, 14)
		if r.State != cursor.Active || r.Attempts != 0 || r.LastError != "" || !r.NextAttemptAt.IsZero() {
			e.t.Fatalf("%s: idle window = %+v", stage, r)
		}
		if ids, _ := e.dueIDs(T0.Add(time.Hour), 10, "outbox"); len(ids) != 0 {
			e.t.Fatalf("%s: an idle row is due: %v", stage, ids)
		}
		e.flush()
		e.check()
	}
	if n, err := e.s.WakeBehind(e.ctx, 20); err != nil || n != 1 {
		e.t.Fatalf("WakeBehind(20) woke %d (%v); want the idle windowed row", n, err)
	}
	// The window's error is bounded as a Retry's is.
	huge := strings.Repeat("é", 10_000)
	p = windowed(14, 16)
	p.Attempts, p.LastError, p.RetryAt = 1, huge, T0.Add(time.Minute)
	e.advance("a", p)
	e.flush()
	if r := e.get("a"); len(r.LastError) > 4096 || !strings.HasPrefix(huge, r.LastError) || len(r.LastError) < 4000 {
		e.t.Fatalf("stored LastError is %d bytes", len(r.LastError))
	}
}

func windowTrimmedByAdvance(e *env) {
	ids := e.eachPath(
		func(id string) { e.advance(id, windowed(10, 12, 13, 20)) },
		func(id string) { e.advance(id, cursor.Progress{NextSeq: 13, Delivered: 1}) })
	// 12 is behind the new cursor; 13, which it stands on, stays
	// acknowledged until a window reads past it.
	e.wantEverywhere(ids, 13, 13, 20)
	// Behind the cursor it changes nothing; past every member it empties
	// the set.
	for _, id := range ids {
		e.advance(id, cursor.Progress{NextSeq: 5, Delivered: 1})
	}
	e.wantEverywhere(ids, 13, 13, 20)
	for _, id := range ids {
		e.advance(id, cursor.Progress{NextSeq: 21, Delivered: 1})
	}
	e.wantEverywhere(ids, 21)
}

// A window the store could not write, or not read back once written, is
// refused by Advance; the row keeps its window and stays readable.
func windowRefused(e *env) {
	e.create(keyed("a"))
	e.advance("a", windowed(10, 12, 20))
	e.flush()
	const next = 100
	for name, ahead := range map[string][]uint64{
		"descending":          {130, 120},
		"repeated":            {120, 120},
		"behind the cursor":   {99, 120},
		"a window past it":    {120, next + cursor.WindowSize},
		"far past it":         {next + 1<<20},
		"descending far back": {120, 1},
	} {
		p := windowed(next, ahead...)
		if err := e.s.Advance(e.ctx, "a", p); !errors.Is(err, cursor.ErrInvalidWindow) {
			e.t.Errorf("%s: Advance(%v) = %v, want cursor.ErrInvalidWindow", name, ahead, err)
		}
	}
	e.wantWindow("pending", e.get("a"), 10, 12, 20)
	e.flush()
	e.wantWindow("flushed", e.get("a"), 10, 12, 20)
	e.reopen(true, Options{})
	e.wantWindow("after a crash", e.get("a"), 10, 12, 20)
	// A window without the flag is not one: its set is not read.
	e.advance("a", cursor.Progress{NextSeq: 11, Ahead: cursor.Ahead{3, 1}})
	e.flush()
	e.wantWindow("after a plain Advance", e.get("a"), 11, 12, 20)
}

package cursortest

import (
	"github.com/jetstream-bridge/bridge/cursor"
)

// filterCases are a filter's counts (CONTRACT §13): they ride with the
// cursor through the write-behind, as Delivered does, and survive a
// flush, a crash after it, another store and a PUT.
var filterCases = []testCase{
	{"filter counts are written behind with the cursor", filterCounts},
	{"a window carries filter counts", filterCountsWindowed},
}

// wantFilter checks r's filter counts.
func (e *env) wantFilter(stage string, r cursor.Registration, filtered, failed uint64, last string) {
	e.t.Helper()
	if r.Filtered != filtered || r.FilterErrors != failed || r.LastFilterError != last {
		e.t.Fatalf("%s: filtered %d, filterErrors %d, lastFilterError %q; want %d, %d, %q",
			stage, r.Filtered, r.FilterErrors, r.LastFilterError, filtered, failed, last)
	}
}

func filterCounts(e *env) {
	r := reg("a", "outbox")
	r.Filter = "subject == 'journal.x'"
	e.create(r)
	e.advance("a", cursor.Progress{NextSeq: 5, Filtered: 3, FilterErrors: 1, LastFilterError: "journal message 4: no such key: total"})
	// Merged with the pending one: counts add, an empty error keeps the last.
	e.advance("a", cursor.Progress{NextSeq: 9, Delivered: 2, Filtered: 2})
	e.wantFilter("pending", e.get("a"), 5, 1, "journal message 4: no such key: total")
	e.flush()
	e.advance("a", cursor.Progress{NextSeq: 11, FilterErrors: 1, LastFilterError: "journal message 10: bad"})
	e.wantFilter("flushed, then more pending", e.get("a"), 5, 2, "journal message 10: bad")
	e.reopen(true, Options{})
	got := e.get("a")
	e.wantFilter("after a crash", got, 5, 1, "journal message 4: no such key: total")
	if got.Filter != r.Filter || got.Delivered != 2 || got.NextSeq != 9 {
		e.t.Fatalf("after a crash = %+v", got)
	}
	e.advance("a", cursor.Progress{NextSeq: 11, FilterErrors: 1, LastFilterError: "journal message 10: bad"})
	e.flush()
	e.other()
	e.wantFilter("another store", e.get("a"), 5, 2, "journal message 10: bad")
	c := r.Config
	c.Filter = "subject == 'journal.y'"
	got, err := e.s.Replace(e.ctx, c, T0)
	e.must(err)
	e.wantFilter("replaced", got, 5, 2, "journal message 10: bad")
	if got = e.get("a"); got.Filter != c.Filter {
		e.t.Fatalf("replaced filter = %q, want %q", got.Filter, c.Filter)
	}
	e.check()
}

func filterCountsWindowed(e *env) {
	ids := e.eachPath(
		func(id string) {
			p := windowed(10, 12)
			p.Filtered, p.FilterErrors, p.LastFilterError = 1, 1, "journal message 11: x"
			e.advance(id, p)
		},
		func(id string) {
			p := windowed(13, 20)
			p.Filtered = 6
			e.advance(id, p)
		})
	e.wantEverywhere(ids, 13, 20)
	for _, id := range ids {
		e.wantFilter(id, e.get(id), 7, 1, "journal message 11: x")
	}
}

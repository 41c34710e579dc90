package journal

import (
	"fmt"
	"testing"

	"github.com/jetstream-bridge/bridge/projection"
)

func recs(seqs ...uint64) []projection.Record {
	out := make([]projection.Record, len(seqs))
	for i, s := range seqs {
		out[i] = projection.Record{Seq: s, Subject: "a.b", Data: []byte("x")}
	}
	return out
}

func span(r *run) string {
	if r == nil {
		return "none"
	}
	return fmt.Sprintf("[%d,%d]#%d", r.lo, r.hi, len(r.recs))
}

func TestRunCacheKeepsRunsDisjoint(t *testing.T) {
	c := newRunCache(1 << 20)
	c.insert(&run{filter: "a.>", lo: 10, hi: 20, recs: recs(12, 15, 20), existsFrom: 11})
	// A concurrent fetch from 5 overlapping the run at 10 is trimmed to
	// what no run covers.
	c.insert(&run{filter: "a.>", lo: 5, hi: 30, recs: recs(6, 12, 15, 20, 25, 30), existsFrom: 5})
	// One from 18 adds only what follows the run that covers 18.
	c.insert(&run{filter: "a.>", lo: 18, hi: 40, recs: recs(20, 25, 30, 40), existsFrom: 18})
	// One that only overlaps adds nothing.
	c.insert(&run{filter: "a.>", lo: 12, hi: 20, recs: recs(12, 15, 20), existsFrom: 12})
	if len(c.byFilter["a.>"]) != 3 {
		t.Fatalf("%d runs, want 3", len(c.byFilter["a.>"]))
	}
	for _, tc := range []struct {
		p    uint64
		want string
	}{
		{4, "none"}, {5, "[5,9]#1"}, {6, "[5,9]#1"}, {9, "[5,9]#1"},
		{10, "[10,20]#3"}, {20, "[10,20]#3"}, {21, "[21,40]#3"}, {40, "[21,40]#3"}, {41, "none"},
	} {
		if got := span(c.find("a.>", tc.p)); got != tc.want {
			t.Errorf("find(%d) = %s, want %s", tc.p, got, tc.want)
		}
	}
	if got := c.find("a.>", 10).existsFrom; got != 11 {
		t.Errorf("existsFrom of the first run = %d, want 11", got)
	}
	if got := c.find("a.>", 21).existsFrom; got != 21 {
		t.Errorf("existsFrom of a trimmed run = %d, want its start", got)
	}
	if c.find("b.>", 10) != nil {
		t.Error("a run of another filter was found")
	}
}

func TestRunCacheEvictsLeastRecentlyReadByBytes(t *testing.T) {
	one := recordOverhead + recordSize(&recs(1)[0]) // a run of one record
	c := newRunCache(3 * one)
	c.insert(&run{filter: "a", lo: 1, hi: 1, recs: recs(1)})
	c.insert(&run{filter: "b", lo: 1, hi: 1, recs: recs(1)})
	c.insert(&run{filter: "c", lo: 1, hi: 1, recs: recs(1)})
	c.find("a", 1) // a is now the most recently read
	c.insert(&run{filter: "d", lo: 1, hi: 1, recs: recs(1)})
	if c.find("b", 1) != nil || c.find("a", 1) == nil || c.find("c", 1) == nil || c.find("d", 1) == nil {
		t.Fatal("eviction did not drop the least recently read run")
	}
	if c.bytes > c.budget {
		t.Fatalf("%d bytes cached over a budget of %d", c.bytes, c.budget)
	}
	if len(c.byFilter) != 3 {
		t.Fatalf("%d filters indexed, want 3", len(c.byFilter))
	}
}

func TestRingStaysWithinItsBudgetAndKnowsWhatItCovers(t *testing.T) {
	one := recordSize(&recs(1)[0])
	g := &ring{budget: 4 * one}
	epoch := g.restart(10, 9)
	for seq := uint64(10); seq < 3000; seq++ {
		if seq%7 == 0 {
			continue // deleted in the stream: the tail never sees it
		}
		if !g.push(epoch, recs(seq)[0]) {
			t.Fatalf("push %d refused", seq)
		}
	}
	if g.push(epoch, recs(2990)[0]) {
		t.Fatal("a redelivered message was accepted")
	}
	if g.bytes > g.budget || len(g.recs)-g.start != 4 {
		t.Fatalf("%d bytes in %d records for a budget of 4", g.bytes, len(g.recs)-g.start)
	}
	if _, ok := g.read("a.b", 2994, 10); ok {
		t.Fatal("the ring answered for an evicted message")
	}
	// Held: 2995, 2997, 2998, 2999 (2996 was deleted).
	rr, ok := g.read("a.b", 2995, 2)
	if !ok || len(rr.recs) != 2 || rr.recs[1].Seq != 2997 || rr.caughtUp || rr.next != 2998 {
		t.Fatalf("read = %+v, %v", rr, ok)
	}
	rr, ok = g.read("a.b", 2998, 10)
	if !ok || len(rr.recs) != 2 || !rr.caughtUp || rr.next != 3000 {
		t.Fatalf("read to the head = %+v, %v", rr, ok)
	}
	g.stop(epoch)
	if _, ok := g.read("a.b", 3000, 10); ok {
		t.Fatal("a stopped ring answered for the head")
	}
	if g.push(epoch, recs(3000)[0]) {
		t.Fatal("a stopped ring accepted a message")
	}
}

func TestRingIsNotCaughtUpBeforeItReachesTheHeadItStartedAt(t *testing.T) {
	g := &ring{budget: 1 << 20}
	epoch := g.restart(1, 3) // a tail replaying a re-created stream from 1
	if _, ok := g.read("a.b", 1, 10); ok {
		t.Fatal("an empty replaying ring answered")
	}
	g.push(epoch, recs(1)[0])
	if rr, ok := g.read("a.b", 1, 10); !ok || rr.caughtUp {
		t.Fatalf("read = %+v, %v; want the message and not caught up", rr, ok)
	}
	g.push(epoch, recs(2)[0])
	g.push(epoch, recs(3)[0])
	if rr, ok := g.read("a.b", 1, 10); !ok || !rr.caughtUp || len(rr.recs) != 3 {
		t.Fatalf("read = %+v, %v; want 3 and caught up", rr, ok)
	}
}

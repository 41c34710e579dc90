package journal

import (
	"container/list"
	"slices"
	"sort"
	"sync"

	"github.com/jetstream-bridge/bridge/projection"
)

// recordOverhead approximates what a Record costs beyond its bytes (struct,
// slice and map headers), so a cache of tiny messages is bounded too.
const recordOverhead = 160

func recordSize(r *projection.Record) int64 {
	n := recordOverhead + len(r.Subject) + len(r.Data)
	for k, vs := range r.Header {
		n += len(k) + 16
		for _, v := range vs {
			n += len(v) + 16
		}
	}
	return int64(n)
}

// ring holds the newest messages of the whole stream as Tail receives them.
//
// Invariant: every message the stream stored with lo <= seq <= hi is in
// recs (hi = lo-1 when none is), because the ordered consumer feeding it
// delivers every stored message in order and restarts after the last one
// it delivered. A read inside [lo, hi] is therefore answered exactly from
// memory. While live — Tail running and past the head it started at — hi is
// also the head as Tail knows it, so a read that reaches hi is caught up
// (as of the tail); otherwise reads past hi go to the server, so a tail that
// stopped, or one still replaying toward the head it started at, never
// hides a stored message.
type ring struct {
	mu     sync.RWMutex
	recs   []projection.Record // recs[start:] ascending by Seq
	start  int
	lo, hi uint64
	bytes  int64
	budget int64
	// running is set while a Tail feeds this epoch; synced is the head the
	// tail must reach before hi can stand for the stream's head.
	running bool
	synced  uint64
	// epoch changes whenever the ring restarts, so messages from a consumer
	// that has been replaced are refused.
	epoch uint64
}

// restart empties the ring for a tail that delivers from first on, with
// head the stream's last sequence when it started; it returns the epoch
// pushes must present.
func (g *ring) restart(first, head uint64) uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.clearLocked()
	g.lo, g.hi = first, first-1
	g.running, g.synced = true, head
	return g.epoch
}

// stop keeps the contents (they stay exact) but lets reads past hi go to
// the server.
func (g *ring) stop(epoch uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.epoch == epoch {
		g.running = false
	}
}

// clear drops everything: the stream was re-created and the sequences in
// memory name other messages now.
func (g *ring) clear() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.clearLocked()
}

func (g *ring) clearLocked() {
	clear(g.recs)
	g.recs, g.start, g.bytes, g.running = g.recs[:0], 0, 0, false
	g.lo, g.hi = 1, 0
	g.epoch++
}

// drop removes the messages seqs (ascending) names: deleted from the
// stream, they are no longer stored, so the invariant holds without them.
func (g *ring) drop(seqs []uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	held := g.recs[g.start:]
	kept := held[:0]
	for _, rec := range held {
		if _, del := slices.BinarySearch(seqs, rec.Seq); del {
			g.bytes -= recordSize(&rec)
			continue
		}
		kept = append(kept, rec)
	}
	clear(held[len(kept):])
	g.recs = g.recs[:g.start+len(kept)]
}

func (g *ring) liveLocked() bool { return g.running && g.hi >= g.synced }

// push appends the next message from the tail. It reports false, and
// keeps nothing, for a message already held (a redelivery after a consumer
// reset) or from a consumer the ring has restarted without.
func (g *ring) push(epoch uint64, rec projection.Record) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.epoch != epoch || !g.running || rec.Seq <= g.hi {
		return false
	}
	g.recs = append(g.recs, rec)
	g.hi = rec.Seq
	g.bytes += recordSize(&rec)
	for g.bytes > g.budget && g.start < len(g.recs) {
		old := &g.recs[g.start]
		g.bytes -= recordSize(old)
		g.lo = old.Seq + 1
		*old = projection.Record{}
		g.start++
	}
	if g.start >= 1024 && g.start*2 >= len(g.recs) {
		n := copy(g.recs, g.recs[g.start:])
		clear(g.recs[n:])
		g.recs, g.start = g.recs[:n], 0
	}
	return true
}

// ringRead is what the ring could answer for a read from p.
type ringRead struct {
	recs     []projection.Record
	next     uint64 // every match in [p, next) is in recs
	caughtUp bool
}

// read returns up to need messages matching filter from p. ok is false when
// p lies outside what the ring knows.
func (g *ring) read(filter string, p uint64, need int) (out ringRead, ok bool) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	live := g.liveLocked()
	if p < g.lo || p > g.hi+1 || (p == g.hi+1 && !live) {
		return out, false
	}
	held := g.recs[g.start:]
	i := sort.Search(len(held), func(i int) bool { return held[i].Seq >= p })
	for ; i < len(held); i++ {
		if !SubjectMatches(filter, held[i].Subject) {
			continue
		}
		if len(out.recs) == need {
			// The page is full and one more match exists.
			out.next = out.recs[len(out.recs)-1].Seq + 1
			return out, true
		}
		out.recs = append(out.recs, held[i])
	}
	out.next, out.caughtUp = g.hi+1, live
	return out, true
}

// run is a fetched stretch of one filter's messages.
//
// Invariant: recs holds every message matching filter with
// lo <= seq <= hi, ascending. hi never exceeds what the server answered
// for: the last record it returned (a caught-up answer says nothing of
// messages a lagging replica had not yet stored), or less when trimmed.
// A run is never modified once cached; trimming makes a new one.
type run struct {
	filter string
	lo, hi uint64
	recs   []projection.Record
	// existsFrom is the first sequence >= lo that the stream still held
	// when the run was fetched; lo when nothing below it was missing.
	existsFrom uint64
	size       int64
	elem       *list.Element
}

// runCache keeps recently fetched runs per filter, evicting the least
// recently read first once their bytes exceed the budget.
type runCache struct {
	budget, bytes int64
	lru           list.List // of *run, most recently used at the front
	byFilter      map[string][]*run
}

func newRunCache(budget int64) *runCache {
	return &runCache{budget: budget, byFilter: make(map[string][]*run)}
}

// find returns the run of filter that contains p, or nil.
func (c *runCache) find(filter string, p uint64) *run {
	runs := c.byFilter[filter]
	i := sort.Search(len(runs), func(i int) bool { return runs[i].lo > p }) - 1
	if i < 0 || p > runs[i].hi {
		return nil
	}
	c.lru.MoveToFront(runs[i].elem)
	return runs[i]
}

// insert caches the part of r that no cached run already covers: fetches
// start where no run did, but concurrent ones may overlap.
func (c *runCache) insert(r *run) {
	runs := c.byFilter[r.filter]
	i := sort.Search(len(runs), func(i int) bool { return runs[i].lo > r.lo })
	lo, hi := r.lo, r.hi
	if i > 0 && runs[i-1].hi >= lo {
		lo = runs[i-1].hi + 1
	}
	if i < len(runs) && runs[i].lo <= hi {
		hi = runs[i].lo - 1
	}
	if lo > hi {
		return // nothing new
	}
	recs := r.recs
	a := sort.Search(len(recs), func(k int) bool { return recs[k].Seq >= lo })
	b := sort.Search(len(recs), func(k int) bool { return recs[k].Seq > hi })
	// A trimmed run may hold no record and still be worth keeping: it
	// says none matches up to the next run.
	n := &run{filter: r.filter, lo: lo, hi: hi, recs: recs[a:b], existsFrom: lo, size: recordOverhead}
	if lo == r.lo {
		n.existsFrom = r.existsFrom
	}
	for k := range n.recs {
		n.size += recordSize(&n.recs[k])
	}
	n.elem = c.lru.PushFront(n)
	c.bytes += n.size
	runs = append(runs, nil)
	copy(runs[i+1:], runs[i:])
	runs[i] = n
	c.byFilter[r.filter] = runs
	c.evict()
}

func (c *runCache) evict() {
	for c.bytes > c.budget {
		back := c.lru.Back()
		if back == nil {
			return
		}
		c.remove(back.Value.(*run))
	}
}

func (c *runCache) remove(r *run) {
	c.lru.Remove(r.elem)
	c.bytes -= r.size
	runs := c.byFilter[r.filter]
	i := sort.Search(len(runs), func(i int) bool { return runs[i].lo >= r.lo })
	runs = slices.Delete(runs, i, i+1)
	if len(runs) == 0 {
		delete(c.byFilter, r.filter)
	} else {
		c.byFilter[r.filter] = runs
	}
}

func (c *runCache) clear() {
	c.lru.Init()
	c.bytes = 0
	clear(c.byFilter)
}

package kvstore

import (
	"cmp"
	"slices"
	"sync"

	"github.com/jetstream-bridge/bridge/cursor"
)

// row is a registration with its incarnation, its rewinds and the
// revision of the bucket it was read or written at.
type row struct {
	cursor.Registration
	inc uint64
	// epoch counts the row's rewinds. Progress acknowledged before a
	// rewind must not land after it, through whichever bridge the rewind
	// was made: it would skip what the operator asked to replay.
	epoch uint64
	rev   uint64
	// idemKey and idemHash are the idempotency key the row was created
	// with, if any: a create of the same id, key and hash racing it is a
	// replay, not ErrExists (see Store.createdWith).
	idemKey  string
	idemHash []byte
}

// dueKey orders a namespace's due rows: earliest first, then by id.
type dueKey struct {
	at int64
	id string
}

func compareDue(a, b dueKey) int {
	if c := cmp.Compare(a.at, b.at); c != 0 {
		return c
	}
	return cmp.Compare(a.id, b.id)
}

// index holds every registration of the bucket and what the bolt store
// keeps in its derived buckets, derived here in the same critical section
// as the row, so they cannot drift apart.
//
// A row is replaced only by a newer revision: this store's own writes and
// the watch deliver the same revisions in either order. A row this store
// deleted leaves a tombstone (the revision it had) until the watch passes
// the delete marker, so a late watch event cannot bring it back.
type index struct {
	mu     sync.RWMutex
	rows   map[string]*row
	ids    []string            // sorted
	due    map[string][]dueKey // per namespace, sorted: Active rows with a NextAttemptAt
	idle   map[string]struct{} // Active rows without one
	routes map[string]map[string]string
	counts map[string]map[cursor.State]int
	sums   map[string]map[cursor.State]uint64
	tombs  map[string]uint64
	// perShard counts the registrations not completed in each shard
	// shardOf names (WithShardWeights); nil without it.
	shardOf  func(id string) int
	perShard []int
}

func newIndex() index {
	return index{
		rows:   make(map[string]*row),
		due:    make(map[string][]dueKey),
		idle:   make(map[string]struct{}),
		routes: make(map[string]map[string]string),
		counts: make(map[string]map[cursor.State]int),
		sums:   make(map[string]map[cursor.State]uint64),
		tombs:  make(map[string]uint64),
	}
}

// shardWeights returns a copy of perShard.
func (x *index) shardWeights() []int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return slices.Clone(x.perShard)
}

// get returns a copy of id's row.
func (x *index) get(id string) (row, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	r, ok := x.rows[id]
	if !ok {
		return row{}, false
	}
	return *r, true
}

// put stores r unless the index already holds that revision or a newer
// one. The caller holds mu.
func (x *index) put(r *row) {
	if t, ok := x.tombs[r.ID]; ok {
		if r.rev <= t {
			return
		}
		delete(x.tombs, r.ID)
	}
	old, ok := x.rows[r.ID]
	if ok && old.rev >= r.rev {
		return
	}
	if ok {
		x.unlink(old)
	} else {
		i, _ := slices.BinarySearch(x.ids, r.ID)
		x.ids = slices.Insert(x.ids, i, r.ID)
	}
	x.rows[r.ID] = r
	x.link(r)
}

// removeLocal drops id after this store deleted it at a revision after
// rev. The caller holds mu.
func (x *index) removeLocal(id string, rev uint64) {
	x.tombs[id] = max(x.tombs[id], rev)
	if r, ok := x.rows[id]; ok && r.rev <= rev {
		x.drop(r)
	}
}

// removeWatched drops id for a delete marker at rev.
func (x *index) removeWatched(id string, rev uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if t, ok := x.tombs[id]; ok && t < rev {
		delete(x.tombs, id)
	}
	if r, ok := x.rows[id]; ok && r.rev < rev {
		x.drop(r)
	}
}

func (x *index) drop(r *row) {
	x.unlink(r)
	delete(x.rows, r.ID)
	if i, ok := slices.BinarySearch(x.ids, r.ID); ok {
		x.ids = slices.Delete(x.ids, i, i+1)
	}
}

func isDue(r *cursor.Registration) bool { return r.State == cursor.Active && !r.NextAttemptAt.IsZero() }

func isIdle(r *cursor.Registration) bool { return r.State == cursor.Active && r.NextAttemptAt.IsZero() }

// link and unlink add and take away r's entries in the derived indexes.
func (x *index) link(r *row)   { x.derive(r, 1) }
func (x *index) unlink(r *row) { x.derive(r, -1) }

func (x *index) derive(r *row, sign int) {
	ns, st := r.Namespace, r.State
	if x.counts[ns] == nil {
		x.counts[ns] = make(map[cursor.State]int)
		x.sums[ns] = make(map[cursor.State]uint64)
	}
	x.counts[ns][st] += sign
	if x.perShard != nil && st != cursor.Completed {
		x.perShard[x.shardOf(r.ID)] += sign
	}
	if st != cursor.Completed {
		x.sums[ns][st] += uint64(sign) * r.NextSeq // wraps back on unlink
	}
	if x.counts[ns][st] == 0 {
		delete(x.counts[ns], st)
		delete(x.sums[ns], st)
	}
	if len(x.counts[ns]) == 0 {
		delete(x.counts, ns)
		delete(x.sums, ns)
	}
	if st != cursor.Active {
		return
	}
	x.derivedRoute(r, sign)
	if isIdle(&r.Registration) {
		if sign > 0 {
			x.idle[r.ID] = struct{}{}
		} else {
			delete(x.idle, r.ID)
		}
		return
	}
	k := dueKey{r.NextAttemptAt.UnixNano(), r.ID}
	q := x.due[ns]
	i, found := slices.BinarySearchFunc(q, k, compareDue)
	switch {
	case sign > 0 && !found:
		x.due[ns] = slices.Insert(q, i, k)
	case sign < 0 && found:
		if x.due[ns] = slices.Delete(q, i, i+1); len(x.due[ns]) == 0 {
			delete(x.due, ns)
		}
	}
}

func (x *index) derivedRoute(r *row, sign int) {
	ids := x.routes[r.Subject]
	if sign > 0 {
		if ids == nil {
			ids = make(map[string]string)
			x.routes[r.Subject] = ids
		}
		ids[r.ID] = r.Namespace
		return
	}
	delete(ids, r.ID)
	if len(ids) == 0 {
		delete(x.routes, r.Subject)
	}
}

package kvstore

import (
	"sync"
	"time"

	"github.com/jetstream-bridge/bridge/cursor"
)

// progress is the acknowledged, not yet written part of one
// registration's Advances, merged and applied by the transitions of
// package cursor (Progress.Then, Progress.ApplyTo) as the bolt store's is.
// Invariant: it only ever holds what a receiver acknowledged, so losing it
// repeats deliveries and never skips one.
type progress struct {
	cursor.Progress
	// inc and epoch are the incarnation and rewinds of the row the
	// progress was acknowledged on; it never applies to another.
	inc, epoch uint64
	// at is the store's clock at the latest Advance.
	at time.Time
}

// then merges the older p with the newer q.
func (p progress) then(q progress) progress {
	if p.inc != q.inc || p.epoch != q.epoch {
		return q
	}
	q.Progress = p.Progress.Then(q.Progress)
	return q
}

func (p progress) apply(r *cursor.Registration) { p.ApplyTo(r, p.at) }

// on reports whether p was acknowledged on r as it stands.
func (p progress) on(r *row) bool { return p.inc == r.inc && p.epoch == r.epoch }

// writeBehind holds acknowledged progress between Advance and the write
// that stores it. A write claims a key's progress (pending → inflight);
// when it ends, settle drops it (written, and the index updated in the
// same critical section) or merges it back under pending. Readers overlay
// inflight and pending, under the index's read lock, so no read shows a
// cursor behind one it could already have seen.
type writeBehind struct {
	mu       sync.Mutex
	pending  map[string]progress
	inflight map[string]progress
}

// add merges p into id's pending progress; with known, only when some is
// pending already, taking its incarnation. It reports whether it added.
func (w *writeBehind) add(id string, p progress, known bool) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	old, ok := w.pending[id]
	if !ok {
		old, ok = w.inflight[id]
	}
	if known {
		if !ok {
			return false
		}
		p.inc, p.epoch = old.inc, old.epoch
	}
	if q, pend := w.pending[id]; pend {
		p = q.then(p)
	}
	if w.pending == nil {
		w.pending = make(map[string]progress)
	}
	w.pending[id] = p
	return true
}

// claim moves id's pending progress into the write the caller makes while
// it holds id's key lock.
func (w *writeBehind) claim(id string) (progress, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	p, ok := w.pending[id]
	if !ok {
		return progress{}, false
	}
	delete(w.pending, id)
	if w.inflight == nil {
		w.inflight = make(map[string]progress)
	}
	w.inflight[id] = p
	return p, true
}

// settle ends id's inflight write: kept false drops it (written, or
// dropped on purpose); true puts it back under pending, older than
// anything added since.
func (w *writeBehind) settle(id string, keep bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.settleLocked(id, keep)
}

func (w *writeBehind) settleLocked(id string, keep bool) {
	old, ok := w.inflight[id]
	if !ok {
		return
	}
	delete(w.inflight, id)
	if !keep {
		return
	}
	if nw, ok := w.pending[id]; ok {
		old = old.then(nw)
	}
	if w.pending == nil {
		w.pending = make(map[string]progress)
	}
	w.pending[id] = old
}

// writing reports whether a write of id is in flight.
func (w *writeBehind) writing(id string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.inflight[id]
	return ok
}

// forget drops everything acknowledged for id: its row is gone.
func (w *writeBehind) forget(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.pending, id)
	delete(w.inflight, id)
}

// lookup returns id's progress not yet in the index. The caller holds
// the index's lock (read or write).
func (w *writeBehind) lookup(id string) (progress, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	p, found := w.inflight[id]
	if q, ok := w.pending[id]; ok {
		if found {
			q = p.then(q)
		}
		return q, true
	}
	return p, found
}

// ids returns every id with progress not yet written.
func (w *writeBehind) ids() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]string, 0, len(w.pending)+len(w.inflight))
	for id := range w.pending {
		out = append(out, id)
	}
	for id := range w.inflight {
		if _, dup := w.pending[id]; !dup {
			out = append(out, id)
		}
	}
	return out
}

// size is how many registrations have progress not yet written.
func (w *writeBehind) size() int { return len(w.ids()) }

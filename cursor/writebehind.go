package cursor

import (
	"sync"
	"time"
)

// progress is the acknowledged, not yet durable part of one registration's
// Advances. Invariant: it only ever holds what a receiver acknowledged, so
// losing it in a crash repeats deliveries and never skips one.
type progress struct {
	Progress
	// inc is the incarnation of the row the progress was acknowledged on;
	// progress never applies to another incarnation.
	inc uint64
	// at is the store's clock at the latest Advance: UpdatedAt, and
	// CompletedAt when complete.
	at time.Time
}

// then merges the older progress p with the newer q (see Progress.Then);
// progress of another incarnation is replaced, never merged.
func (p progress) then(q progress) progress {
	if p.inc != q.inc {
		return q
	}
	q.Progress = p.Progress.Then(q.Progress)
	return q
}

// apply folds p into r, whose incarnation the caller has matched (see
// Progress.ApplyTo).
func (p progress) apply(r *Registration) { p.ApplyTo(r, p.at) }

// writeBehind holds acknowledged progress between Advance and the write
// transaction that makes it durable.
//
// A write transaction that folds progress first moves it from pending to
// inflight, tagged with its own transaction id; when the transaction ends,
// settle drops inflight (committed) or merges it back under pending
// (failed, so nothing acknowledged is lost). A reader whose snapshot is older
// than the inflight transaction still overlays inflight, so no read ever
// shows a cursor behind one it could already have seen.
//
// That needs inflight to outlive every reader whose snapshot predates its
// commit: readers hold reading (shared) from before their snapshot until
// their last lookup, and settle takes it exclusively. Settle only touches
// memory, so the wait is short, and it never overlaps a bbolt write (the
// writer lock is released by then), so a reader waiting for its snapshot
// cannot be waiting on the settler.
//
// Lock order: DB.write → bbolt's writer lock (released before settle) →
// reading → mu. Readers: reading → bbolt read transaction → mu. mu guards
// the maps only and is never held across I/O.
type writeBehind struct {
	reading    sync.RWMutex
	mu         sync.Mutex
	pending    map[string]progress
	inflight   map[string]progress
	inflightTx int
}

// add merges acknowledged progress for id.
func (w *writeBehind) add(id string, p progress) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if old, ok := w.pending[id]; ok {
		p = old.then(p)
	}
	if w.pending == nil {
		w.pending = make(map[string]progress)
	}
	w.pending[id] = p
}

// addPending merges p into progress already pending for id, taking that
// entry's incarnation, and reports whether there was one. The row cannot
// have been deleted meanwhile: Delete discards its pending progress.
func (w *writeBehind) addPending(id string, p progress) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	old, ok := w.pending[id]
	if !ok {
		return false
	}
	p.inc = old.inc
	w.pending[id] = old.then(p)
	return true
}

// claim moves id's pending progress into the write transaction txID.
func (w *writeBehind) claim(txID int, id string) (progress, bool) {
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
	if older, ok := w.inflight[id]; ok {
		p = older.then(p)
	}
	w.inflight[id] = p
	w.inflightTx = txID
	return p, true
}

// claimAll moves every pending entry into the write transaction txID.
func (w *writeBehind) claimAll(txID int) map[string]progress {
	w.mu.Lock()
	defer w.mu.Unlock()
	all := w.pending
	w.pending = nil
	if w.inflight == nil {
		w.inflight = all
	} else {
		for id, p := range all {
			if older, ok := w.inflight[id]; ok {
				p = older.then(p)
			}
			w.inflight[id] = p
		}
	}
	w.inflightTx = txID
	return all
}

// settle ends the inflight transaction: committed progress is durable and
// dropped; progress of a failed transaction returns to pending, older than
// anything added since.
func (w *writeBehind) settle(committed bool) {
	w.reading.Lock()
	defer w.reading.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	if !committed {
		for id, old := range w.inflight {
			if w.pending == nil {
				w.pending = make(map[string]progress)
			}
			if nw, ok := w.pending[id]; ok {
				old = old.then(nw)
			}
			w.pending[id] = old
		}
	}
	w.inflight = nil
}

// lookup returns the progress a reader whose snapshot is transaction readTx
// has not seen yet.
func (w *writeBehind) lookup(readTx int, id string) (progress, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lookupLocked(readTx, id)
}

func (w *writeBehind) lookupLocked(readTx int, id string) (progress, bool) {
	p, found := progress{}, false
	if w.inflight != nil && readTx < w.inflightTx {
		p, found = w.inflight[id]
	}
	if q, ok := w.pending[id]; ok {
		if found {
			q = p.then(q)
		}
		return q, true
	}
	return p, found
}

// completing returns the ids whose progress unseen by readTx completes them.
func (w *writeBehind) completing(readTx int) map[string]progress {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]progress)
	add := func(id string) {
		if p, ok := w.lookupLocked(readTx, id); ok && p.Complete {
			out[id] = p
		}
	}
	for id := range w.pending {
		add(id)
	}
	if w.inflight != nil && readTx < w.inflightTx {
		for id := range w.inflight {
			add(id)
		}
	}
	return out
}

// size is how many registrations have progress not yet durable.
func (w *writeBehind) size() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(w.pending)
	for id := range w.inflight {
		if _, dup := w.pending[id]; !dup {
			n++
		}
	}
	return n
}

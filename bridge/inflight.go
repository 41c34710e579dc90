package bridge

import (
	"context"
	"sync"
	"time"
)

// inFlight counts the POSTs of each registration that were sent and not
// yet answered: the answer's inFlight (CONTRACT §12) and the namespace's
// bridge_posts_in_flight. An entry lives only while its count is above
// zero, so idle registrations cost nothing here.
type inFlight struct {
	mu sync.Mutex
	n  map[string]int
}

func (f *inFlight) add(id string, d int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == nil {
		f.n = make(map[string]int)
	}
	if v := f.n[id] + d; v > 0 {
		f.n[id] = v
	} else {
		delete(f.n, id)
	}
}

func (f *inFlight) of(id string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n[id]
}

// InFlight is how many POSTs of registration id this worker has in flight.
func (w *Worker) InFlight(id string) int { return w.inFlight.of(id) }

// InFlight is how many POSTs of registration id this bridge has in flight
// (CONTRACT §12's inFlight), over every namespace's worker.
func (d *Daemon) InFlight(id string) int {
	n := 0
	for _, w := range d.workers {
		n += w.InFlight(id)
	}
	return n
}

// Settle waits until no turn of a registration leaving says is in
// progress on this bridge, then flushes the store: what this bridge
// acknowledged for registrations it is handing over is durable before
// the next holder reads their cursors. The caller has stopped owning
// them already, so their turns end at their next POST; ctx bounds the
// wait, and the flush is tried whatever it finds.
func (d *Daemon) Settle(ctx context.Context, leaving func(id string) bool) error {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for d.turnsOf(leaving) {
		select {
		case <-ctx.Done():
			return d.store.Flush(context.WithoutCancel(ctx))
		case <-tick.C:
		}
	}
	return d.store.Flush(ctx)
}

// turnsOf reports whether any worker has a registration leaving says in
// a turn.
func (d *Daemon) turnsOf(leaving func(id string) bool) bool {
	for _, w := range d.workers {
		if w.sched.inTurn(leaving) {
			return true
		}
	}
	return false
}

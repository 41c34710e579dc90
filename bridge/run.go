package bridge

import (
	"context"
	"sync"
	"time"
)

// ShutdownGrace is how long Run lets in-flight POSTs finish after its
// context ends before abandoning them. An abandoned POST was never
// acknowledged, so its message is sent again after the restart.
const ShutdownGrace = 10 * time.Second

// Run delivers continuously until ctx ends: it starts a turn whenever a
// slot is free and a registration is due by time or woken by a new journal
// message, and looks at the due index on every tick for backoffs that
// ended. It returns after every turn has finished or been abandoned.
//
// Turns run on MaxInFlight goroutines that live as long as Run: a turn
// handed to one starts on a stack already grown by the turns before it,
// and a woken registration goes from the tail to a turn without passing
// through this loop (see startNow).
func (w *Worker) Run(ctx context.Context) error {
	turnCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stop := context.AfterFunc(ctx, func() { w.stopping.Store(true) })
	defer stop()

	var wg sync.WaitGroup
	defer wg.Wait()
	for range w.maxInFlight {
		wg.Go(func() { w.turnLoop(ctx, turnCtx) })
	}
	ticker := time.NewTicker(w.tick)
	defer ticker.Stop()
	readDue := true
	for {
		more := w.dispatch(turnCtx, readDue)
		select {
		case <-ctx.Done():
			grace := time.AfterFunc(ShutdownGrace, cancel)
			wg.Wait()
			grace.Stop()
			w.releaseQueued()
			return nil
		case <-ticker.C:
			w.sched.promote()
			readDue = true
		case <-w.sched.kick:
			// Due rows left waiting for a slot are read again as soon as
			// a turn ends, and rows another bridge made due at once;
			// otherwise the tick is soon enough.
			readDue = more || w.dueNow.Swap(false)
		}
	}
}

// turnLoop serves the turns handed to it until run ends. Turns use
// turnCtx, which outlives run by the shutdown grace, so POSTs in flight
// at a stop can finish.
func (w *Worker) turnLoop(run, turnCtx context.Context) {
	for {
		select {
		case <-run.Done():
			return
		case id := <-w.turns:
			if run.Err() != nil {
				w.sched.release(id)
				return
			}
			w.serveWhileWoken(run, turnCtx, id)
		}
	}
}

// serveWhileWoken serves claimed id, and serves it again on this
// goroutine while messages keep waking it during its turns and no other
// registration waits for the slot: a steady live stream goes from turn to
// turn without waking the dispatcher or handing over between goroutines.
// The claim is released when it stops.
func (w *Worker) serveWhileWoken(run, turnCtx context.Context, id string) {
	for {
		// A context of the turn's own: each POST's timeout hangs off it,
		// not off the context every turn shares, whose lock showed in a
		// fan-out's profile.
		ctx, cancel := context.WithCancel(turnCtx)
		p, _, err := w.serve(ctx, id, w.now())
		cancel()
		w.metrics.progress(w.ns, p)
		if err != nil && turnCtx.Err() == nil {
			w.log.Error("delivery turn failed; retrying at the next tick", "registration", id, "error", err)
		}
		if run.Err() != nil {
			w.sched.release(id)
			return
		}
		if p.yielded {
			// The slot goes to a registration that waits for one; id,
			// woken, waits its turn like the others.
			if next, ok := w.sched.handOff(id); ok {
				id = next
				continue
			}
		}
		if !w.sched.again(id, w.maxInFlight) {
			return
		}
	}
}

// DueNow tells the worker that rows of its store became due now without
// a Wake — written through another bridge sharing the store — so it
// reads its due index at once instead of at the next tick.
func (w *Worker) DueNow() {
	w.dueNow.Store(true)
	w.sched.poke()
}

// startNow hands a registration a journal message just woke straight to
// a free turn, so the live path does not wait for the dispatcher; when
// every slot is busy, or the registration is in a turn already, it is
// marked woken and served when a turn ends.
func (w *Worker) startNow(id string) {
	if w.sched.claimOrWake(id, w.maxInFlight) {
		w.turns <- id
	}
}

// releaseQueued drops the claims of turns handed over but never started,
// so nothing stays marked as in a turn after Run.
func (w *Worker) releaseQueued() {
	for {
		select {
		case id := <-w.turns:
			w.sched.release(id)
		default:
			return
		}
	}
}

// dispatch fills the free turn slots without waiting for any turn, and
// reports whether due rows were left waiting for a slot.
func (w *Worker) dispatch(ctx context.Context, readDue bool) (more bool) {
	// A turn that ends while this runs pokes the dispatcher again; one
	// that ends after, only if rows were left waiting.
	w.sched.setWaiting(true)
	defer func() { w.sched.setWaiting(more) }()
	busy := w.sched.busy()
	free := w.sched.budget.free()
	if free <= 0 {
		return readDue
	}
	// Ask for the busy rows too: they are still due in the store while
	// their turn runs, and must not crowd out the rows that are waiting.
	ids, unserved, more, err := w.candidates(ctx, w.now(), free+busy, readDue)
	if err != nil {
		w.log.Error("reading due registrations", "namespace", w.ns, "error", err)
		return true
	}
	if readDue {
		w.metrics.dispatch(w.ns, unserved, more)
	}
	for _, id := range ids {
		if !w.sched.claim(id, w.maxInFlight) {
			if w.sched.budget.full() {
				return true
			}
			continue
		}
		w.turns <- id
	}
	return more
}

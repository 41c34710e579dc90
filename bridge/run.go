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
func (w *Worker) Run(ctx context.Context) error {
	turnCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stop := context.AfterFunc(ctx, func() { w.stopping.Store(true) })
	defer stop()

	var wg sync.WaitGroup
	defer wg.Wait()
	ticker := time.NewTicker(w.tick)
	defer ticker.Stop()
	readDue := true
	for {
		more := w.dispatch(turnCtx, &wg, readDue)
		select {
		case <-ctx.Done():
			grace := time.AfterFunc(ShutdownGrace, cancel)
			wg.Wait()
			grace.Stop()
			return nil
		case <-ticker.C:
			w.sched.promote()
			readDue = true
		case <-w.sched.kick:
			// Due rows left waiting for a slot are read again as soon as
			// a turn ends; otherwise the tick is soon enough.
			readDue = more
		}
	}
}

// dispatch fills the free turn slots without waiting for any turn, and
// reports whether due rows were left waiting for a slot.
func (w *Worker) dispatch(ctx context.Context, wg *sync.WaitGroup, readDue bool) bool {
	busy := w.sched.busy()
	free := w.maxInFlight - busy
	if free <= 0 {
		return readDue
	}
	at := w.now()
	// Ask for the busy rows too: they are still due in the store while
	// their turn runs, and must not crowd out the rows that are waiting.
	ids, unserved, more, err := w.candidates(ctx, at, free+busy, readDue)
	if err != nil {
		w.log.Error("reading due registrations", "namespace", w.ns, "error", err)
		return true
	}
	if readDue {
		w.metrics.dispatch(w.ns, unserved, more)
	}
	for _, id := range ids {
		if free == 0 {
			return true
		}
		if !w.sched.claim(id) {
			continue
		}
		free--
		wg.Go(func() {
			p, _, err := w.serve(ctx, id, at)
			w.metrics.progress(w.ns, p)
			if err != nil && ctx.Err() == nil {
				w.log.Error("delivery turn failed; retrying at the next tick", "registration", id, "error", err)
			}
		})
	}
	return more
}

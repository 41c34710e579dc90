package admin

import (
	"context"
	"sync"
	"time"
)

// boundsTimeout bounds one shared stream-info request: it no longer runs
// on the ctx of the caller that sent it, since others wait for it too.
const boundsTimeout = 5 * time.Second

// freshBounds shares the journal's Bounds requests among concurrent
// creates without ever answering one with bounds older than its arrival.
//
// `start: "new"` promises delivery of every message published after the
// 201 (CONTRACT §2): the last sequence a create is placed by must count
// every message whose publish was acknowledged before the create began.
// A request sent after the caller arrived does; one already in the air
// may not, and neither may a cached value or the tail's last sequence,
// which trails the stream. So a caller joins a request only if it was
// sent after the caller arrived, and one that arrives while an older
// request is in the air waits for it to land and joins the next. At most
// one request is in the air, and it serves every caller that arrived
// while the one before it flew: one stream-info request per round trip
// instead of one per create.
type freshBounds struct {
	journal Journal
	// head, when set, learns every last sequence read, for lag.
	head *head

	mu     sync.Mutex
	sent   uint64        // requests sent so far
	flight *boundsFlight // the request in the air, nil when none
}

// boundsFlight is one request and, once done is closed, its answer.
type boundsFlight struct {
	n           uint64 // the n-th request sent
	done        chan struct{}
	first, last uint64
	err         error
}

// get returns the journal's bounds as read by a request sent after get
// was called.
func (b *freshBounds) get(ctx context.Context) (first, last uint64, err error) {
	b.mu.Lock()
	arrived := b.sent
	for b.flight != nil && b.flight.n <= arrived {
		old := b.flight
		b.mu.Unlock()
		if err := old.wait(ctx); err != nil {
			return 0, 0, err
		}
		b.mu.Lock()
	}
	f := b.flight
	if f == nil {
		b.sent++
		f = &boundsFlight{n: b.sent, done: make(chan struct{})}
		b.flight = f
		go b.fly(ctx, f)
	}
	b.mu.Unlock()
	if err := f.wait(ctx); err != nil {
		return 0, 0, err
	}
	return f.first, f.last, f.err
}

// fly sends f's request. It runs apart from the caller that started it,
// on a ctx that caller's cancellation does not end, because every caller
// that joined waits for the same answer.
func (b *freshBounds) fly(ctx context.Context, f *boundsFlight) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), boundsTimeout)
	defer cancel()
	at := time.Now()
	f.first, f.last, f.err = b.journal.Bounds(ctx)
	if f.err == nil && b.head != nil {
		b.head.seen(f.last, at)
	}
	b.mu.Lock()
	b.flight = nil
	b.mu.Unlock()
	close(f.done)
}

// wait returns once f has landed, or ctx's error first.
func (f *boundsFlight) wait(ctx context.Context) error {
	select {
	case <-f.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

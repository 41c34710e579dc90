package admin

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// gatedJournal answers each Bounds request with the last sequence as it
// was when the request was sent, once the test lets the answer through.
type gatedJournal struct {
	mu   sync.Mutex
	last uint64
	ctxs []context.Context // of every request sent
	gate chan struct{}
}

func (j *gatedJournal) Bounds(ctx context.Context) (uint64, uint64, error) {
	j.mu.Lock()
	last := j.last
	j.ctxs = append(j.ctxs, ctx)
	j.mu.Unlock()
	select {
	case <-j.gate:
		return 1, last, nil
	case <-ctx.Done():
		return 0, 0, ctx.Err()
	}
}

func (j *gatedJournal) SeqAtTime(context.Context, time.Time) (uint64, error) {
	return 0, errors.New("not used")
}

func (j *gatedJournal) publish() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.last++
}

func (j *gatedJournal) requests() []context.Context {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.ctxs)
}

// CONTRACT §2: a message published before a create began is counted by
// its "new" start, even while an older stream-info request is in the air
// that was answered before the message; the creates that arrived during
// that request share one request of their own.
func TestFreshBoundsNeverAnswerWithARequestSentBeforeTheCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := &gatedJournal{last: 41, gate: make(chan struct{})}
		b := &freshBounds{journal: j}
		var wg sync.WaitGroup
		var early uint64
		wg.Go(func() { _, early, _ = b.get(t.Context()) })
		synctest.Wait() // its request is in the air, read at 41

		j.publish() // 42, acknowledged before the next creates begin
		late := make([]uint64, 8)
		for i := range late {
			wg.Go(func() { _, late[i], _ = b.get(t.Context()) })
		}
		synctest.Wait()
		j.gate <- struct{}{} // the first request lands
		synctest.Wait()
		if n := len(j.requests()); n != 2 {
			t.Fatalf("%d requests sent, want 2: the first and one for every create that came during it", n)
		}
		j.gate <- struct{}{}
		wg.Wait()

		if early != 41 {
			t.Errorf("first caller got last %d, want 41", early)
		}
		for i, got := range late {
			if got != 42 {
				t.Errorf("caller %d got last %d, want 42: a message acknowledged before it began", i, got)
			}
		}
	})
}

func TestFreshBoundsCallerGivingUpLeavesTheRequestToOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := &gatedJournal{last: 7, gate: make(chan struct{})}
		b := &freshBounds{journal: j}
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		var errSender error
		var last uint64
		wg.Go(func() { _, _, errSender = b.get(ctx) })
		synctest.Wait()
		wg.Go(func() { _, last, _ = b.get(t.Context()) })
		synctest.Wait()
		cancel() // the caller whose get sent the request leaves
		synctest.Wait()

		if !errors.Is(errSender, context.Canceled) {
			t.Errorf("cancelled caller: %v, want context.Canceled", errSender)
		}
		if err := j.requests()[0].Err(); err != nil {
			t.Errorf("the request ended with the caller that sent it (%v); others wait for its answer", err)
		}
		j.gate <- struct{}{}
		j.gate <- struct{}{}
		wg.Wait()
		if last != 7 {
			t.Errorf("the other caller got last %d, want 7", last)
		}
	})
}

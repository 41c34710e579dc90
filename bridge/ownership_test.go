package bridge_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetstream-bridge/bridge/bridge"
)

// shareSet is a bridge's share as a lease member would report it: a set
// of shards, shard by the registration id's first letter.
type shareSet struct {
	mu      sync.Mutex
	held    map[int]bool
	changes chan struct{}
}

func newShareSet(held ...int) *shareSet {
	s := &shareSet{held: map[int]bool{}, changes: make(chan struct{}, 1)}
	s.set(held...)
	return s
}

func (s *shareSet) Shard(id string) int { return int(id[0] - 'a') }

func (s *shareSet) Owns(shard int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held[shard]
}

func (s *shareSet) Shards() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int
	for sh := range s.held {
		out = append(out, sh)
	}
	slices.Sort(out)
	return out
}

func (s *shareSet) Changes() <-chan struct{} { return s.changes }

func (s *shareSet) set(held ...int) {
	s.mu.Lock()
	s.held = map[int]bool{}
	for _, h := range held {
		s.held[h] = true
	}
	s.mu.Unlock()
	select {
	case s.changes <- struct{}{}:
	default:
	}
}

// A daemon with a share delivers only the registrations of its shards; a
// shard it gains is delivered from its stored cursor at once, without a
// new message, and a shard it loses gets no further POST.
func TestDaemonDeliversItsShareAndTakesOverGainedShards(t *testing.T) {
	e := newEnv(t)
	w := e.worker(bridge.WithTick(50 * time.Millisecond))
	share := newShareSet(0)
	d := bridge.NewDaemon(e.db, e.reader, []*bridge.Worker{w}, bridge.WithOwnership(share))
	mine, theirs := newReceiver(t, nil), newReceiver(t, nil)
	e.register("a-mine", mine.URL, "journal.>")
	e.register("b-theirs", theirs.URL, "journal.>")
	e.publish("journal.x", "1")
	e.publish("journal.x", "2")

	runDaemon(t, d)
	waitUntil(t, "a-mine gets both messages", func() bool { return len(mine.bodies()) == 2 })
	time.Sleep(300 * time.Millisecond) // six ticks: time enough to deliver b-theirs wrongly
	if got := theirs.bodies(); len(got) != 0 {
		t.Fatalf("b-theirs, of a shard this bridge does not hold, got %q", got)
	}

	share.set(1) // shard 1 gained, shard 0 lost
	waitUntil(t, "b-theirs taken over", func() bool { return len(theirs.bodies()) == 2 })
	e.publish("journal.x", "3")
	waitUntil(t, "b-theirs gets the new message", func() bool { return len(theirs.bodies()) == 3 })
	time.Sleep(300 * time.Millisecond)
	if got := mine.bodies(); !slices.Equal(got, []string{"1", "2"}) {
		t.Fatalf("a-mine, of a shard this bridge lost, got %q; want only 1 and 2", got)
	}
	if got := theirs.bodies(); !slices.Equal(got, []string{"1", "2", "3"}) {
		t.Fatalf("b-theirs got %q, want 1, 2, 3 in order", got)
	}
}

// A journal that does not answer when the daemon starts (a cluster
// electing leaders) delays delivery; it does not end the daemon.
func TestDaemonWaitsForTheFirstStreamCheck(t *testing.T) {
	e := newEnv(t)
	w := e.worker(bridge.WithTick(50 * time.Millisecond))
	var calls atomic.Int32
	created := func(ctx context.Context) (time.Time, error) {
		if calls.Add(1) <= 2 {
			return time.Time{}, errors.New("nats: timeout")
		}
		st, err := e.reader.Info(ctx)
		return st.Created, err
	}
	d := bridge.NewDaemon(e.db, e.reader, []*bridge.Worker{w}, bridge.WithStreamIdentity(stream, created, e.db))
	rc := newReceiver(t, nil)
	e.register("r1", rc.URL, "journal.>")
	e.publish("journal.a", "1")
	runDaemon(t, d)
	waitUntil(t, "the message delivered once the stream answered", func() bool { return len(rc.bodies()) == 1 })
	if n := calls.Load(); n < 3 {
		t.Fatalf("the stream was asked %d times; want the two failures retried", n)
	}
}

// lateTail is a journal tail whose first start fails after a while, as a
// consumer create does that a stopped NATS server never answers: only
// once released does it tail, from the stream's head then.
type lateTail struct {
	bridge.Tailer
	release chan struct{}
	failed  atomic.Bool
}

func (l *lateTail) Tail(ctx context.Context, notify func(string, uint64)) error {
	if !l.failed.Load() {
		select {
		case <-ctx.Done():
			return nil
		case <-l.release:
		}
		l.failed.Store(true)
		return errors.New("journal: starting the tail of stream JOURNAL: context deadline exceeded")
	}
	return l.Tailer.Tail(ctx, notify)
}

// A message stored after a shard was taken over and before the journal's
// tail first started is delivered: the tail's start wakes the share's
// registrations, since nothing announced that message. Without it the
// registration waited for the next message on its filter.
func TestAMessageBeforeTheTailsFirstStartIsDelivered(t *testing.T) {
	e := newEnv(t)
	w := e.worker(bridge.WithTick(50 * time.Millisecond))
	tail := &lateTail{Tailer: e.reader, release: make(chan struct{})}
	d := bridge.NewDaemon(e.db, tail, []*bridge.Worker{w}, bridge.WithOwnership(newShareSet(0)))
	rc := newReceiver(t, nil)
	e.register("a-mine", rc.URL, "journal.>")
	e.publish("journal.x", "1")

	runDaemon(t, d)
	waitUntil(t, "the taken-over registration gets the first message", func() bool { return len(rc.bodies()) == 1 })
	waitUntil(t, "its cursor past it", func() bool { return e.get("a-mine").NextSeq == 2 })
	e.publish("journal.x", "2")
	close(tail.release)
	waitUntil(t, "the message stored while no tail ran", func() bool { return len(rc.bodies()) == 2 })
	if got := rc.bodies(); !slices.Equal(got, []string{"1", "2"}) {
		t.Fatalf("received %q, want 1 and 2 in order", got)
	}
}

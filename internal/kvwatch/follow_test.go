package kvwatch

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetstream-bridge/bridge/internal/elected"
	"github.com/jetstream-bridge/bridge/internal/testutil"
)

// slowKV is a real bucket whose new watches wait for open to close: a
// cluster whose meta leader is still being elected.
type slowKV struct {
	jetstream.KeyValue
	open  chan struct{}
	calls *atomic.Int32
}

func (k slowKV) WatchAll(ctx context.Context, opts ...jetstream.WatchOpt) (jetstream.KeyWatcher, error) {
	k.calls.Add(1)
	<-k.open
	return k.KeyValue.WatchAll(ctx, opts...)
}

// seen records what a Follower applied.
type seen struct {
	mu   sync.Mutex
	vals map[string]string
}

func (s *seen) apply(e jetstream.KeyValueEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.vals[e.Key()] = string(e.Value())
}

func (s *seen) value(key string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.vals[key]
}

// After an election the follower keeps applying its old watch's changes
// while the new watch cannot open yet, and once it opens goes on from
// it, every change applied and the last value of each key right.
func TestFollowerKeepsTheOldWatchWhileANewOneOpens(t *testing.T) {
	js := testutil.JetStream(t, testutil.NATS(t, t.TempDir(), -1).ClientURL())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "F"})
	if err != nil {
		t.Fatal(err)
	}
	put := func(k, v string) {
		t.Helper()
		if _, err := kv.Put(ctx, k, []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	put("a", "1")
	s := &seen{vals: map[string]string{}}
	slow := slowKV{KeyValue: kv, open: make(chan struct{}), calls: new(atomic.Int32)}
	ready := make(chan struct{})
	f := &Follower{KV: slow, Conn: js.Conn(), Log: slog.New(slog.DiscardHandler), Apply: s.apply,
		Ready: func() { close(ready) }}
	w, err := kv.WatchAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.Run(runCtx, w) }()
	defer func() { stop(); <-done }()
	<-ready
	if err := js.Conn().Publish(strings.TrimSuffix(elected.Subject, ">")+"KV_F", nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a new watch to be opening", func() bool { return slow.calls.Load() > 0 })
	put("a", "2")
	waitFor(t, "a=2 through the old watch while the new one cannot open", func() bool { return s.value("a") == "2" })
	close(slow.open)
	for i := range 50 {
		put("b", string(rune('0'+i%10)))
	}
	put("a", "3")
	waitFor(t, "a=3 and the last b", func() bool { return s.value("a") == "3" && s.value("b") == "9" })
	waitFor(t, "the old watch stopped for the new one", func() bool {
		select {
		case _, ok := <-w.Updates():
			return !ok
		default:
			return false
		}
	})
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 5 s: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A watch fallen silent while the bucket takes writes (its consumer lost
// with a server whose elections have not come, or never will) is
// replaced: the change the silent watch never handed on is applied.
func TestFollowerReplacesASilentWatch(t *testing.T) {
	js := testutil.JetStream(t, testutil.NATS(t, t.TempDir(), -1).ClientURL())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "S"})
	if err != nil {
		t.Fatal(err)
	}
	s := &seen{vals: map[string]string{}}
	f := &Follower{KV: kv, Conn: js.Conn(), Log: slog.New(slog.DiscardHandler), Apply: s.apply}
	var stops atomic.Int32
	silent := newFake(&stops)
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.Run(runCtx, silent) }()
	defer func() { stop(); <-done }()
	if _, err := kv.Put(ctx, "a", []byte("1")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a=1, which the silent watch never handed on", func() bool { return s.value("a") == "1" })
	waitStops(t, &stops, 1, "the silent watch")
}

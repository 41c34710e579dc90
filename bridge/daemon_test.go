package bridge_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jetstream-bridge/bridge/bridge"
)

// gatedTail holds the journal's tail back until open is closed, to stage
// what happens before the tail starts.
type gatedTail struct {
	bridge.Tailer
	open chan struct{}
}

func (g gatedTail) Tail(ctx context.Context, notify func(string, uint64)) error {
	select {
	case <-g.open:
	case <-ctx.Done():
		return nil
	}
	return g.Tailer.Tail(ctx, notify)
}

// A registration that went idle before the tail started, with a message
// stored in between, gets that message when the tail starts — not when
// the next message on its filter happens to arrive — and later messages
// reach it as they land.
func TestDaemonDeliversWhatLandedBeforeTheTailStarted(t *testing.T) {
	e := newEnv(t)
	w := e.worker(bridge.WithTick(50 * time.Millisecond))
	tail := gatedTail{Tailer: e.reader, open: make(chan struct{})}
	d := bridge.NewDaemon(e.db, tail, []*bridge.Worker{w})
	rc := newReceiver(t, nil)
	e.register("r1", rc.URL, "journal.>")

	runDaemon(t, d)

	// The new registration is due at once, finds the journal empty and
	// goes idle; only then is a message stored, while no tail runs.
	waitUntil(t, "r1 idle", func() bool { return e.get("r1").NextAttemptAt.IsZero() })
	e.publish("journal.a", "before-tail")
	time.Sleep(200 * time.Millisecond)
	if got := rc.bodies(); len(got) != 0 {
		t.Fatalf("delivered %q with no tail and no due time: the staging is wrong", got)
	}

	close(tail.open)
	waitUntil(t, "the message stored before the tail", func() bool { return len(rc.bodies()) == 1 })
	e.publish("journal.a", "after-tail")
	waitUntil(t, "the message stored after the tail started", func() bool { return len(rc.bodies()) == 2 })
	if got := rc.bodies(); !slices.Equal(got, []string{"before-tail", "after-tail"}) {
		t.Fatalf("receiver got %q, want before-tail then after-tail", got)
	}
}

// runDaemon runs d until the test ends, and fails the test if Run does.
func runDaemon(t *testing.T, d *bridge.Daemon) {
	t.Helper()
	runUntilEnd(t, "daemon", d.Run)
}

// runUntilEnd runs run until the test ends, and fails the test if run
// returns an error.
func runUntilEnd(t *testing.T, what string, run func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("%s: %v", what, err)
		}
	})
}

package bridge_test

import (
	"slices"
	"testing"
	"time"

	"github.com/jetstream-bridge/bridge/bridge"
)

// A registration another bridge created in the shared store, with a
// wildcard filter this daemon never saw, is woken by every message once
// this daemon holds its shard: it gets the messages published after its
// first, empty turn.
func TestDaemonWakesRegistrationsCreatedThroughAnotherBridge(t *testing.T) {
	e := newEnv(t)
	w := e.worker(bridge.WithTick(50 * time.Millisecond))
	d := bridge.NewDaemon(e.db, e.reader, []*bridge.Worker{w}, bridge.WithOwnership(newShareSet(0)))
	runDaemon(t, d)

	rc := newReceiver(t, nil)
	// Straight into the store, as through another bridge: this daemon
	// hears of it only by its due index.
	e.register("a-elsewhere", rc.URL, "journal.>")
	time.Sleep(300 * time.Millisecond) // six ticks: its first turn, with nothing to deliver, is over
	e.publish("journal.x", "1")
	e.publish("journal.x", "2")
	waitUntil(t, "a-elsewhere to get both messages", func() bool { return len(rc.bodies()) == 2 })
	if got := rc.bodies(); !slices.Equal(got, []string{"1", "2"}) {
		t.Fatalf("a-elsewhere got %q, want 1 and 2 in order", got)
	}
}

package bridge_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/jetstream-bridge/bridge/bridge"
)

// runWorker runs w until the test ends. Its tick is an hour, so whatever
// it serves while the test looks was started by a wake or a turn's end.
func runWorker(t *testing.T, w *bridge.Worker) {
	t.Helper()
	runUntilEnd(t, "worker", w.Run)
}

// delivered reports whether rc has received n POSTs.
func delivered(rc *receiver, n int) func() bool {
	return func() bool { return len(rc.deliveries()) >= n }
}

// holdingFirst is a receiver that answers its first POST only once hold
// is closed, and every other at once.
func holdingFirst(t *testing.T) (*receiver, chan struct{}) {
	hold := make(chan struct{})
	rc := newReceiver(t, func(n int, w http.ResponseWriter) {
		if n == 0 {
			<-hold
		}
		w.WriteHeader(http.StatusNoContent)
	})
	return rc, hold
}

func TestWakeDuringATurnIsServedWhenTheTurnEnds(t *testing.T) {
	e := newEnv(t)
	rc, hold := holdingFirst(t)
	e.register("r", rc.URL, "journal.>")
	e.publish("journal.a", "first")
	w := e.worker(bridge.WithTick(time.Hour))
	runWorker(t, w)
	waitUntil(t, "the due registration's first message", delivered(rc, 1))

	// The turn has read its page and waits on the receiver: the next
	// message is news to a registration that is in a turn.
	e.publish("journal.a", "second")
	w.Wake("r")
	close(hold)
	waitUntil(t, "a message that woke the registration during its turn", delivered(rc, 2))
	if got := rc.bodies(); got[1] != "second" {
		t.Fatalf("bodies = %q, want the second message after the first", got)
	}
}

func TestDueRowsWaitingForASlotAreServedWhenOneFrees(t *testing.T) {
	e := newEnv(t)
	rc, hold := holdingFirst(t)
	e.register("a", rc.URL, "journal.>")
	e.register("b", rc.URL, "journal.>")
	e.publish("journal.a", "m")
	w := e.worker(bridge.WithTick(time.Hour), bridge.WithMaxInFlight(1))
	runWorker(t, w)
	waitUntil(t, "the first registration's POST", delivered(rc, 1))
	close(hold)
	waitUntil(t, "the registration that waited for the only slot", delivered(rc, 2))
}

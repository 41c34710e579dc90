package bridge_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/jetstream-bridge/bridge/bridge"
)

// runWorker runs w until the test ends. Its tick is an hour, so whatever
// it serves while the test looks was started by a wake or a turn's end.
func runWorker(t *testing.T, w *bridge.Worker) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// waitDeliveries waits up to 10 s for rc to have received n POSTs.
func waitDeliveries(t *testing.T, rc *receiver, n int, what string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if len(rc.deliveries()) >= n {
			return
		}
	}
	t.Fatalf("%s: %d POSTs arrived, want %d", what, len(rc.deliveries()), n)
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
	waitDeliveries(t, rc, 1, "the due registration's first message")

	// The turn has read its page and waits on the receiver: the next
	// message is news to a registration that is in a turn.
	e.publish("journal.a", "second")
	w.Wake("r")
	close(hold)
	waitDeliveries(t, rc, 2, "a message that woke the registration during its turn")
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
	waitDeliveries(t, rc, 1, "the first registration's POST")
	close(hold)
	waitDeliveries(t, rc, 2, "the registration that waited for the only slot")
}

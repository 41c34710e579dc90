package bridge_test

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jetstream-bridge/bridge/bridge"
	"github.com/jetstream-bridge/bridge/cursor"
)

// With more registrations woken than slots, a turn on a slow receiver
// gives its slot to a waiting one once it has had its quantum: the third
// registration's first delivery comes before the first two have drained
// their backlog, and every registration still gets its messages in order.
func TestTurnsOfSlowReceiversShareTheSlots(t *testing.T) {
	e := newEnv(t)
	w := e.worker(bridge.WithMaxInFlight(2), bridge.WithTick(50*time.Millisecond))
	d := bridge.NewDaemon(e.db, e.reader, []*bridge.Worker{w})
	var mu sync.Mutex
	var order []string // the registration of each delivery, in arrival order
	slow := func(name string) *receiver {
		return newReceiver(t, func(_ int, rw http.ResponseWriter) {
			time.Sleep(20 * time.Millisecond)
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
			rw.WriteHeader(http.StatusNoContent)
		})
	}
	rcs := map[string]*receiver{"a": slow("a"), "b": slow("b"), "c": slow("c")}
	for name, rc := range rcs {
		e.register(name, rc.URL, "journal.>")
	}
	// The backlog is stored while the three are idle and nothing follows
	// the stream: the start wakes all three at once, two get the slots
	// and one waits, each with a whole page to drain.
	const n = 30 // 600 ms of POSTs each: six quanta
	var want []string
	for i := range n {
		want = append(want, strconv.Itoa(i))
		e.publish("journal.x", strconv.Itoa(i))
	}
	ctx := context.Background()
	for name := range rcs {
		if err := e.db.Advance(ctx, name, cursor.Progress{NextSeq: 1, Idle: true}); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.db.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	runDaemon(t, d)
	waitUntil(t, "every registration drained", func() bool {
		for _, rc := range rcs {
			if len(rc.bodies()) < n {
				return false
			}
		}
		return true
	})
	for name, rc := range rcs {
		if got := rc.bodies(); !slices.Equal(got, want) {
			t.Fatalf("%s got %v, want 0..%d in order", name, got, n-1)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	// The registration served last started before either other finished.
	last := order[len(order)-1]
	firstOfLast := slices.Index(order, last)
	for name := range rcs {
		if name == last {
			continue
		}
		if done := lastIndex(order, name); firstOfLast > done {
			t.Fatalf("%s was first served after %s had drained all %d messages: slots were not shared (order %v)", last, name, n, order)
		}
	}
}

func lastIndex(s []string, v string) int {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == v {
			return i
		}
	}
	return -1
}

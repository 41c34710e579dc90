package kvstore

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetstream-bridge/bridge/cursor"
	"github.com/jetstream-bridge/bridge/cursor/cursortest"
)

// TestConformance holds this store to what every cursor.Store does: each
// case on buckets of its own on one server, a reopened or second store on
// the same buckets standing for a bridge that takes over.
func TestConformance(t *testing.T) {
	url := startNATS(t)
	var n atomic.Int64
	cursortest.Run(t, cursortest.Opener{
		Fresh: func(t *testing.T) func(cursortest.Options) cursor.Store {
			prefix := WithPrefix(fmt.Sprintf("C%d", n.Add(1)))
			return func(o cursortest.Options) cursor.Store {
				return openKV(t, url, prefix, WithClock(o.Now), WithFlushInterval(o.FlushInterval))
			}
		},
		Crash:  func(_ *testing.T, s cursor.Store) { s.(*Store).closeWithoutFlush() },
		Shared: true,
		Check: func(t testing.TB, s cursor.Store) {
			t.Helper()
			var err error
			deadline := time.Now().Add(10 * time.Second)
			for err = indexMatches(t, s.(*Store)); err != nil && time.Now().Before(deadline); err = indexMatches(t, s.(*Store)) {
				time.Sleep(5 * time.Millisecond)
			}
			if err != nil {
				t.Fatalf("the index of %s: %v", s.(*Store).regs.Bucket(), err)
			}
		},
	})
}

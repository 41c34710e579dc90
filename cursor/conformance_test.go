package cursor_test

import (
	"path/filepath"
	"testing"

	"github.com/jetstream-bridge/bridge/cursor"
	"github.com/jetstream-bridge/bridge/cursor/cursortest"
)

// TestConformance holds the bolt store to what every cursor.Store does:
// each case on a file of its own, reopened where the case takes the store
// down.
func TestConformance(t *testing.T) {
	cursortest.Run(t, cursortest.Opener{
		Fresh: func(t *testing.T) func(cursortest.Options) cursor.Store {
			path := filepath.Join(t.TempDir(), "bridge.db")
			return func(o cursortest.Options) cursor.Store {
				return reopen(t, path, cursor.WithClock(o.Now), cursor.WithFlushInterval(o.FlushInterval))
			}
		},
		Crash: func(t *testing.T, s cursor.Store) {
			if err := s.(*cursor.DB).CloseWithoutFlush(); err != nil {
				t.Fatalf("close without flush: %v", err)
			}
		},
		Check: func(t testing.TB, s cursor.Store) { check(t, s.(*cursor.DB)) },
	})
}

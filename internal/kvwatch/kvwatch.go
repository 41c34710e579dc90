// Package kvwatch stops key-value watches safely.
package kvwatch

import (
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Stop stops w and drains it until it closes or stays quiet for 50 ms: a
// delivery blocked on the full channel when the watch stops would never
// return, and nats.go does not always close the channel after Stop.
func Stop(w jetstream.KeyWatcher) {
	_ = w.Stop()
	for {
		select {
		case _, ok := <-w.Updates():
			if !ok {
				return
			}
		case <-time.After(50 * time.Millisecond):
			return
		}
	}
}

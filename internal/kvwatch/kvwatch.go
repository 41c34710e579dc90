// Package kvwatch keeps key-value watches going through a cluster that
// loses a server and elects new leaders.
package kvwatch

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Stop stops w and drains it until it closes or stays quiet for 50 ms: a
// delivery blocked on the full channel when the watch stops would never
// return, and nats.go does not always close the channel after Stop.
//
// Stopping deletes the watch's consumer and waits for the answer, which
// a cluster electing a leader may not give for nats.go's whole timeout
// (5 s): a caller that must go on meanwhile stops in the background.
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

// refusedPause is how soon an attempt follows one refused, when no other
// is waiting: a cluster without a leader refuses at once, for seconds.
const refusedPause = 250 * time.Millisecond

// Open opens a watch with open, trying until one opens or ctx ends. A
// request sent while the cluster elects a leader goes unanswered, and
// nats.go waits out its whole timeout (5 s) for it where one sent a
// moment later is answered at once; so another attempt starts beside
// those waiting each time wait passes without an answer. The first watch
// opened is returned, and any opened after it, or after ctx ended, is
// stopped.
//
// open's context must outlive the watch (nats.go ends a watch with the
// context it was opened with): end ctx to give up.
func Open(ctx context.Context, open func() (jetstream.KeyWatcher, error), wait time.Duration) (jetstream.KeyWatcher, error) {
	results := make(chan opened)
	waiting := 0
	launch := func() {
		waiting++
		go func() {
			w, err := open()
			results <- opened{w, err}
		}()
	}
	launch()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	defer func() { go stopLate(results, waiting) }()
	for {
		select {
		case r := <-results:
			waiting--
			if r.err == nil {
				return r.w, nil
			}
			if waiting == 0 {
				timer.Reset(refusedPause)
			}
		case <-timer.C:
			launch()
			timer.Reset(wait)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// opened is one attempt's answer.
type opened struct {
	w   jetstream.KeyWatcher
	err error
}

// stopLate stops the watches that the n attempts still running open.
func stopLate(results <-chan opened, n int) {
	for range n {
		if r := <-results; r.err == nil {
			Stop(r.w)
		}
	}
}

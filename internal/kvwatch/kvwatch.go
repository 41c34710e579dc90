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

// Open opens a watch with open, and opens it again, at once beside the
// attempts still waiting, each time wait passes without an answer, at
// most attempts times in all: a request sent while the cluster elects a
// leader goes unanswered, and nats.go waits out its whole timeout (5 s)
// for it where a request sent a moment later is answered at once. The
// first watch opened is returned and any opened after it is stopped; the
// error is the last attempt's when none opens.
//
// open's context must outlive the watch: nats.go ends a watch with the
// context it was opened with, so no deadline can bound the attempts.
func Open(open func() (jetstream.KeyWatcher, error), wait time.Duration, attempts int) (jetstream.KeyWatcher, error) {
	results := make(chan opened, attempts)
	started, answered := 0, 0
	launch := func() {
		started++
		go func() {
			w, err := open()
			results <- opened{w, err}
		}()
	}
	launch()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	var last error
	for {
		select {
		case r := <-results:
			answered++
			if r.err == nil {
				go stopLate(results, started-answered)
				return r.w, nil
			}
			last = r.err
			if answered == attempts {
				return nil, last
			}
			if answered == started {
				launch()
				timer.Reset(wait)
			}
		case <-timer.C:
			if started < attempts {
				launch()
				timer.Reset(wait)
			}
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

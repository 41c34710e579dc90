package kvwatch

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// fakeWatcher counts its stops.
type fakeWatcher struct {
	updates chan jetstream.KeyValueEntry
	stops   *atomic.Int32
}

func (f *fakeWatcher) Updates() <-chan jetstream.KeyValueEntry { return f.updates }
func (f *fakeWatcher) Stop() error {
	f.stops.Add(1)
	close(f.updates)
	return nil
}

// An attempt that hangs is not waited for: the next, opened after wait,
// is returned, and the hung one, when it opens at last, is stopped.
func TestOpenDoesNotWaitForAnUnansweredAttempt(t *testing.T) {
	var stops, calls atomic.Int32
	release := make(chan struct{})
	second := &fakeWatcher{updates: make(chan jetstream.KeyValueEntry), stops: &stops}
	open := func() (jetstream.KeyWatcher, error) {
		if calls.Add(1) == 1 {
			<-release // the request lost in an election
			return &fakeWatcher{updates: make(chan jetstream.KeyValueEntry), stops: &stops}, nil
		}
		return second, nil
	}
	w, err := Open(open, 20*time.Millisecond, 5)
	if err != nil || w != second {
		t.Fatalf("Open: %v, %v; want the second attempt's watch", w, err)
	}
	close(release)
	deadline := time.Now().Add(5 * time.Second)
	for stops.Load() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the late watch of the first attempt was not stopped")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Attempts that fail are tried again, up to the bound, and the last
// error is returned.
func TestOpenGivesUpAfterItsAttempts(t *testing.T) {
	var calls atomic.Int32
	open := func() (jetstream.KeyWatcher, error) {
		return nil, errors.New("no responders: attempt " + string(rune('0'+calls.Add(1))))
	}
	_, err := Open(open, time.Second, 3)
	if err == nil || err.Error() != "no responders: attempt 3" || calls.Load() != 3 {
		t.Fatalf("Open: %v after %d attempts; want the third attempt's error", err, calls.Load())
	}
}

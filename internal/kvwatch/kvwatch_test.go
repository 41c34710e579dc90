package kvwatch

import (
	"context"
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

func newFake(stops *atomic.Int32) *fakeWatcher {
	return &fakeWatcher{updates: make(chan jetstream.KeyValueEntry), stops: stops}
}

func (f *fakeWatcher) Updates() <-chan jetstream.KeyValueEntry { return f.updates }
func (f *fakeWatcher) Stop() error {
	f.stops.Add(1)
	close(f.updates)
	return nil
}

// waitStops fails the test unless stops reaches want within 5 s.
func waitStops(t *testing.T, stops *atomic.Int32, want int32, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for stops.Load() != want {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d watches stopped, want %d", what, stops.Load(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// An attempt that hangs is not waited for: the next, opened after wait,
// is returned, and the hung one, when it opens at last, is stopped.
func TestOpenDoesNotWaitForAnUnansweredAttempt(t *testing.T) {
	var stops, calls atomic.Int32
	release := make(chan struct{})
	second := newFake(&stops)
	open := func() (jetstream.KeyWatcher, error) {
		if calls.Add(1) == 1 {
			<-release // the request lost in an election
			return newFake(&stops), nil
		}
		return second, nil
	}
	w, err := Open(context.Background(), open, 20*time.Millisecond)
	if err != nil || w != second {
		t.Fatalf("Open: %v, %v; want the second attempt's watch", w, err)
	}
	close(release)
	waitStops(t, &stops, 1, "the late watch of the first attempt")
}

// Attempts refused are tried again until one opens.
func TestOpenTriesAgainAfterRefusals(t *testing.T) {
	var stops, calls atomic.Int32
	want := newFake(&stops)
	open := func() (jetstream.KeyWatcher, error) {
		if calls.Add(1) < 4 {
			return nil, errors.New("no responders")
		}
		return want, nil
	}
	w, err := Open(context.Background(), open, time.Hour)
	if err != nil || w != want || calls.Load() != 4 {
		t.Fatalf("Open: %v, %v after %d attempts; want the fourth attempt's watch", w, err, calls.Load())
	}
}

// Ending ctx gives up, and a watch opened after that is stopped.
func TestOpenGivesUpWhenCtxEnds(t *testing.T) {
	var stops atomic.Int32
	release := make(chan struct{})
	open := func() (jetstream.KeyWatcher, error) {
		<-release
		return newFake(&stops), nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if _, err := Open(ctx, open, time.Hour); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Open: %v, want the context's error", err)
	}
	close(release)
	waitStops(t, &stops, 1, "the watch opened after giving up")
}

package bridge_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jetstream-bridge/bridge/bridge"
	"github.com/jetstream-bridge/bridge/cursor"
)

func (e *env) registerLimited(id, url, subject string, rl cursor.RateLimit) {
	e.t.Helper()
	_, _, err := e.db.Create(context.Background(), cursor.Registration{
		Config:  cursor.Config{ID: id, Namespace: "outbox", Subject: subject, URL: url, RateLimit: &rl},
		NextSeq: 1,
	}, nil)
	if err != nil {
		e.t.Fatal(err)
	}
}

// A registration waiting for its rate limit gives its slot up: with one
// slot, another registration's message goes out between two POSTs of a
// slowly limited one, and the limited one is not failing meanwhile.
func TestRateLimitedRegistrationDoesNotHoldItsSlot(t *testing.T) {
	e := newEnv(t)
	rc := newReceiver(t, nil)
	const perSecond = 0.25 // a POST every 4 s
	e.registerLimited("slow", rc.URL, "journal.slow.>", cursor.RateLimit{PerSecond: perSecond, Burst: 1})
	e.register("fast", rc.URL, "journal.fast.>")
	e.publish("journal.slow.a", "slow-1")
	e.publish("journal.slow.a", "slow-2")
	w := e.worker(bridge.WithTick(time.Hour), bridge.WithMaxInFlight(1))
	runWorker(t, w)
	waitUntil(t, "the limited registration's first message", delivered(rc, 1))
	start := time.Now()

	e.publish("journal.fast.a", "fast-1")
	w.Wake("fast")
	waitUntil(t, "the other registration's message and the limited one's second", delivered(rc, 3))
	if got := rc.bodies(); !slices.Equal(got, []string{"slow-1", "fast-1", "slow-2"}) {
		t.Fatalf("bodies %q: the other registration waited for the limited one's token", got)
	}
	if waited, least := time.Since(start), time.Duration(float64(time.Second)/perSecond)*3/4; waited < least {
		t.Errorf("second POST %v after the first, want at least %v at %v/s", waited, least, perSecond)
	}
	if r := e.get("slow"); r.Attempts != 0 || r.LastError != "" {
		t.Errorf("limited registration: attempts %d, lastError %q; waiting is not failing", r.Attempts, r.LastError)
	}
}

// Every POST of a registration counts, retries included, and a burst lets
// that many go at once.
func TestRateLimitBurst(t *testing.T) {
	e := newEnv(t)
	rc := newReceiver(t, nil)
	e.registerLimited("r", rc.URL, "journal.>", cursor.RateLimit{PerSecond: 0.2, Burst: 3})
	for _, b := range []string{"1", "2", "3", "4"} {
		e.publish("journal.a", b)
	}
	runWorker(t, e.worker(bridge.WithTick(time.Hour)))
	waitUntil(t, "the burst", delivered(rc, 3))
	time.Sleep(time.Second)
	if n := len(rc.deliveries()); n != 3 {
		t.Errorf("%d POSTs within a second of a burst of 3 at 0.2/s, want 3", n)
	}
	// The receiver counts a POST before the worker moves the cursor.
	waitUntil(t, "the cursor past the burst", func() bool { return e.get("r").NextSeq >= 4 })
	if r := e.get("r"); r.NextSeq != 4 || r.Attempts != 0 {
		t.Errorf("cursor %d, attempts %d; want 4 and 0 while the fourth waits", r.NextSeq, r.Attempts)
	}
}

// A registration a message woke from idle and whose token is not there
// yet is left due, not idle: a bridge stopped before its token came
// delivers the message after the restart without a new message to wake
// it.
func TestRateLimitedRegistrationSurvivesAStopWhileItWaits(t *testing.T) {
	e := newEnv(t)
	rc := newReceiver(t, nil)
	e.registerLimited("r", rc.URL, "journal.>", cursor.RateLimit{PerSecond: 0.1, Burst: 1})
	e.publish("journal.a", "first")
	ctx, cancel := context.WithCancel(context.Background())
	w := e.worker(bridge.WithTick(time.Hour))
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	waitUntil(t, "the first message", delivered(rc, 1))
	waitUntil(t, "the registration to go idle", func() bool { return e.get("r").NextAttemptAt.IsZero() })

	e.publish("journal.a", "second")
	w.Wake("r")
	waitUntil(t, "the woken registration to stay due while it waits", func() bool { return !e.get("r").NextAttemptAt.IsZero() })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// What a clean stop does after the worker's end.
	if err := e.db.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(rc.deliveries()); n != 1 {
		t.Fatalf("%d POSTs before the stop, want 1: the second waits for its token", n)
	}

	runWorker(t, e.worker(bridge.WithTick(time.Hour)))
	waitUntil(t, "the second message after the restart", delivered(rc, 2))
	if got := rc.bodies(); !slices.Equal(got, []string{"first", "second"}) {
		t.Errorf("bodies %q", got)
	}
}

package bridge_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jetstream-bridge/bridge/bridge"
	"github.com/jetstream-bridge/bridge/cursor"
	"github.com/jetstream-bridge/bridge/journal"
)

// countingJournal counts the reads of each filter.
type countingJournal struct {
	bridge.Journal
	mu    sync.Mutex
	reads map[string]int
}

func (c *countingJournal) Read(ctx context.Context, filter string, from uint64, max int) (journal.Page, error) {
	c.mu.Lock()
	c.reads[filter]++
	c.mu.Unlock()
	return c.Journal.Read(ctx, filter, from, max)
}

func (c *countingJournal) count(filter string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reads[filter]
}

// startDaemon runs a daemon with the stream identity check over e until
// the returned stop is called (or the test ends).
func startDaemon(t *testing.T, e *env, store cursor.Store, j bridge.Journal) (stop func()) {
	t.Helper()
	w, err := bridge.New(store, j, e.sender, passThrough{}, bridge.WithTick(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	created := func(ctx context.Context) (time.Time, error) {
		st, err := e.reader.Info(ctx)
		return st.Created, err
	}
	d := bridge.NewDaemon(store, e.reader, []*bridge.Worker{w}, bridge.WithStreamIdentity(stream, created, e.db))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("daemon: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// After a clean stop the next start wakes the registrations of the
// messages published meanwhile, and leaves the other idle ones alone: a
// restart behind many quiet registrations costs what the new messages
// need, not a turn of each.
func TestRestartAfterACleanStopWakesOnlyWhomNewMessagesConcern(t *testing.T) {
	e := newEnv(t)
	rc := newReceiver(t, nil)
	const n = 40
	for i := range n {
		e.register(fmt.Sprintf("r%d", i), rc.URL, fmt.Sprintf("journal.quiet.%d", i))
	}
	stop := startDaemon(t, e, e.db, e.reader)
	waitUntil(t, "every registration idle", func() bool {
		for i := range n {
			if !e.get(fmt.Sprintf("r%d", i)).NextAttemptAt.IsZero() {
				return false
			}
		}
		return true
	})
	// Only the tail (or the wake at its start) reaches an idle
	// registration: once this arrives, the daemon follows the stream.
	e.publish("journal.quiet.3", "first")
	waitUntil(t, "a message to an idle registration", func() bool { return len(rc.bodies()) == 1 })
	time.Sleep(200 * time.Millisecond) // the wake at the tail's start ends
	stop()

	// Published while no bridge runs, on two of the forty subjects, and
	// on one no registration reads.
	e.publish("journal.quiet.7", "while-stopped-7")
	e.publish("journal.other", "nobody's")
	e.publish("journal.quiet.30", "while-stopped-30")

	j := &countingJournal{Journal: e.reader, reads: map[string]int{}}
	startDaemon(t, e, e.db, j)
	waitUntil(t, "the messages published while stopped", func() bool { return len(rc.bodies()) == 3 })
	time.Sleep(300 * time.Millisecond) // room for turns nobody should take
	for i := range n {
		f := fmt.Sprintf("journal.quiet.%d", i)
		want := 0
		if i == 7 || i == 30 {
			want = 1
		}
		if got := j.count(f); got < want || (want == 0 && got != 0) {
			t.Errorf("%s read %d times after the restart; want %d", f, got, want)
		}
	}
}

// Without a clean stop's mark (a crash, or a store of an older bridge),
// the start reads the messages from the lowest idle cursor on and wakes
// their registrations; a store that cannot tell that cursor has every
// idle registration behind the head woken: slower, never a loss.
func TestRestartWithoutAMark(t *testing.T) {
	for _, c := range []struct {
		name  string
		store func(e *env) cursor.Store
		wakeA bool
	}{
		{"from the lowest idle cursor", func(e *env) cursor.Store { return e.db }, false},
		{"every idle one behind", func(e *env) cursor.Store { return struct{ cursor.Store }{e.db} }, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			rc := newReceiver(t, nil)
			e.register("a", rc.URL, "journal.a")
			e.register("b", rc.URL, "journal.b")
			stop := startDaemon(t, e, e.db, e.reader)
			waitUntil(t, "both idle", func() bool {
				return e.get("a").NextAttemptAt.IsZero() && e.get("b").NextAttemptAt.IsZero()
			})
			stop()
			if err := e.db.PutMeta(context.Background(), "followed/"+stream, nil); err != nil {
				t.Fatal(err)
			}
			e.publish("journal.b", "after")
			j := &countingJournal{Journal: e.reader, reads: map[string]int{}}
			startDaemon(t, e, c.store(e), j)
			waitUntil(t, "the message", func() bool { return len(rc.bodies()) == 1 })
			if c.wakeA {
				waitUntil(t, "a's turn too", func() bool { return j.count("journal.a") > 0 })
				return
			}
			time.Sleep(300 * time.Millisecond) // room for a turn nobody should take
			if n := j.count("journal.a"); n != 0 {
				t.Fatalf("a, with no message since its cursor, was read %d times", n)
			}
		})
	}
}

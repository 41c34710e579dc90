package bridge

import (
	"slices"
	"sync"
	"testing"

	"github.com/jetstream-bridge/bridge/events"
)

type recordedEvents struct {
	mu  sync.Mutex
	got []string
}

func (r *recordedEvents) Publish(e events.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, string(e.Kind)+" "+e.Registration)
}

func newAnnouncer(failingAfter int) (*announcer, *recordedEvents) {
	rec := &recordedEvents{}
	d := &Daemon{}
	WithEvents(rec, failingAfter)(d)
	return d.events, rec
}

func TestFailingIsAnnouncedOncePerStreakAndRecoveredAfterIt(t *testing.T) {
	a, rec := newAnnouncer(3)
	for n := uint32(1); n <= 5; n++ {
		a.failed("r", 7, n)
	}
	// An unpark cleared the row's count before the 2xx: the announcer
	// remembers the streak.
	a.acknowledged("r", 7, 0)
	a.acknowledged("r", 8, 0)
	// A second streak is announced again.
	for n := uint32(1); n <= 3; n++ {
		a.failed("r", 9, n)
	}
	a.acknowledged("r", 9, 3)
	want := []string{"registration.failing r", "registration.recovered r", "registration.failing r", "registration.recovered r"}
	if !slices.Equal(rec.got, want) {
		t.Fatalf("events = %q, want %q", rec.got, want)
	}
}

func TestARestartedBridgeAnnouncesRecoveredFromTheRowsCount(t *testing.T) {
	a, rec := newAnnouncer(3)
	a.acknowledged("short", 1, 2) // a streak below failing-after
	a.acknowledged("long", 1, 4)  // announced failing by the bridge before
	if want := []string{"registration.recovered long"}; !slices.Equal(rec.got, want) {
		t.Fatalf("events = %q, want %q", rec.got, want)
	}
}

func TestFailingAfterZeroAnnouncesNeither(t *testing.T) {
	a, rec := newAnnouncer(0)
	for n := uint32(1); n <= 5; n++ {
		a.failed("r", 1, n)
	}
	a.acknowledged("r", 1, 5)
	if len(rec.got) != 0 {
		t.Fatalf("events = %q, want none", rec.got)
	}
}

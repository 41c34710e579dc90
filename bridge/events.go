package bridge

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/jetstream-bridge/bridge/events"
)

// Events is told of what an operator must react to (CONTRACT §8);
// events.Publisher is one. Publish is called on the delivery path and
// must return at once, whatever becomes of the event.
type Events interface {
	Publish(events.Event)
}

// WithEvents publishes the operational events of every worker and of the
// stream identity check to e. A registration is announced failing at its
// failingAfter-th consecutive failure; 0 announces neither failing nor
// recovered.
func WithEvents(e Events, failingAfter int) DaemonOption {
	return func(d *Daemon) {
		if e == nil {
			return
		}
		d.events = &announcer{events: e, failingAfter: uint32(max(failingAfter, 0)), failing: map[string]struct{}{}}
	}
}

// announcer is what the workers of a daemon share to publish events. It
// remembers which registrations it announced failing, so the first 2xx
// after an unpark (which clears the row's failure count) still announces
// the recovery; a row whose count reached failingAfter tells the same to a
// bridge that restarted or took the registration over.
type announcer struct {
	events       Events
	failingAfter uint32

	mu      sync.Mutex
	failing map[string]struct{}
	// announced is len(failing), read without the lock on every turn's
	// first 2xx.
	announced atomic.Int64
}

func (a *announcer) publish(kind events.Kind, id string, seq uint64) {
	if a == nil {
		return
	}
	a.events.Publish(events.Event{Kind: kind, At: time.Now(), Registration: id, Seq: seq})
}

// failed announces failing when failures, the consecutive count with this
// one, reaches failingAfter: once per streak, since a streak counts up one
// failure at a time and anything ending it resets the count.
func (a *announcer) failed(id string, seq uint64, failures uint32) {
	if a == nil || a.failingAfter == 0 || failures != a.failingAfter {
		return
	}
	a.mu.Lock()
	a.failing[id] = struct{}{}
	a.announced.Store(int64(len(a.failing)))
	a.mu.Unlock()
	a.publish(events.Failing, id, seq)
}

// acknowledged announces recovered for the first 2xx after a failing;
// failures is the row's consecutive count before it.
func (a *announcer) acknowledged(id string, seq uint64, failures uint32) {
	if a == nil || a.failingAfter == 0 || (failures < a.failingAfter && a.announced.Load() == 0) {
		return
	}
	a.mu.Lock()
	_, announced := a.failing[id]
	delete(a.failing, id)
	a.announced.Store(int64(len(a.failing)))
	a.mu.Unlock()
	if announced || failures >= a.failingAfter {
		a.publish(events.Recovered, id, seq)
	}
}

// skipped announces messages the stream removed before id delivered them.
func (a *announcer) skipped(id string, first, last uint64) {
	if a == nil {
		return
	}
	a.events.Publish(events.Event{Kind: events.Skipped, At: time.Now(), Journal: &events.Journal{
		FirstSeq: first, LastSeq: last, Registrations: []string{id},
		Reason: "the stream removed these messages (limits or purge) before they were delivered; the cursor moved past them",
	}})
}

// recreated announces the stream re-created and the registrations parked
// for it.
func (a *announcer) recreated(ids []string, count int, reason string) {
	if a == nil {
		return
	}
	a.events.Publish(events.Event{Kind: events.Recreated, At: time.Now(), Journal: &events.Journal{
		Registrations: ids, Count: count, Reason: reason,
	}})
}

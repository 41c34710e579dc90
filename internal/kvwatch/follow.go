package kvwatch

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetstream-bridge/bridge/internal/elected"
)

// Follower applies a bucket's changes from a watch, in order, and keeps
// them coming when a server is lost.
//
// A watch's consumer lives on one server. When a stream of the account
// elects a leader, or the connection comes back, that server may be gone
// and the consumer with it, replaced by nats.go only once its heartbeats
// were missed: seconds in which other bridges' writes (a lease taken, a
// registration moved, a token revoked) went unseen (package elected). So
// at each such signal the follower opens a new watch resuming after the
// last change applied, and keeps applying the old one's changes until the
// new one is open: after a server's loss the old consumer may well live
// on, and the new one may wait seconds for the cluster's meta leader. A
// signal while a watch opens starts the opening over, as attempts sent
// before the election may be placed on the lost server. The old watch
// stops in the background: stopping waits for its consumer's delete.
//
// A consumer is placed on any server of its stream, not only its leader,
// and one lost with a server whose streams' elections come seconds later
// (or never, if it led none) falls silent while the bucket takes writes.
// So the follower also looks at the bucket's last revision every
// probeEvery, and a watch that applied nothing in a whole interval while
// the bucket held a newer revision is replaced as after an election.
type Follower struct {
	KV   jetstream.KeyValue
	Conn *nats.Conn // the connection whose elections and reconnections restart the watch
	Log  *slog.Logger
	// Apply is called with each change, on one goroutine. The new watch
	// hands on again the changes the old one handed on while it opened,
	// in order: Apply takes a revision it holds already as seen.
	Apply func(jetstream.KeyValueEntry)
	// Ready is called once, when the values present at the start are
	// all applied; it may be nil.
	Ready func()
	// Opening, when set, is told true when a new watch starts opening
	// and false once it replaced the old one: a window in which changes
	// may go unseen if the old watch's consumer died, and the cluster
	// cannot place a new one yet (no meta leader).
	Opening func(bool)

	applied atomic.Uint64 // the highest revision Apply returned from
}

// Applied is the highest revision applied: a new watch resumes after it,
// and a reader that saw the bucket at revision r has every change up to
// r applied once Applied reaches r.
func (f *Follower) Applied() uint64 { return f.applied.Load() }

// openAttemptWait is how long an attempt to open a watch waits for an
// answer before another starts beside it (see Open); probeEvery is how
// often the bucket's last revision is read to find a silent watch.
const (
	openAttemptWait = time.Second
	probeEvery      = 500 * time.Millisecond
)

// Run applies w's changes, and those of the watches that replace it, until
// ctx ends or the connection is closed; the watch it holds then is
// stopped. A watch that ends under it is replaced as after an election.
func (f *Follower) Run(ctx context.Context, w jetstream.KeyWatcher) {
	elections, unwatch, err := elected.Watch(f.Conn)
	if err != nil {
		f.Log.Warn("cannot watch the streams' leader elections; a lost server is noticed by missed heartbeats",
			"bucket", f.KV.Bucket(), "error", err)
	}
	defer unwatch()
	stalls, stopProbe := f.startProbe(ctx)
	defer stopProbe()
	var op opening
	defer func() {
		if op.stop() {
			f.announce(false)
		}
		Stop(w)
	}()
	updates := w.Updates()
	initial := true
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-updates:
			if !ok {
				if f.Conn.IsClosed() {
					return
				}
				updates = nil
				f.restart(ctx, &op)
				continue
			}
			initial = f.take(e, initial)
		case <-elections:
			f.restart(ctx, &op)
		case <-stalls:
			if op.cancel == nil { // else a new watch is opening already
				f.Log.Info("the watch of a bucket fell silent while the bucket took writes (its server lost?); watching again",
					"bucket", f.KV.Bucket(), "applied", f.Applied())
				f.restart(ctx, &op)
			}
		case next := <-op.ready:
			go Stop(w)
			w, updates = next, next.Updates()
			op.stop() // the attempts still waiting
			op = opening{}
			f.announce(false)
		}
	}
}

// take applies e, or, for the marker that the values present at the
// start are all handed on, calls Ready the first time; it reports
// whether that first marker is still to come.
func (f *Follower) take(e jetstream.KeyValueEntry, initial bool) bool {
	if e != nil {
		f.Apply(e)
		f.applied.Store(max(f.applied.Load(), e.Revision()))
		return initial
	}
	if initial && f.Ready != nil {
		f.Ready()
	}
	return false
}

// startProbe runs probe until the returned func is called, which waits
// for it to end.
func (f *Follower) startProbe(ctx context.Context) (<-chan struct{}, func()) {
	ctx, cancel := context.WithCancel(ctx)
	stalls := make(chan struct{}, 1)
	done := make(chan struct{})
	go func() { defer close(done); f.probe(ctx, stalls) }()
	return stalls, func() { cancel(); <-done }
}

// probe signals stalls when the watch applied nothing for a whole
// probeEvery while the bucket held a revision beyond the last applied,
// once for each such last revision: a last message removed before any
// watch handed it on (an expired lease) must not restart the watch
// again and again.
func (f *Follower) probe(ctx context.Context, stalls chan<- struct{}) {
	t := time.NewTicker(probeEvery)
	defer t.Stop()
	var behind bool
	var applied, last, signalled uint64
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := f.Applied()
		if behind && now == applied && last != signalled {
			signalled = last
			select {
			case stalls <- struct{}{}:
			default:
			}
		}
		var err error
		pctx, cancel := context.WithTimeout(ctx, probeEvery)
		last, err = LastRevision(pctx, f.KV)
		cancel()
		if err != nil {
			behind = false
			continue
		}
		behind, applied = last > now, now
	}
}

// LastRevision reads the revision of kv's last change from its stream's
// leader.
func LastRevision(ctx context.Context, kv jetstream.KeyValue) (uint64, error) {
	st, err := kv.Status(ctx)
	if err != nil {
		return 0, err
	}
	info, ok := st.(interface{ StreamInfo() *jetstream.StreamInfo })
	if !ok || info.StreamInfo() == nil {
		return 0, fmt.Errorf("kvwatch: the status of bucket %s does not say its last revision", kv.Bucket())
	}
	return info.StreamInfo().State.LastSeq, nil
}

// restart starts opening a new watch, giving up the opening under way.
func (f *Follower) restart(ctx context.Context, op *opening) {
	if !op.stop() {
		f.announce(true)
	}
	op.start(ctx, f)
}

// announce tells Opening, when set, that a new watch is opening (on) or
// replaced the old one.
func (f *Follower) announce(on bool) {
	if f.Opening != nil {
		f.Opening(on)
	}
}

// opening is a new watch being opened in the background; its zero value
// is none.
type opening struct {
	ready  chan jetstream.KeyWatcher
	cancel context.CancelFunc
}

// stop gives up the opening under way and reports whether there was one.
func (op *opening) stop() bool {
	if op.cancel == nil {
		return false
	}
	op.cancel()
	return true
}

// start opens a new watch in the background, resuming after the last
// change f applied.
func (op *opening) start(ctx context.Context, f *Follower) {
	octx, cancel := context.WithCancel(ctx)
	ready := make(chan jetstream.KeyWatcher)
	*op = opening{ready: ready, cancel: cancel}
	go func() {
		w, err := Open(octx, func() (jetstream.KeyWatcher, error) {
			return f.KV.WatchAll(ctx, jetstream.ResumeFromRevision(f.Applied()+1))
		}, openAttemptWait)
		if err != nil {
			return
		}
		select {
		case ready <- w:
		case <-octx.Done():
			Stop(w)
		}
	}()
}

package kvwatch

import (
	"context"
	"log/slog"
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
	// Applied is the revision of the last change applied; it is called
	// from other goroutines.
	Applied func() uint64
	// Opening, when set, is told true when a new watch starts opening
	// and false once it replaced the old one: a window in which changes
	// may go unseen if the old watch's consumer died, and the cluster
	// cannot place a new one yet (no meta leader).
	Opening func(bool)
}

// openAttemptWait is how long an attempt to open a watch waits for an
// answer before another starts beside it (see Open).
const openAttemptWait = time.Second

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
	var op opening
	defer func() {
		if op.stop() {
			f.opening(false)
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
			switch {
			case !ok:
				if f.Conn.IsClosed() {
					return
				}
				updates = nil
				f.restart(ctx, &op)
			case e == nil:
				if initial && f.Ready != nil {
					f.Ready()
				}
				initial = false
			default:
				f.Apply(e)
			}
		case <-elections:
			f.restart(ctx, &op)
		case next := <-op.ready:
			go Stop(w)
			w, updates = next, next.Updates()
			op.stop() // the attempts still waiting
			op = opening{}
			f.opening(false)
		}
	}
}

// restart starts opening a new watch, giving up the opening under way.
func (f *Follower) restart(ctx context.Context, op *opening) {
	if !op.stop() {
		f.opening(true)
	}
	op.start(ctx, f)
}

func (f *Follower) opening(on bool) {
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

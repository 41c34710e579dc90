package kvstore

import (
	"context"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetstream-bridge/bridge/internal/elected"
	"github.com/jetstream-bridge/bridge/internal/kvwatch"
)

// follower applies a bucket's changes from a watch, in order. When a
// stream of the account elects a leader it moves to a new watch resuming
// after the last change applied: the old one's consumer may have died
// with a lost server, and would be replaced only once its heartbeats were
// missed, seconds in which other bridges' writes (a registration's move,
// a token's revocation) went unseen (package elected). The old one is
// kept until the new one starts; the new one may hand on again changes
// the old one handed on, which apply must take as seen.
type follower struct {
	kv  jetstream.KeyValue
	nc  *nats.Conn
	log *slog.Logger
	// apply is called with each change; ready once, when the values
	// present at the start are all applied; applied says the revision of
	// the last change applied.
	apply   func(jetstream.KeyValueEntry)
	ready   func()
	applied func() uint64
}

// follow applies w's changes, and those of the watches that replace it,
// until the watch ends: ctx ended, or the connection was closed.
func (f *follower) follow(ctx context.Context, w jetstream.KeyWatcher) {
	elections, unwatch, err := elected.Watch(f.nc)
	if err != nil {
		f.log.Warn("kvstore: cannot watch the streams' leader elections; a lost server is noticed by missed heartbeats",
			"bucket", f.kv.Bucket(), "error", err)
	}
	defer unwatch()
	initial := true
	var retry <-chan time.Time
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return
			}
			if e == nil {
				if initial {
					f.ready()
					initial = false
				}
				continue
			}
			f.apply(e)
		case <-elections:
			retry = f.rewatch(ctx, &w)
		case <-retry:
			retry = f.rewatch(ctx, &w)
		}
	}
}

// rewatch replaces *w by a watch resuming after the last change applied,
// or, when that cannot start yet (the cluster still electing), asks to be
// tried again soon.
func (f *follower) rewatch(ctx context.Context, w *jetstream.KeyWatcher) <-chan time.Time {
	next, err := kvwatch.Open(func() (jetstream.KeyWatcher, error) {
		return f.kv.WatchAll(ctx, jetstream.ResumeFromRevision(f.applied()+1))
	}, rewatchAttemptWait, rewatchAttempts)
	if err != nil {
		if ctx.Err() == nil {
			f.log.Debug("kvstore: a new watch after an election could not start yet", "bucket", f.kv.Bucket(), "error", err)
		}
		return time.After(rewatchPause)
	}
	old := *w
	*w = next
	go kvwatch.Stop(old)
	return nil
}

// rewatchPause is how soon a watch that could not start after an election
// is tried again; rewatchAttempts and rewatchAttemptWait bound one try
// (see kvwatch.Open).
const (
	rewatchPause       = 250 * time.Millisecond
	rewatchAttempts    = 5
	rewatchAttemptWait = time.Second
)

package bridge

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jetstream-bridge/bridge/cursor"
	"github.com/jetstream-bridge/bridge/events"
)

// Meta is a small key-value space beside the registrations, where the
// daemon remembers which stream its cursors point into.
type Meta interface {
	GetMeta(ctx context.Context, key string) ([]byte, error)
	PutMeta(ctx context.Context, key string, value []byte) error
}

// WithStreamIdentity makes the daemon detect a journal stream that was
// deleted and re-created. Its sequences restart, so every stored cursor
// would name a different message: delivering from there would send the
// wrong messages or skip the new ones. Every registration that is not
// completed is parked instead, with an error saying so.
//
// The check runs at start, every second, and at once when a read finds the
// stream re-created (journal.ErrStreamRecreated). A journal that holds
// reads back after a re-creation (see StreamConfirmer) is told the new
// stream once every registration is parked, never before.
func WithStreamIdentity(stream string, created func(context.Context) (time.Time, error), meta Meta) DaemonOption {
	return func(d *Daemon) {
		d.identity = &identityWatch{stream: stream, created: created, meta: meta, store: d.store}
	}
}

// StreamConfirmer is a journal that serves nothing from a re-created
// stream until told that the cursors taken against the old one were dealt
// with (journal.Reader is one).
type StreamConfirmer interface {
	ConfirmStream(created time.Time) bool
}

type identityWatch struct {
	stream  string
	created func(context.Context) (time.Time, error)
	meta    Meta
	store   cursor.Store
	log     *slog.Logger
	events  *announcer
	// confirm are the journals to tell once the stream in force is
	// recorded and the registrations of an older one parked.
	confirm []StreamConfirmer
	// mu makes one check at a time: the ticker's and those of every turn
	// that read a re-created stream at once.
	mu sync.Mutex
	// parkings counts the checks that parked every registration. It moves
	// after the parking and before the journals are told the new stream,
	// so a turn that read its row before the parking sees it move by the
	// time its read can succeed.
	parkings atomic.Uint64
}

func (iw *identityWatch) key() string { return "stream-created/" + iw.stream }

func (iw *identityWatch) check(ctx context.Context) error {
	iw.mu.Lock()
	defer iw.mu.Unlock()
	now, err := iw.created(ctx)
	if err != nil {
		return fmt.Errorf("reading the creation time of stream %s: %w", iw.stream, err)
	}
	stamp := []byte(now.UTC().Format(time.RFC3339Nano))
	was, err := iw.meta.GetMeta(ctx, iw.key())
	if err != nil {
		return err
	}
	if string(was) == string(stamp) {
		iw.confirmed(now)
		return nil
	}
	if len(was) > 0 {
		reason := fmt.Sprintf("stream %s was deleted and re-created (created %s, cursors were set against the stream created %s): its sequences restarted, so this cursor no longer names the same message; rewind (bridge rewind --seq N ID) and unpark to go on",
			iw.stream, stamp, was)
		ids, n, err := iw.parkAll(ctx, reason)
		iw.parkings.Add(1)
		if err != nil {
			return err
		}
		iw.events.recreated(ids, n, reason)
		iw.log.Error("journal stream was re-created; parked every registration that was not completed", "stream", iw.stream, "parked", n)
	}
	if err := iw.meta.PutMeta(ctx, iw.key(), stamp); err != nil {
		return err
	}
	iw.confirmed(now)
	return nil
}

// confirmed lets the journals serve the stream created at now: every
// registration whose cursor was taken against another one is parked.
func (iw *identityWatch) confirmed(now time.Time) {
	for _, c := range iw.confirm {
		c.ConfirmStream(now)
	}
}

// parkAll parks every registration not completed; ids are the first
// maxListedParked of the n it parked, for the journal.recreated event.
func (iw *identityWatch) parkAll(ctx context.Context, reason string) (ids []string, n int, err error) {
	after := ""
	for {
		rows, next, err := iw.store.List(ctx, cursor.ListOptions{After: after, Limit: 1000})
		if err != nil {
			return ids, n, err
		}
		for _, r := range rows {
			if r.State == cursor.Completed {
				continue
			}
			if err := iw.store.Park(ctx, r.ID, reason); err != nil {
				return ids, n, err
			}
			iw.events.publish(events.Parked, r.ID, r.NextSeq)
			if len(ids) < maxListedParked {
				ids = append(ids, r.ID)
			}
			n++
		}
		if next == "" {
			return ids, n, nil
		}
		after = next
	}
}

// maxListedParked bounds the ids a journal.recreated event names.
const maxListedParked = 1000

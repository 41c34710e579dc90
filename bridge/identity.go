package bridge

import (
	"context"
	"fmt"
	"time"

	"github.com/jetstream-bridge/bridge/cursor"
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
func WithStreamIdentity(stream string, created func(context.Context) (time.Time, error), meta Meta) DaemonOption {
	return func(d *Daemon) {
		d.identity = &identityWatch{stream: stream, created: created, meta: meta, store: d.store, log: d}
	}
}

type identityWatch struct {
	stream  string
	created func(context.Context) (time.Time, error)
	meta    Meta
	store   cursor.Store
	log     *Daemon
}

func (iw *identityWatch) key() string { return "stream-created/" + iw.stream }

func (iw *identityWatch) check(ctx context.Context) error {
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
		return nil
	}
	if len(was) > 0 {
		reason := fmt.Sprintf("stream %s was deleted and re-created (created %s, cursors were set against the stream created %s): its sequences restarted, so this cursor no longer names the same message; rewind (bridge rewind --seq N ID) and unpark to go on",
			iw.stream, stamp, was)
		n, err := iw.parkAll(ctx, reason)
		if err != nil {
			return err
		}
		iw.log.log.Error("journal stream was re-created; parked every registration that was not completed", "stream", iw.stream, "parked", n)
	}
	return iw.meta.PutMeta(ctx, iw.key(), stamp)
}

func (iw *identityWatch) parkAll(ctx context.Context, reason string) (int, error) {
	var n int
	after := ""
	for {
		rows, next, err := iw.store.List(ctx, cursor.ListOptions{After: after, Limit: 1000})
		if err != nil {
			return n, err
		}
		for _, r := range rows {
			if r.State == cursor.Completed {
				continue
			}
			if err := iw.store.Park(ctx, r.ID, reason); err != nil {
				return n, err
			}
			n++
		}
		if next == "" {
			return n, nil
		}
		after = next
	}
}

package bridge

import (
	"context"
	"fmt"
	"slices"

	"github.com/jetstream-bridge/bridge/cursor"
)

// Ownership says which registrations this bridge delivers when several
// bridges share one store. Registrations fall into shards by id; a bridge
// delivers those of the shards it holds now.
//
// Owns must answer from local state (no I/O): it is asked before every
// POST, so a bridge whose lease lapsed stops at the next message, not at
// the next turn. Changes signals that the held shards may have changed.
type Ownership interface {
	Shard(id string) int
	Owns(shard int) bool
	Shards() []int
	Changes() <-chan struct{}
}

// WithOwnership makes the daemon deliver only the registrations o says
// are this bridge's, and take over those of shards it gains. Without it
// the daemon delivers every registration of its store.
func WithOwnership(o Ownership) DaemonOption {
	return func(d *Daemon) { d.owner = o }
}

// DueNow tells the worker of namespace ns that rows became due now
// through another bridge (see Worker.DueNow). Safe to call before Run.
func (d *Daemon) DueNow(ns string) {
	if w := d.workers[ns]; w != nil {
		w.DueNow()
	}
}

// owns reports whether this bridge delivers id now.
func (d *Daemon) owns(id string) bool {
	return d.owner == nil || d.owner.Owns(d.owner.Shard(id))
}

// ownershipLoop wakes the registrations of every shard this bridge gains.
// A gained shard's registrations may have had messages their previous
// owner woke them for and never served, or served and not flushed: each
// gets a turn, which starts from the stored cursor, so at most what the
// previous owner had in flight or unflushed is repeated and nothing is
// skipped.
func (d *Daemon) ownershipLoop(ctx context.Context) {
	held := map[int]bool{}
	for {
		now := d.owner.Shards()
		var gained []int
		for _, s := range now {
			if !held[s] {
				gained = append(gained, s)
			}
		}
		held = make(map[int]bool, len(now))
		for _, s := range now {
			held[s] = true
		}
		if len(gained) > 0 {
			n, err := d.wakeShards(ctx, gained)
			if n > 0 {
				d.log.Info("took over registrations", "shards", len(gained), "registrations", n)
			}
			if err != nil && ctx.Err() == nil {
				d.log.Error("waking the registrations of shards taken over", "shards", len(gained), "error", err)
				// Forget them, so the next change of the share tries
				// again.
				for _, s := range gained {
					delete(held, s)
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-d.owner.Changes():
		}
	}
}

// wakeShards wakes every active registration of the given shards and
// says how many it woke.
func (d *Daemon) wakeShards(ctx context.Context, shards []int) (int, error) {
	slices.Sort(shards)
	opt := cursor.ListOptions{State: cursor.Active, Limit: 1000}
	woken := 0
	for {
		rows, next, err := d.store.List(ctx, opt)
		if err != nil {
			return woken, fmt.Errorf("listing active registrations: %w", err)
		}
		for _, r := range rows {
			if _, ok := slices.BinarySearch(shards, d.owner.Shard(r.ID)); ok {
				d.route(r)
				woken++
			}
		}
		if next == "" {
			return woken, nil
		}
		opt.After = next
	}
}

// wakeShare wakes every registration this bridge holds when the tail
// starts announcing with nothing announced before: bridges sharing a store
// keep no mark of how far they followed the stream. A shard taken over
// before that start was served up to the head of then, and a message
// stored between then and the tail's start, announced by nobody, would
// wait for the next message on its filter. Waking the share costs a
// listing of the store, once per tail start that follows no announcement;
// waking the idle rows of every shard, as a bridge alone does, would
// write rows this bridge does not own.
func (d *Daemon) wakeShare(ctx context.Context) error {
	shards := d.owner.Shards()
	if len(shards) == 0 {
		return nil
	}
	n, err := d.wakeShards(ctx, shards)
	if n > 0 {
		d.log.Info("woke this bridge's registrations as the journal's tail began to announce", "registrations", n)
	}
	return err
}

package lease

import (
	"bytes"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// run plays a round every TTL/4, so a lease outlives three failed rounds
// in a row, and at once when a member joins or leaves, so a closing
// member's shards are taken within round trips. Expiries leave no marker:
// they are seen by a round's listing.
func (m *Member) run(ctx context.Context) {
	defer close(m.done)
	t := time.NewTicker(m.cfg.TTL / 4)
	defer t.Stop()
	var w jetstream.KeyWatcher
	defer func() { stopWatch(w) }()
	var names []string
	for {
		names = m.round(ctx, names)
		if w == nil {
			w, _ = m.members.WatchAll(ctx, jetstream.MetaOnly(), jetstream.UpdatesOnly())
		}
		if !m.next(ctx, t.C, w, names) {
			return
		}
	}
}

// stopWatch stops w and drains it until it closes: nats.go's watcher
// blocks its delivery on a full channel, and a delivery blocked when the
// watch stops would never return.
func stopWatch(w jetstream.KeyWatcher) {
	if w == nil {
		return
	}
	_ = w.Stop()
	for range w.Updates() {
	}
}

// next waits for the tick or a member key that is new or deleted (a
// renewal of a listed member is no change). It returns false when the
// member stops.
func (m *Member) next(ctx context.Context, tick <-chan time.Time, w jetstream.KeyWatcher, names []string) bool {
	var updates <-chan jetstream.KeyValueEntry
	if w != nil {
		updates = w.Updates()
	}
	for {
		select {
		case <-ctx.Done():
			return false
		case <-m.cfg.stalled:
			return false
		case <-tick:
			return true
		case e, ok := <-updates:
			if !ok {
				updates = nil // the tick goes on
			} else if e != nil && (e.Operation() != jetstream.KeyValuePut || !slices.Contains(names, e.Key())) {
				return true
			}
		}
	}
}

// round renews the member key, lists the live members (keeping the last
// list if that fails) and writes every lease the split asks for:
// renewals, releases and takes, one write per key, keys in parallel. A
// round lasts at most TTL/2, so a renewal is never more than that late.
func (m *Member) round(ctx context.Context, names []string) []string {
	m.keepName(ctx)
	lctx, cancel := context.WithTimeout(ctx, m.cfg.TTL/8)
	entries, err := latest(lctx, m.members, jetstream.MetaOnly())
	cancel()
	if err == nil {
		names = names[:0]
		for _, e := range entries {
			names = append(names, e.Key())
		}
	} else if ctx.Err() == nil {
		m.cfg.Logger.Warn("lease: listing members failed; keeping the last split", "instance", m.cfg.Instance, "err", err)
	}
	var fails failures
	m.writeLeases(ctx, m.plan(names), &fails)
	if fails.n > 0 && ctx.Err() == nil {
		m.cfg.Logger.Warn("lease: lease writes failed", "instance", m.cfg.Instance, "failed", fails.n, "err", fails.first)
	}
	m.mu.Lock()
	now := m.owned()
	changed := !slices.Equal(now, m.reported)
	m.reported = now
	m.mu.Unlock()
	if changed {
		m.signal()
	}
	return names
}

func (m *Member) signal() {
	select {
	case m.changes <- struct{}{}:
	default:
	}
}

// keepName renews the member key, or takes it again after it expired
// (a pause longer than the TTL). While another live member has the name
// this one holds nothing; a renewal unanswered changes nothing.
func (m *Member) keepName(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.TTL/8)
	defer cancel()
	m.mu.Lock()
	rev := m.memberRev
	m.mu.Unlock()
	next, err := m.renewName(ctx, rev)
	switch {
	case err == nil:
	case conflict(err):
		m.cfg.Logger.Error("lease: instance name taken by another live member; holding no shards", "instance", m.cfg.Instance)
		next = 0
	default:
		if ctx.Err() == nil {
			m.cfg.Logger.Warn("lease: renewing member key failed", "instance", m.cfg.Instance, "err", err)
		}
		return
	}
	m.mu.Lock()
	m.memberRev = next
	m.mu.Unlock()
}

// renewName updates the member key from rev, or creates it (rev 0, or
// rev refused because the key expired). A key holding this member's own
// value (a write whose answer was lost) is adopted by a checked update:
// the value carries the join's time to the nanosecond, so no other
// process has it.
func (m *Member) renewName(ctx context.Context, rev uint64) (uint64, error) {
	if rev != 0 {
		next, err := m.members.Update(ctx, m.cfg.Instance, m.value, rev)
		if !conflict(err) {
			return next, err
		}
		m.cfg.Logger.Warn("lease: member key expired; registering again", "instance", m.cfg.Instance)
	}
	next, err := m.members.Create(ctx, m.cfg.Instance, m.value)
	if conflict(err) {
		if e, gerr := m.members.Get(ctx, m.cfg.Instance); gerr == nil && bytes.Equal(e.Value(), m.value) {
			return m.members.Update(ctx, m.cfg.Instance, m.value, e.Revision())
		}
	}
	return next, err
}

// write is one lease write of a round; rev is the revision it expects
// (0 to take a shard).
type write struct {
	shard int
	rev   uint64
	keep  bool // renew (or take); false: release
}

// plan compares the split with the held leases. Released shards leave
// held before their delete is sent, so Owns is false before another
// member can take them.
func (m *Member) plan(names []string) []write {
	m.mu.Lock()
	defer m.mu.Unlock()
	want := map[int]bool{}
	if m.memberRev != 0 {
		want = split(m.cfg.Shards, m.cfg.Instance, names)
	}
	var ws []write
	for s, h := range m.held {
		ws = append(ws, write{shard: s, rev: h.rev, keep: want[s]})
		if !want[s] {
			delete(m.held, s)
		}
	}
	for s := range want {
		if m.held[s] == nil {
			ws = append(ws, write{shard: s, keep: true})
		}
	}
	return ws
}

// failures counts a round's failed writes and keeps the first reason.
type failures struct {
	mu    sync.Mutex
	n     int
	first error
}

func (f *failures) add(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n++; f.first == nil {
		f.first = err
	}
}

func (m *Member) writeLeases(ctx context.Context, ws []write, fails *failures) {
	sem := make(chan struct{}, maxInFlight)
	var wg sync.WaitGroup
	for _, w := range ws {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			wctx, cancel := context.WithTimeout(ctx, m.cfg.TTL/4)
			defer cancel()
			switch {
			case !w.keep:
				if err := gone(m.leases.Delete(wctx, key(w.shard), jetstream.LastRevision(w.rev))); err != nil {
					fails.add(err) // the lease expires on its own
				}
			case w.rev == 0:
				m.take(wctx, w.shard, fails)
			default:
				m.renew(wctx, w, fails)
			}
		})
	}
	wg.Wait()
}

func (m *Member) renew(ctx context.Context, w write, fails *failures) {
	sent := time.Now()
	rev, err := m.leases.Update(ctx, key(w.shard), []byte(m.cfg.Instance), w.rev)
	m.mu.Lock()
	defer m.mu.Unlock()
	switch h := m.held[w.shard]; {
	case err == nil:
		h.rev, h.renewed = rev, sent
	case conflict(err):
		delete(m.held, w.shard)
		m.renewalsFailed.Add(1)
		m.cfg.Logger.Warn("lease: lost", "instance", m.cfg.Instance, "shard", w.shard)
	default:
		m.renewalsFailed.Add(1)
		fails.add(err)
	}
}

// take creates the lease key of a shard. A key already naming this
// instance (a take whose answer was lost, a restart under the same name)
// is adopted by a checked update of the revision read.
func (m *Member) take(ctx context.Context, shard int, fails *failures) {
	sent := time.Now()
	rev, err := m.leases.Create(ctx, key(shard), []byte(m.cfg.Instance))
	token := rev
	if conflict(err) {
		e, gerr := m.leases.Get(ctx, key(shard))
		if gerr != nil || string(e.Value()) != m.cfg.Instance {
			return // held by another: free after its release or expiry
		}
		sent = time.Now()
		rev, err = m.leases.Update(ctx, key(shard), []byte(m.cfg.Instance), e.Revision())
		token = e.Revision()
	}
	if err != nil {
		if !conflict(err) {
			fails.add(err)
		}
		return
	}
	m.takeovers.Add(1)
	m.mu.Lock()
	m.held[shard] = &held{token: token, rev: rev, renewed: sent}
	m.mu.Unlock()
}

package lease

import (
	"bytes"
	"context"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetstream-bridge/bridge/internal/kvwatch"
)

// run plays a round every TTL/4, so a lease outlives three failed rounds
// in a row, and at once when the watches see a member join or leave or a
// lease released, so a handover costs round trips, not ticks.
//
// Close stops it between rounds, never in one: a write cancelled in
// flight may still land, leaving the member a stale revision to release.
func (m *Member) run(ctx context.Context) {
	t := time.NewTicker(m.cfg.TTL / 4)
	defer t.Stop()
	select { // the first split counts the members already there
	case <-m.listed:
	case <-t.C:
	case <-m.quit:
		return
	}
	for {
		m.round(ctx)
		select {
		case <-m.quit:
			return
		case <-m.cfg.stalled:
			return
		case <-t.C:
		case <-m.wake:
		}
	}
}

// wakeUp asks for a round now; requests made during a round coalesce.
func (m *Member) wakeUp() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// follow feeds every entry of kv, from the last value of each key on, to
// on, and calls listed (when not nil) once the values present at the
// start are fed. The watch is read without pause: nats.go's watcher
// stalls its delivery while its channel is full, and a stalled watch
// reports members and releases late. Values are read too: they are
// instance names and join times, and name each shard's holder. After an
// election the watch resumes after the last revision fed, on a new
// consumer (see kvwatch.Follower): an entry may be fed again, in order.
func (m *Member) follow(ctx context.Context, kv jetstream.KeyValue, on func(jetstream.KeyValueEntry), listed func()) {
	w, err := kvwatch.Open(ctx, func() (jetstream.KeyWatcher, error) { return kv.WatchAll(ctx) }, watchAttemptWait)
	if err != nil {
		return // ctx ended
	}
	f := kvwatch.Follower{KV: kv, Conn: m.nc, Log: m.cfg.Logger, Ready: listed, Apply: on}
	f.Run(ctx, w)
}

// watchAttemptWait is how long an attempt to open a watch waits for an
// answer before another starts beside it (see kvwatch.Open).
const watchAttemptWait = time.Second

// seeMember records a member key's write: a new member or one gone wakes
// the loop. A member is live until a TTL after its last write by the
// server's clock (Created), which a renewal moves on.
func (m *Member) seeMember(e jetstream.KeyValueEntry) {
	m.mu.Lock()
	_, known := m.seen[e.Key()]
	if e.Operation() == jetstream.KeyValuePut {
		m.seen[e.Key()] = time.Now().Add(-max(time.Since(e.Created()), 0))
	} else {
		delete(m.seen, e.Key())
	}
	m.mu.Unlock()
	if !known || e.Operation() != jetstream.KeyValuePut {
		m.wakeUp()
	}
}

// seeLease wakes the loop when a lease is released or expires (with
// markers), so a shard this member should hold is taken at once.
func (m *Member) seeLease(e jetstream.KeyValueEntry) {
	shard, err := strconv.Atoi(e.Key())
	put := e.Operation() == jetstream.KeyValuePut
	if err == nil {
		m.mu.Lock()
		if put {
			m.holders[shard] = string(e.Value())
		} else {
			delete(m.holders, shard)
		}
		m.mu.Unlock()
	}
	if !put {
		m.wakeUp()
	}
}

// live lists the members written within a TTL; a member closing is gone
// at once, one that stopped renewing after the TTL, as on the server.
func (m *Member) live() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var names []string
	for name, at := range m.seen {
		if time.Since(at) < m.cfg.TTL {
			names = append(names, name)
		}
	}
	return names
}

// round renews the member key and writes every lease the split of the
// live members asks for: renewals, releases and takes, one write per
// key, keys in parallel. A round lasts at most 3/8 TTL, so a renewal is
// never later than that.
func (m *Member) round(ctx context.Context) {
	m.keepName(ctx)
	var fails failures
	keep, release := splitWrites(m.plan(m.live()))
	m.writeLeases(ctx, keep, &fails)
	m.release(ctx, release)
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
	// The split is computed before m.mu is taken: Weights reads the
	// store's index, whose readers may wait on Owns, which takes m.mu.
	split := m.split(names)
	m.mu.Lock()
	defer m.mu.Unlock()
	want := map[int]bool{}
	if m.memberRev != 0 {
		want = split
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

// splitWrites separates the renewals and takes of a round from its
// releases.
func splitWrites(ws []write) (keep, release []write) {
	for _, w := range ws {
		if w.keep {
			keep = append(keep, w)
		} else {
			release = append(release, w)
		}
	}
	return keep, release
}

// release deletes the leases of shards the split took from this member,
// after BeforeRelease had up to a quarter TTL to settle them. It runs
// beside the rounds, so renewals never wait for a hand-over.
func (m *Member) release(ctx context.Context, ws []write) {
	if len(ws) == 0 {
		return
	}
	m.loops.Go(func() {
		if m.cfg.BeforeRelease != nil {
			sctx, cancel := context.WithTimeout(ctx, m.cfg.TTL/4)
			shards := make([]int, len(ws))
			for i, w := range ws {
				shards[i] = w.shard
			}
			m.cfg.BeforeRelease(sctx, shards)
			cancel()
		}
		var fails failures
		m.writeLeases(ctx, ws, &fails)
		if fails.n > 0 && ctx.Err() == nil {
			m.cfg.Logger.Warn("lease: releases failed; the leases expire on their own", "instance", m.cfg.Instance, "failed", fails.n, "err", fails.first)
		}
	})
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

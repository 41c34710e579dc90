package lease

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetstream-bridge/bridge/internal/kvwatch"
)

// ErrInstanceTaken is Join's answer when a live member already has the
// instance name; the name is free again a TTL after that member's last
// renewal, or at once when it closes.
var ErrInstanceTaken = errors.New("instance name taken by a live member")

// maxInFlight bounds one member's concurrent writes: each key sees one at
// a time (the server admits one expected-revision check per subject), and
// different keys pipeline.
const maxInFlight = 32

// Member is one live participant: it keeps its member key alive, takes
// and renews the shards the split gives it and releases the others. Its
// methods are safe for concurrent use.
type Member struct {
	cfg     Config
	nc      *nats.Conn // for the buckets' leader elections
	members jetstream.KeyValue
	leases  jetstream.KeyValue
	value   []byte // the member key's value
	margin  time.Duration

	mu        sync.Mutex
	memberRev uint64 // 0 while the name is not ours (expired during a pause)
	held      map[int]*held
	reported  []int // the owned set last signalled on changes

	seen    map[string]time.Time // live members: when last written
	holders map[int]string       // shard → the member its lease names, as watched

	changes   chan struct{}
	wake      chan struct{}
	listed    chan struct{}      // closed once the members present at the join are seen
	quit      chan struct{}      // stops the rounds
	stop      context.CancelFunc // stops the watches
	loops     sync.WaitGroup
	closeOnce sync.Once
	closeErr  error

	takeovers      atomic.Uint64
	renewalsFailed atomic.Uint64
}

// held is one lease this member wrote.
type held struct {
	token   uint64    // revision at acquisition: grows with every new holder
	rev     uint64    // last revision written, expected by the next write
	renewed time.Time // when the last successful write was sent (monotonic)
}

type memberValue struct {
	Since time.Time `json:"since"`
}

// MemberInfo describes one live member.
type MemberInfo struct {
	Name   string
	Since  time.Time // when it joined
	Shards []int     // shards whose lease names it, ascending
}

// Stats are counters for a metrics layer.
type Stats struct {
	Held           int    // leases held now
	Takeovers      uint64 // shards taken: released by their holder, free after an expiry, or adopted
	RenewalsFailed uint64 // renewals refused (lease lost) or unanswered
}

// Join creates or opens the buckets, registers cfg.Instance and starts
// keeping it alive; the member takes its first shards at once. Close it
// to hand its shards over.
func Join(ctx context.Context, js jetstream.JetStream, cfg Config) (*Member, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, setupWait)
		defer cancel()
	}
	value, _ := json.Marshal(memberValue{Since: time.Now().UTC()})
	m := &Member{cfg: cfg, nc: js.Conn(), value: value, margin: cfg.TTL / 5, held: make(map[int]*held),
		seen: make(map[string]time.Time), holders: make(map[int]string), changes: make(chan struct{}, 1), wake: make(chan struct{}, 1),
		listed: make(chan struct{}), quit: make(chan struct{})}
	if m.members, err = bucket(ctx, js, cfg, "members"); err != nil {
		return nil, err
	}
	if m.leases, err = bucket(ctx, js, cfg, "leases"); err != nil {
		return nil, err
	}
	err = retry(ctx, cfg.Logger, "member key "+cfg.Instance, func(ctx context.Context) error {
		rev, err := m.renewName(ctx, 0)
		if conflict(err) {
			return errPermanent{fmt.Errorf("lease: %w: %q (free again %v after that member's last contact)", ErrInstanceTaken, cfg.Instance, cfg.TTL)}
		}
		m.memberRev = rev
		return err
	})
	if err != nil {
		return nil, err
	}
	loopCtx, stop := context.WithCancel(context.Background())
	m.stop = stop
	var once sync.Once
	listed := func() { once.Do(func() { close(m.listed) }) }
	m.loops.Go(func() { m.follow(loopCtx, m.members, m.seeMember, listed) })
	m.loops.Go(func() { m.follow(loopCtx, m.leases, m.seeLease, nil) })
	m.loops.Go(func() { m.run(context.Background()) })
	return m, nil
}

// conflict reports a compare-and-set refused: another revision is there.
func conflict(err error) bool {
	return errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch)
}

// Owns reports whether the member may act for shard now, and the shard's
// fencing token: the lease key's revision when this member took it,
// larger for every later holder. ok turns false TTL/5 before the lease
// can expire on the server if renewals stop succeeding, counted from the
// moment the last successful renewal was sent, by the monotonic clock.
// The server expires from its own wall clock, so skew between the NATS
// servers (a new stream leader ahead of the old) eats into that margin.
func (m *Member) Owns(shard int) (token uint64, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	h := m.held[shard]
	if h == nil || !m.fresh(h) {
		return 0, false
	}
	return h.token, true
}

func (m *Member) fresh(h *held) bool {
	return time.Since(h.renewed) < m.cfg.TTL-m.margin
}

// Shards returns the shards Owns reports now, ascending.
func (m *Member) Shards() []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.owned()
}

func (m *Member) owned() []int {
	var s []int
	for shard, h := range m.held {
		if m.fresh(h) {
			s = append(s, shard)
		}
	}
	slices.Sort(s)
	return s
}

// Holder names the member whose lease on shard this member last saw,
// empty when none: for display, as the watch of the leases has it (a
// lease expiring shows once its marker arrives), never for ownership. A
// shard this member owns is named for it at once, before its write comes
// back through the watch.
func (m *Member) Holder(shard int) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if h := m.held[shard]; h != nil && m.fresh(h) {
		return m.cfg.Instance
	}
	return m.holders[shard]
}

// Changes signals, coalesced, whenever Shards changes; it is closed by
// Close.
func (m *Member) Changes() <-chan struct{} { return m.changes }

// Stats returns the member's counters.
func (m *Member) Stats() Stats {
	m.mu.Lock()
	n := len(m.held)
	m.mu.Unlock()
	return Stats{Held: n, Takeovers: m.takeovers.Load(), RenewalsFailed: m.renewalsFailed.Load()}
}

// Members lists the live members and the shards each holds, by name, for
// an admin's view; a member or lease renewed during the read may be
// missing from it.
func (m *Member) Members(ctx context.Context) ([]MemberInfo, error) {
	members, err := latest(ctx, m.members)
	if err != nil {
		return nil, fmt.Errorf("lease: members: %w", err)
	}
	leases, err := latest(ctx, m.leases)
	if err != nil {
		return nil, fmt.Errorf("lease: leases: %w", err)
	}
	shards := make(map[string][]int)
	for _, e := range leases {
		if s, err := strconv.Atoi(e.Key()); err == nil {
			shards[string(e.Value())] = append(shards[string(e.Value())], s)
		}
	}
	out := make([]MemberInfo, 0, len(members))
	for _, e := range members {
		var v memberValue
		_ = json.Unmarshal(e.Value(), &v) // a foreign value still names a member
		s := shards[e.Key()]
		slices.Sort(s)
		out = append(out, MemberInfo{Name: e.Key(), Since: v.Since, Shards: s})
	}
	slices.SortFunc(out, func(a, b MemberInfo) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// latest reads the last value of every live key in one ordered consumer.
// A key rewritten while it is read can be missed (the watch counts the
// values present when it starts, and a renewal replaces one): what it
// returns is for display, never a basis for ownership.
func latest(ctx context.Context, kv jetstream.KeyValue) ([]jetstream.KeyValueEntry, error) {
	w, err := kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, err
	}
	// Stopping deletes the consumer, which a cluster electing may leave
	// unanswered for seconds: the answer is not held for it.
	defer func() { go kvwatch.Stop(w) }()
	var out []jetstream.KeyValueEntry
	for {
		select {
		case e := <-w.Updates():
			if e == nil {
				return out, nil
			}
			out = append(out, e)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Close stops the member, releases every lease and deletes its member
// key at once, so the others take its shards within round trips rather
// than after the TTL. Leases already lost are not an error.
func (m *Member) Close(ctx context.Context) error {
	m.closeOnce.Do(func() {
		close(m.quit)
		m.stop()
		m.loops.Wait()
		m.mu.Lock()
		leases, memberRev := m.held, m.memberRev
		m.held, m.memberRev = map[int]*held{}, 0
		m.mu.Unlock()
		m.signal()
		close(m.changes)
		// Leases first: the member key's delete tells the others to take
		// them, and they can only once the leases are gone.
		errs := make([]error, len(leases)+1)
		var wg sync.WaitGroup
		i := 0
		for shard, h := range leases {
			err := &errs[i]
			wg.Go(func() { *err = deleteOwn(ctx, m.leases, key(shard), h.rev, []byte(m.cfg.Instance)) })
			i++
		}
		wg.Wait()
		if memberRev != 0 {
			errs[i] = deleteOwn(ctx, m.members, m.cfg.Instance, memberRev, m.value)
		}
		if err := errors.Join(errs...); err != nil {
			m.closeErr = fmt.Errorf("lease: close %s: %w", m.cfg.Instance, err)
		}
	})
	return m.closeErr
}

// deleteOwn deletes key at revision rev, or at the revision read if rev
// is stale but the key still holds own (a renewal whose answer was
// lost). A key another member wrote since is not this member's to
// delete: no error.
func deleteOwn(ctx context.Context, kv jetstream.KeyValue, key string, rev uint64, own []byte) error {
	err := kv.Delete(ctx, key, jetstream.LastRevision(rev))
	if conflict(err) {
		e, gerr := kv.Get(ctx, key)
		if gerr != nil || !bytes.Equal(e.Value(), own) {
			return nil
		}
		err = kv.Delete(ctx, key, jetstream.LastRevision(e.Revision()))
	}
	if conflict(err) {
		return nil
	}
	return err
}

// gone drops the error of a delete that found another revision: the key
// is no longer this member's to delete.
func gone(err error) error {
	if conflict(err) {
		return nil
	}
	return err
}

func key(shard int) string { return strconv.Itoa(shard) }

package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/jetstream-bridge/bridge/admin"
	"github.com/jetstream-bridge/bridge/bridge"
	"github.com/jetstream-bridge/bridge/cursor"
	"github.com/jetstream-bridge/bridge/cursor/kvstore"
	"github.com/jetstream-bridge/bridge/journal"
	"github.com/jetstream-bridge/bridge/lease"
)

// setupWait bounds joining the cluster and opening its buckets: bridges
// starting together on a fresh cluster wait for each other's creates and
// for JetStream's leaders, and a cluster that never settles is an error.
const setupWait = time.Minute

// storeSet is the cursor store serve runs on and what comes with it:
// alone, the bbolt file; in a cluster, the kv store and this bridge's
// lease on its share.
type storeSet struct {
	store   cursor.Store
	meta    bridge.Meta
	gauges  gaugeStore
	owner   bridge.Ownership // nil alone
	cluster admin.Cluster    // nil alone
	leases  func() int       // shard leases held; nil alone
	ping    func(context.Context) error
	metrics []prometheus.Collector
	close   func()
	// due relays the kv store's news of rows made due through other
	// bridges, and the lease's hand-overs, to the daemon, which exists
	// only once the store does.
	due *dueRelay
}

// dueRelay forwards to the daemon once attached; before, nothing runs
// that could miss it, since the daemon reads its due index as it starts.
type dueRelay struct {
	d  atomic.Pointer[bridge.Daemon]
	kv atomic.Pointer[kvstore.Store]
}

// weights are the registrations of each shard, as the kv store's index
// of the bucket counts them; nil before the store is open.
func (r *dueRelay) weights() []int {
	if kv := r.kv.Load(); kv != nil {
		return kv.ShardWeights()
	}
	return nil
}

func (r *dueRelay) attach(d *bridge.Daemon) { r.d.Store(d) }

func (r *dueRelay) dueNow(ns string) {
	if d := r.d.Load(); d != nil {
		d.DueNow(ns)
	}
}

// settle makes what this bridge acknowledged for the registrations of
// shards it hands over durable before their leases go (see
// lease.Config.BeforeRelease); before the daemon exists nothing was
// acknowledged.
func (r *dueRelay) settle(ctx context.Context, shards []int, log *slog.Logger) {
	d := r.d.Load()
	if d == nil {
		return
	}
	leaving := make(map[int]bool, len(shards))
	for _, s := range shards {
		leaving[s] = true
	}
	err := d.Settle(ctx, func(id string) bool { return leaving[lease.ShardOf(id, lease.DefaultShards)] })
	if err != nil {
		log.Warn("handing shards over before their last cursor writes were made durable; the next holder may repeat those deliveries", "shards", len(shards), "error", err)
	}
}

func boltSet(db *cursor.DB) *storeSet {
	return &storeSet{store: db, meta: db, gauges: db, ping: func(context.Context) error { return nil }, close: func() {}, due: &dueRelay{}}
}

// joinCluster takes this bridge's place among the bridges of the kv
// store: the lease first, since it refuses a taken Instance and too
// many replicas with the numbers, then the store, asking its due index
// only for the registrations this bridge holds.
func joinCluster(ctx context.Context, c *Config, js jetstream.JetStream, log *slog.Logger) (*storeSet, error) {
	ctx, cancel := context.WithTimeout(ctx, setupWait)
	defer cancel()
	relay := &dueRelay{}
	m, err := lease.Join(ctx, js, lease.Config{
		Instance: c.Instance,
		Bucket:   c.KVBucket,
		TTL:      c.LeaseTTL,
		Replicas: c.KVReplicas,
		Logger:   log,
		// The relay reaches the daemon once it exists, the store's counts
		// once it is open: until then the split is by shards.
		BeforeRelease: func(ctx context.Context, shards []int) { relay.settle(ctx, shards, log) },
		Weights:       relay.weights,
	})
	if err != nil {
		return nil, fmt.Errorf("joining the bridges of bucket %s as %q: %w", c.KVBucket, c.Instance, err)
	}
	own := &shares{m: m, shards: lease.DefaultShards}
	set := &storeSet{owner: own, due: relay}
	kv, err := kvstore.Open(ctx, js,
		kvstore.WithShardWeights(lease.DefaultShards, func(id string) int { return lease.ShardOf(id, lease.DefaultShards) }),
		kvstore.WithOnDue(set.due.dueNow),
		kvstore.WithPrefix(c.KVBucket),
		kvstore.WithReplicas(c.KVReplicas),
		kvstore.WithLogger(log),
		kvstore.WithDueFilter(own.ownsID))
	if err != nil {
		closeMember(m, log)
		return nil, err
	}
	relay.kv.Store(kv)
	info := &clusterInfo{m: m, kv: kv, own: own, self: c.Instance, replicas: c.KVReplicas}
	log.Info("joined the bridges of the kv store", "instance", c.Instance, "bucket", c.KVBucket,
		"replicas", c.KVReplicas, "leaseTTL", c.LeaseTTL)
	set.store, set.meta, set.gauges, set.cluster = kv, kv, kv, info
	set.ping = kv.Ping
	set.leases = func() int { return m.Stats().Held }
	set.metrics = clusterMetrics(m, kv)
	set.close = func() {
		// The store first: its last flush must land while this bridge
		// still holds the leases that make the writes its own.
		if err := kv.Close(); err != nil {
			log.Error("closing the kv store", "error", err)
		}
		closeMember(m, log)
	}
	return set, nil
}

// closeMember releases every lease, so the others take over within round
// trips instead of a TTL.
func closeMember(m *lease.Member, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := m.Close(ctx); err != nil {
		log.Error("releasing the leases; the other bridges take over when they expire", "error", err)
	}
}

// shares is a lease member as the daemon sees it (bridge.Ownership).
type shares struct {
	m      *lease.Member
	shards int
}

func (s *shares) Shard(id string) int { return lease.ShardOf(id, s.shards) }

func (s *shares) Owns(shard int) bool {
	_, ok := s.m.Owns(shard)
	return ok
}

func (s *shares) ownsID(id string) bool    { return s.Owns(s.Shard(id)) }
func (s *shares) Shards() []int            { return s.m.Shards() }
func (s *shares) Changes() <-chan struct{} { return s.m.Changes() }

// clusterInfo answers the admin API's questions about the cluster.
type clusterInfo struct {
	m        *lease.Member
	kv       *kvstore.Store
	own      *shares
	self     string
	replicas int
}

func (c *clusterInfo) Owner(id string) string { return c.m.Holder(c.own.Shard(id)) }
func (c *clusterInfo) Replicas() int          { return c.replicas }

func (c *clusterInfo) Instances(ctx context.Context) ([]admin.Instance, error) {
	members, err := c.m.Members(ctx)
	if err != nil {
		return nil, err
	}
	perShard := make([]int, c.own.shards)
	c.kv.EachID(func(id string) { perShard[c.own.Shard(id)]++ })
	out := make([]admin.Instance, 0, len(members))
	for _, mi := range members {
		n := 0
		for _, s := range mi.Shards {
			n += perShard[s]
		}
		out = append(out, admin.Instance{Name: mi.Name, Registrations: n, Since: mi.Since.UTC(), Self: mi.Name == c.self})
	}
	return out, nil
}

// clusterMetrics are the lease and fencing counters of a clustered bridge.
func clusterMetrics(m *lease.Member, kv *kvstore.Store) []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "bridge_leases_held", Help: "Shard leases this bridge holds."},
			func() float64 { return float64(m.Stats().Held) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "bridge_lease_takeovers_total", Help: "Shards this bridge took: released by, or expired from, another holder."},
			func() float64 { return float64(m.Stats().Takeovers) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "bridge_lease_renewals_failed_total", Help: "Lease renewals refused or unanswered."},
			func() float64 { return float64(m.Stats().RenewalsFailed) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "bridge_fenced_writes_total", Help: "Cursor writes refused because another bridge moved the registration since: a bridge paused past its lease."},
			func() float64 { return float64(kv.FencedWrites()) }),
	}
}

// ensureJournal finds or creates the journal stream, waiting while a
// fresh cluster settles (see untilSettled).
func ensureJournal(ctx context.Context, c *Config, js jetstream.JetStream, create bool, log *slog.Logger) error {
	return untilSettled(ctx, log, "the journal stream "+c.Stream, func(ctx context.Context) error {
		_, err := journal.EnsureStream(ctx, js, c.Stream, c.StreamSubjects, create, journalReplicas(c))
		return err
	})
}

// attemptWait bounds one attempt of untilSettled.
const attemptWait = 2 * time.Second

// untilSettled calls try until it succeeds or fails for another reason
// than a cluster settling, waiting at most setupWait in all and logging
// why. Bridges starting together on a fresh cluster create and update
// the same streams at once, and a request that loses such a race can go
// unanswered: each attempt is bounded by attemptWait, so one lost answer
// costs seconds, not the whole wait.
func untilSettled(ctx context.Context, log *slog.Logger, what string, try func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, setupWait)
	defer cancel()
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		actx, acancel := context.WithTimeout(ctx, attemptWait)
		err := try(actx)
		acancel()
		if err == nil || !settling(err) {
			return err
		}
		log.Info("waiting for "+what, "error", err)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
	}
}

// settling reports errors of a NATS cluster that is still forming or
// electing: no answer in time, no JetStream responder, 503, a stream
// another bridge just created not found yet. A stream missing that the
// bridge may not create is not: the operator has to.
func settling(err error) bool {
	var api *jetstream.APIError
	var missing *journal.NotFoundError
	switch {
	case errors.As(err, &missing):
		return false
	case errors.As(err, &api) && api.Code == 503:
		return true
	}
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrStreamNotFound)
}

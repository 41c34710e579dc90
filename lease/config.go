package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"time"
)

// Defaults of Config's zero fields.
const (
	DefaultBucket   = "BRIDGE"
	DefaultShards   = 64
	DefaultTTL      = 10 * time.Second
	DefaultReplicas = 3
)

// MinTTL is the shortest lease: a renewal every TTL/4 needs a few round
// trips of slack, and a shorter lease than an election is lost in every
// election anyway.
const MinTTL = time.Second

// Config describes one member. Members of one cluster must agree on
// Bucket, Shards and TTL; Join refuses a TTL other than the bucket's.
type Config struct {
	// Instance is the member's name, unique among live members.
	Instance string
	// Bucket is the prefix of the buckets' names: Bucket_members and
	// Bucket_leases.
	Bucket string
	// Shards is how many shards the registrations fall into (ShardOf).
	Shards int
	// TTL is how long a lease outlives its holder's last renewal. It must
	// exceed a NATS election (seconds), or every election loses leases.
	TTL time.Duration
	// Replicas of both buckets; more than the cluster's servers is refused.
	Replicas int
	// Logger receives the reasons of waits and lost leases.
	Logger *slog.Logger
	// BeforeRelease, when set, is called with the shards the split takes
	// from this member, after it stopped owning them (Owns is false) and
	// before their leases are deleted, so the holder can make what it
	// acknowledged on them durable: a lease given back before its last
	// cursor write lands lets the next holder repeat those deliveries.
	// It must return when ctx ends; the leases are deleted then anyway.
	BeforeRelease func(ctx context.Context, shards []int)
	// Weights, when set, says how many registrations each shard holds
	// (a slice of Shards counts, or nil when not known yet): the split
	// then balances registrations, not shards, so a few registrations
	// falling into shards at random do not leave a member idle. Every
	// member must read them from the same shared state. It is called
	// without the member's lock held, so it may wait on code that calls
	// Owns.
	Weights func() []int

	// stalled, for tests, stops the loop without releasing anything: a
	// paused process (SIGSTOP, a long GC) as the cluster sees it.
	stalled <-chan struct{}
}

var (
	keyChars    = regexp.MustCompile(`^[-_=a-zA-Z0-9]+$`)
	bucketChars = regexp.MustCompile(`^[-_a-zA-Z0-9]+$`)
)

// withDefaults fills zero fields and returns the first invalid one.
func (c Config) withDefaults() (Config, error) {
	if c.Bucket == "" {
		c.Bucket = DefaultBucket
	}
	if c.Shards == 0 {
		c.Shards = DefaultShards
	}
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	if c.Replicas == 0 {
		c.Replicas = DefaultReplicas
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case c.Instance == "":
		return c, errors.New("lease: Config.Instance is empty")
	case !keyChars.MatchString(c.Instance):
		return c, fmt.Errorf("lease: Config.Instance %q: only letters, digits, '-', '_' and '=' are allowed", c.Instance)
	case !bucketChars.MatchString(c.Bucket):
		return c, fmt.Errorf("lease: Config.Bucket %q: only letters, digits, '-' and '_' are allowed", c.Bucket)
	case c.Shards < 1:
		return c, fmt.Errorf("lease: Config.Shards %d: want at least 1", c.Shards)
	case c.TTL < MinTTL:
		return c, fmt.Errorf("lease: Config.TTL %v: want at least %v", c.TTL, MinTTL)
	case c.Replicas < 1 || c.Replicas > 5:
		return c, fmt.Errorf("lease: Config.Replicas %d: want 1 to 5", c.Replicas)
	}
	return c, nil
}

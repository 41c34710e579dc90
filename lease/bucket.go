package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// setupWait bounds Join's wait for the buckets and the member key when
// the caller's context has no deadline: bridges starting together on a
// fresh cluster race to create the buckets, and a cluster electing its
// leaders answers "temporarily unavailable" for seconds.
const setupWait = 30 * time.Second

// Server error codes that mean the cluster has fewer servers than the
// replicas asked for.
const (
	codeReplicasNotSupported = 10074 // a server outside any cluster
	codeInsufficientRes      = 10023
	codeNoSuitablePeers      = 10005
)

// errPermanent marks errors retrying cannot mend.
type errPermanent struct{ error }

func (e errPermanent) Unwrap() error { return e.error }

// retry calls fn until it succeeds, fails permanently or ctx ends,
// logging why it waits.
func retry(ctx context.Context, log *slog.Logger, what string, fn func(context.Context) error) error {
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := fn(actx)
		cancel()
		var perm errPermanent
		if err == nil || errors.As(err, &perm) {
			return err
		}
		log.Info("lease: waiting for "+what, "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("lease: %s: %w", what, err)
		case <-time.After(wait):
		}
	}
}

// bucket opens or creates the bucket cfg.Bucket_suffix. A bucket whose
// TTL differs from cfg.TTL is refused: a member counting a longer lease
// than the server keeps would claim shards the server gave away.
func bucket(ctx context.Context, js jetstream.JetStream, cfg Config, suffix string) (jetstream.KeyValue, error) {
	name := cfg.Bucket + "_" + suffix
	var kv jetstream.KeyValue
	err := retry(ctx, cfg.Logger, "bucket "+name, func(ctx context.Context) error {
		var err error
		kv, err = js.KeyValue(ctx, name)
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			kv, err = createBucket(ctx, js, cfg, name, suffix)
		}
		if err != nil {
			return replicasErr(js, cfg.Replicas, err)
		}
		st, err := kv.Status(ctx)
		if err != nil {
			return err
		}
		if st.TTL() != cfg.TTL {
			return errPermanent{fmt.Errorf("lease: bucket %s keeps keys %v but the lease TTL is %v; every bridge must use one TTL", name, st.TTL(), cfg.TTL)}
		}
		return nil
	})
	return kv, err
}

// createBucket creates a bucket whose keys expire TTL after their last
// write, leaving a marker (server 2.11+) so that watchers learn of an
// expiry at once; on older servers expiries are seen by polling alone.
func createBucket(ctx context.Context, js jetstream.JetStream, cfg Config, name, suffix string) (jetstream.KeyValue, error) {
	kvc := jetstream.KeyValueConfig{
		Bucket:         name,
		Description:    "bridge " + suffix + ", kept alive by their holders",
		TTL:            cfg.TTL,
		LimitMarkerTTL: cfg.TTL,
		Replicas:       cfg.Replicas,
		Storage:        jetstream.FileStorage,
	}
	kv, err := js.CreateKeyValue(ctx, kvc)
	if errors.Is(err, jetstream.ErrLimitMarkerTTLNotSupported) {
		cfg.Logger.Info("lease: the server keeps no expiry markers (before 2.11); expiries are seen by polling", "bucket", name)
		kvc.LimitMarkerTTL = 0
		kv, err = js.CreateKeyValue(ctx, kvc)
	}
	return kv, err
}

// replicasErr turns the server's refusal of too many replicas into an
// error naming both numbers, and leaves other errors to retry, among
// them a refusal from a cluster with servers enough, some not up yet.
func replicasErr(js jetstream.JetStream, replicas int, err error) error {
	var api *jetstream.APIError
	if !errors.As(err, &api) {
		return err
	}
	servers := 1
	switch api.ErrorCode {
	case codeReplicasNotSupported:
	case codeInsufficientRes, codeNoSuitablePeers:
		servers = clusterSize(js)
		if servers >= replicas {
			// Enough servers, one of them offline or still starting
			// (bridges and servers starting together): wait for it.
			return err
		}
	default:
		return err
	}
	noun := "servers"
	if servers == 1 {
		noun = "server"
	}
	return errPermanent{fmt.Errorf("lease: --kv-replicas %d but the NATS cluster has %d %s: %w", replicas, servers, noun, err)}
}

// clusterSize counts the distinct client addresses the connection knows:
// the servers of its cluster, as their INFO advertises them.
func clusterSize(js jetstream.JetStream) int {
	seen := make(map[string]bool)
	for _, s := range js.Conn().Servers() {
		if u, err := url.Parse(s); err == nil {
			seen[u.Host] = true
		}
	}
	return max(len(seen), 1)
}

package lease

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jetstream-bridge/bridge/internal/testutil"
	"github.com/nats-io/nats.go/jetstream"
)

// benchLeases opens an R3 leases bucket on a fresh 3-node cluster with
// one key per shard, as members renew them.
func benchLeases(b *testing.B) jetstream.KeyValue {
	b.Helper()
	c := testutil.Cluster(b, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg, err := Config{Instance: "bench", Bucket: "B"}.withDefaults()
	if err != nil {
		b.Fatal(err)
	}
	kv, err := bucket(ctx, testutil.JetStream(b, c.ClientURLs()), cfg, "leases")
	if err != nil {
		b.Fatal(err)
	}
	return kv
}

// BenchmarkRenewals is what a member's rounds do: compare-and-set updates
// of DefaultShards keys, one in flight per key, up to maxInFlight keys at
// once. renewals/s is the leases bucket's ceiling on one cluster: a
// deployment renews shards × 4 / TTL a second (25/s at the defaults).
func BenchmarkRenewals(b *testing.B) {
	kv := benchLeases(b)
	ctx := context.Background()
	revs := make([]uint64, DefaultShards)
	for s := range revs {
		rev, err := kv.Create(ctx, key(s), []byte("bench"))
		if err != nil {
			b.Fatal(err)
		}
		revs[s] = rev
	}
	b.ResetTimer()
	var wg sync.WaitGroup
	for w := range maxInFlight {
		wg.Go(func() {
			for i := w; i < b.N; i += maxInFlight {
				s := i % DefaultShards // w or w+maxInFlight: no key shared
				rev, err := kv.Update(ctx, key(s), []byte("bench"), revs[s])
				if err != nil {
					b.Error(err)
					return
				}
				revs[s] = rev
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "renewals/s")
}

// BenchmarkCASOneKey is the raw limit beside it: one key, each update
// waiting for the last, so every one pays a replicated commit's round trip.
func BenchmarkCASOneKey(b *testing.B) {
	kv := benchLeases(b)
	ctx := context.Background()
	rev, err := kv.Create(ctx, "0", []byte("bench"))
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if rev, err = kv.Update(ctx, "0", []byte("bench"), rev); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "updates/s")
}

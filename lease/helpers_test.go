package lease

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jetstream-bridge/bridge/internal/testutil"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testTTL is short enough for takeovers to happen within a test and long
// enough for a loopback cluster's writes, even under -race.
const (
	testTTL    = 2 * time.Second
	testShards = 64
)

func testConfig(name string) Config {
	return Config{Instance: name, Bucket: "T", Shards: testShards, TTL: testTTL}
}

// join joins cfg on its own connection and closes it when the test ends.
func join(t testing.TB, c *testutil.NATSCluster, cfg Config) *Member {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := Join(ctx, testutil.JetStream(t, c.ClientURLs()), cfg)
	if err != nil {
		t.Fatalf("join %s: %v", cfg.Instance, err)
	}
	t.Cleanup(func() { closeMember(t, m) })
	return m
}

func closeMember(t testing.TB, m *Member) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.Close(ctx); err != nil {
		t.Errorf("close: %v", err)
	}
}

// joinAll joins n members named m1..mn at the same moment, racing to
// create the buckets as bridges starting together do.
func joinAll(t *testing.T, c *testutil.NATSCluster, n int) []*Member {
	t.Helper()
	ms := make([]*Member, n)
	var wg sync.WaitGroup
	for i := range ms {
		wg.Go(func() { ms[i] = join(t, c, testConfig(fmt.Sprintf("m%d", i+1))) })
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return ms
}

// eventually polls cond until it holds or within has passed.
func eventually(t testing.TB, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > within {
			t.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(start)
}

// split reads who owns each shard now: owners[s] lists the members whose
// Owns(s) is true.
func owners(ms []*Member) [][]int {
	out := make([][]int, testShards)
	for i, m := range ms {
		for _, s := range m.Shards() {
			out[s] = append(out[s], i)
		}
	}
	return out
}

// fair reports whether every shard has exactly one owner among ms and
// each holds at most 1.2 × an equal share + 1.
func fair(ms []*Member) bool {
	limit := 1.2*float64(testShards)/float64(len(ms)) + 1
	for _, o := range owners(ms) {
		if len(o) != 1 {
			return false
		}
	}
	for _, m := range ms {
		if float64(len(m.Shards())) > limit {
			return false
		}
	}
	return true
}

// guard checks, every few milliseconds until the test ends, that no shard
// is owned by two members at once: the promise everything else rests on.
func guard(t *testing.T, ms ...*Member) {
	t.Helper()
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(3 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			for s, o := range owners(ms) {
				if len(o) > 1 {
					t.Errorf("shard %d owned by members %v at once", s, o)
					return
				}
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
}

// threeMembers starts a cluster and three members together, racing to
// create the buckets as bridges starting at once do, guards them and
// waits for every shard to be owned once, each member within 1.2 × an
// equal share + 1.
func threeMembers(t *testing.T) (*testutil.NATSCluster, []*Member) {
	t.Helper()
	c := testutil.Cluster(t, 3)
	ms := joinAll(t, c, 3)
	guard(t, ms...)
	eventually(t, 2*testTTL, "a fair split of three", func() bool { return fair(ms) })
	return c, ms
}

// wantErr fails the test unless err says want.
func wantErr(t *testing.T, what string, err error, want string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("%s: %v, want an error containing %q", what, err, want)
	}
}

package kvstore

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jetstream-bridge/bridge/cursor"
	"github.com/jetstream-bridge/bridge/internal/testutil"
)

// openOn opens a store with three replicas on the cluster, closed when
// the test ends.
func openOn(t *testing.T, c *testutil.NATSCluster) *Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Open(ctx, testutil.JetStream(t, c.ClientURLs()))
	if err != nil {
		t.Fatalf("Open on the cluster: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// On replicated buckets the server reports a refused compare-and-set with
// another code than on one server; creates, fencing and flushes must mean
// the same, and survive the loss of the bucket's leader.
func TestOnAThreeNodeCluster(t *testing.T) {
	ctx := context.Background()
	c := testutil.Cluster(t, 3)
	a, b := openOn(t, c), openOn(t, c)
	create(t, a, reg("x", "outbox"))
	_, _, err := b.Create(ctx, reg("x", "outbox"), nil)
	wantErrIs(t, err, cursor.ErrExists)
	get(t, b, "x")

	a.watching.Lock()
	advance(t, a, "x", cursor.Progress{NextSeq: 7, Delivered: 7})
	advance(t, b, "x", cursor.Progress{NextSeq: 10, Delivered: 10})
	flush(t, b)
	flush(t, a)
	a.watching.Unlock()
	if r := get(t, a, "x"); r.NextSeq != 10 || a.FencedWrites() != 1 {
		t.Fatalf("after a stale flush on the cluster: NextSeq %d, fenced %d; want 10 and 1", r.NextSeq, a.FencedWrites())
	}

	info, err := a.regs.Status(ctx)
	must(t, err)
	leader := c.StreamLeader("KV_" + info.Bucket())
	c.Stop(leader)
	advance(t, a, "x", cursor.Progress{NextSeq: 12, Delivered: 2})
	deadline := time.Now().Add(30 * time.Second)
	for err := a.Flush(ctx); err != nil; err = a.Flush(ctx) {
		if time.Now().After(deadline) {
			t.Fatalf("no flush within 30 s of the leader's loss: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if r := get(t, b, "x"); r.NextSeq != 12 || r.Delivered != 12 {
		t.Fatalf("after the leader's loss: %+v", r)
	}
}

// Bridges starting together on a fresh cluster race to create the
// buckets; each waits for the others' creates instead of failing, and a
// write through one is read at once through another, from the leader.
func TestOpenRacesOnAFreshCluster(t *testing.T) {
	c := testutil.Cluster(t, 3)
	stores := make([]*Store, 3)
	errs := make(chan error, len(stores))
	for i := range stores {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
			defer cancel()
			s, err := Open(ctx, testutil.JetStream(t, c.ClientURLs()))
			if err == nil {
				stores[i] = s
				t.Cleanup(func() { _ = s.Close() })
			}
			errs <- err
		}()
	}
	for range stores {
		if err := <-errs; err != nil {
			t.Fatalf("Open racing two others on a fresh cluster: %v", err)
		}
	}
	for i, s := range stores {
		id := fmt.Sprintf("r%d", i)
		create(t, s, reg(id, "outbox"))
		next := stores[(i+1)%len(stores)]
		if got := get(t, next, id); got.ID != id {
			t.Fatalf("Get(%q) through another store = %+v", id, got)
		}
	}
}

// A store whose cluster lost its quorum says so when pinged, naming the
// bucket, although the server it is connected to still answers: /readyz
// reports it instead of a bridge that looks ready and takes no write.
func TestPingFailsWithoutAQuorum(t *testing.T) {
	c := testutil.Cluster(t, 3)
	s, err := Open(context.Background(), testutil.JetStream(t, c.Servers[0].ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	must(t, s.Ping(context.Background()))
	c.Stop(1)
	c.Stop(2)
	deadline := time.Now().Add(45 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := s.Ping(ctx)
		cancel()
		if err != nil && strings.Contains(err.Error(), "BRIDGE_regs") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Ping with two of three servers down: %v, want an error naming BRIDGE_regs", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

package testutil

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// An R3 stream keeps accepting writes after its leader's node is stopped,
// and the node rejoins on its own store and port.
func TestClusterSurvivesNodeLoss(t *testing.T) {
	c := Cluster(t, 3)
	js := JetStream(t, c.ClientURLs())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t"}, Replicas: 3})
	if err != nil {
		t.Fatalf("R3 stream on a 3-node cluster: %v", err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(info.Cluster.Replicas) + 1; got != 3 {
		t.Fatalf("stream has %d peers, want 3", got)
	}
	leader := c.Index(info.Cluster.Leader)
	if leader < 0 {
		t.Fatalf("stream leader %q is none of the cluster's servers", info.Cluster.Leader)
	}
	c.Stop(leader)
	publish(ctx, t, js)
	c.Restart(leader)
	if c.Servers[leader] == nil || c.Leader() < 0 {
		t.Fatal("restarted node is not running or no meta leader")
	}
	publish(ctx, t, js)
}

// publish retries through the election that follows a leader's loss.
func publish(ctx context.Context, t *testing.T, js jetstream.JetStream) {
	t.Helper()
	for {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := js.Publish(pctx, "t", []byte("x"))
		cancel()
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("publish to the R3 stream after a node loss: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

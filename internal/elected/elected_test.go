package elected_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/jetstream-bridge/bridge/internal/elected"
	"github.com/jetstream-bridge/bridge/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A client of a node that stays up hears that an R3 stream elected a new
// leader after its leader's node stopped; a client of the stopped node
// hears it came back on another; a stopped watch leaves no goroutine
// behind (goleak).
func TestWatchHearsTheElectionAfterALeaderIsLost(t *testing.T) {
	c := testutil.Cluster(t, 3)
	js := testutil.JetStream(t, c.ClientURLs())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t"}, Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	leader := c.StreamLeader("T")
	other := (leader + 1) % 3
	stays := watchOn(t, c.Servers[other].ClientURL())
	lost := watchOn(t, c.ClientURLs()) // the first URL's node, possibly the leader's
	drain(stays.ch)
	drain(lost.ch)
	c.Stop(leader)
	for _, w := range []watch{stays, lost} {
		select {
		case <-w.ch:
		case <-ctx.Done():
			t.Fatalf("no election or reconnection heard through %s after the stream's leader stopped", w.nc.ConnectedUrlRedacted())
		}
		w.stop()
	}
}

type watch struct {
	nc   *nats.Conn
	ch   <-chan struct{}
	stop func()
}

func watchOn(t *testing.T, url string) watch {
	t.Helper()
	nc, err := nats.Connect(url, nats.ReconnectWait(50*time.Millisecond), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	ch, stop, err := elected.Watch(nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return watch{nc: nc, ch: ch, stop: stop}
}

// drain takes a signal the stream's own creation may have left.
func drain(ch <-chan struct{}) {
	select {
	case <-ch:
	case <-time.After(200 * time.Millisecond):
	}
}

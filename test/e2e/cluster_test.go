package e2e

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetstream-bridge/bridge/internal/testutil"
)

// The cluster the drills stand on: a replicated stream keeps its messages
// through the kill -9 of the node leading it, a new leader is elected
// among the survivors, and the node rejoins on its store.
func TestClusterOfNATSProcessesSurvivesItsStreamLeader(t *testing.T) {
	nc := startNATSCluster(t, 3)
	js := testutil.JetStream(t, nc.urls())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}, Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	pub := &publisher{js: js}
	for _, b := range seqBodies("m", 0, 10) {
		pub.publish(t, "s.a", b)
	}
	old := nc.streamLeader(js, "S")
	nc.kill9(old)
	nc.waitSettled()
	if now := nc.streamLeader(js, "S"); now == old {
		t.Fatalf("stream S still led by the killed node n%d", old+1)
	}
	for _, b := range seqBodies("m", 10, 20) {
		pub.publish(t, "s.a", b)
	}
	nc.restart(old)
	var got []string
	for _, m := range streamContents(t, js, "S") {
		got = append(got, string(m.data))
	}
	if want := seqBodies("m", 0, 20); !slices.Equal(got, want) {
		t.Fatalf("stream S after the kill of its leader: %q, want %q", got, want)
	}
}

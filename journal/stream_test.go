package journal_test

import (
	"testing"

	"github.com/jetstream-bridge/bridge/internal/testutil"
	"github.com/jetstream-bridge/bridge/journal"
)

// A journal created with StreamReplicas is placed on that many servers of
// the cluster, so the loss of one keeps every message.
func TestEnsureStreamReplicas(t *testing.T) {
	c := testutil.Cluster(t, 3)
	js := testutil.JetStream(t, c.ClientURLs())
	s, err := journal.EnsureStream(t.Context(), js, "JOURNAL", []string{"journal.>"}, true, journal.StreamReplicas(3))
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.Config.Replicas != 3 || info.Cluster == nil || len(info.Cluster.Replicas) != 2 {
		t.Fatalf("created with %d replicas, cluster %+v; want 3 on three servers", info.Config.Replicas, info.Cluster)
	}
}

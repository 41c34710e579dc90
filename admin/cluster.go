package admin

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// Cluster is what the API tells of the bridges sharing one store.
type Cluster interface {
	// Owner names the bridge delivering id now, empty while nobody
	// holds it. It answers from local state.
	Owner(id string) string
	// Instances lists the bridges holding a live lease.
	Instances(ctx context.Context) ([]Instance, error)
	// Replicas is how many servers keep the store.
	Replicas() int
}

// Instance is one bridge of the cluster as GET /v1/cluster answers it.
type Instance struct {
	Name string `json:"name"`
	// Registrations it delivers now.
	Registrations int       `json:"registrations"`
	Since         time.Time `json:"since"`
	// Self marks the bridge that answered.
	Self bool `json:"self"`
}

type clusterView struct {
	Instances []Instance `json:"instances"`
	Store     string     `json:"store"`
	Replicas  int        `json:"replicas"`
}

// cluster answers GET /v1/cluster.
func (s *server) cluster(w http.ResponseWriter, r *http.Request) error {
	if s.clusterOf == nil {
		return errorf(http.StatusNotFound, codeNotFound, "this bridge runs alone (--store bolt); /v1/cluster needs --store kv")
	}
	in, err := s.clusterOf.Instances(r.Context())
	if err != nil {
		return fmt.Errorf("listing the bridges of the cluster: %w", err)
	}
	if in == nil {
		in = []Instance{}
	}
	writeJSON(w, http.StatusOK, clusterView{Instances: in, Store: "kv", Replicas: s.clusterOf.Replicas()})
	return nil
}

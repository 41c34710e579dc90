package e2e

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jetstream-bridge/bridge/internal/testutil"
)

// Three bridges whose embedded servers form the cluster need nothing
// else: kill -9 the one delivering a registration while messages stream
// in, its NATS server dying with it, and the other two deliver every
// message, first arrivals in stream order, the registration owned by a
// survivor.
func TestEmbeddedClusterSurvivesLossOfOneBridge(t *testing.T) {
	const ttl = 4 * time.Second
	routePorts := testutil.FreePorts(t, 3)
	routes := make([]string, 3)
	for i, p := range routePorts {
		routes[i] = fmt.Sprintf("nats://127.0.0.1:%d", p)
	}
	bridges := make([]*chaosDaemon, 3)
	clients := make([]string, 3)
	for i := range bridges {
		bridges[i] = newChaosDaemon(t, "--store", "kv", "--instance", fmt.Sprintf("b%d", i+1), "--lease-ttl", ttl.String(),
			"--embedded-cluster", fmt.Sprintf("127.0.0.1:%d", routePorts[i]),
			"--embedded-routes", strings.Join(routes, ","), "--embedded-name", fmt.Sprintf("n%d", i+1))
		clients[i] = "nats://" + bridges[i].natsAddr
		// All at once: each waits for a majority of the cluster before it serves.
		bridges[i].launch()
	}
	for _, b := range bridges {
		b.awaitAPI()
	}

	// A receiver slow enough that the kill lands mid-stream.
	s := newSinkAnswering(t, func() int { time.Sleep(20 * time.Millisecond); return http.StatusNoContent })
	if out, code := bridges[0].cli("register", "--id", "orders", "--namespace", "outbox",
		"--subject", "journal.orders.>", "--url", s.URL, "--start", "first"); code != 0 {
		t.Fatalf("register through b1: exit %d: %s", code, out)
	}
	pub := newPublisher(t, strings.Join(clients, ","))
	want := seqBodies("o", 0, 100)
	for _, b := range want[:50] {
		pub.publish(t, "journal.orders.1", b)
	}
	waitFor(t, 30*time.Second, "the first deliveries", func() bool { return len(s.bodies()) >= 10 })

	victim := ownerOf(t, bridges, "orders")
	bridges[victim].kill9()
	survivor := bridges[(victim+1)%3]
	for _, b := range want[50:] {
		pub.publish(t, "journal.orders.1", b)
	}
	waitFor(t, 60*time.Second, fmt.Sprintf("every message after the loss of b%d", victim+1), func() bool {
		return len(firstArrivals(s.bodies())) >= len(want)
	})
	if got := firstArrivals(s.bodies()); !slices.Equal(got, want) {
		t.Fatalf("first arrivals out of order or missing after the kill: %q", got)
	}
	// A survivor learns the new holder from its watch of the leases; a
	// watch whose consumer was on the lost server is re-created once its
	// heartbeats are missed, seconds after the kill.
	waitFor(t, 45*time.Second, "a survivor to name a survivor as the owner", func() bool {
		owner := ownerSeenBy(survivor.daemon, "orders")
		return owner != "" && owner != fmt.Sprintf("b%d", victim+1)
	})
	waitFor(t, 3*ttl, "GET /v1/cluster to list the two survivors only", func() bool {
		names, code := clusterInstances(survivor.daemon)
		return code == http.StatusOK && len(names) == 2 && !slices.Contains(names, fmt.Sprintf("b%d", victim+1))
	})
	t.Logf("killed b%d: %d POSTs for %d messages", victim+1, len(s.bodies()), len(want))
}

// ownerOf returns the index of the bridge the registration's owner names,
// as the first bridge sees it once it names one.
func ownerOf(t *testing.T, bridges []*chaosDaemon, id string) int {
	t.Helper()
	owner := -1
	waitFor(t, 20*time.Second, "an owner of "+id, func() bool {
		name := ownerSeenBy(bridges[0].daemon, id)
		for i := range bridges {
			if name == fmt.Sprintf("b%d", i+1) {
				owner = i
			}
		}
		return owner >= 0
	})
	return owner
}

// clusterInstances names the bridges GET /v1/cluster lists as holding a
// live lease.
func clusterInstances(d *daemon) ([]string, int) {
	var c struct {
		Instances []struct {
			Name string `json:"name"`
		} `json:"instances"`
	}
	code := d.api("GET", "/v1/cluster", nil, &c)
	var names []string
	for _, i := range c.Instances {
		names = append(names, i.Name)
	}
	return names, code
}

// ownerSeenBy is the owner d's admin API names for registration id, empty
// while it answers no registration (a store electing its leader).
func ownerSeenBy(d *daemon, id string) string {
	var r struct {
		Owner string `json:"owner"`
	}
	if d.api("GET", "/v1/registrations/"+id, nil, &r) != http.StatusOK {
		return ""
	}
	return r.Owner
}

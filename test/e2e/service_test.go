package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// natscli is the NATS command-line tool at a pinned release, run as an
// operator runs it: `go run` of the module (built once into the build
// cache, then reused), never a copy of its code.
const natscli = "github.com/nats-io/natscli/nats@v0.5.0"

// natsCLI runs `nats --server servers args...` and returns its standard
// output; a non-zero exit fails the test with what it printed.
func natsCLI(t *testing.T, servers string, args ...string) string {
	t.Helper()
	out, errOut, err := runNatsCLI(servers, args...)
	if err != nil {
		t.Fatalf("nats %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

func runNatsCLI(servers string, args ...string) (stdout, stderr string, err error) {
	full := append([]string{"run", natscli, "--server", servers, "--timeout", "2s"}, args...)
	cmd := exec.Command("go", full...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

// serviceInfo is what `nats micro ls --json` and `nats micro info --json`
// print of one instance of a service.
type serviceInfo struct {
	Name      string            `json:"name"`
	ID        string            `json:"id"`
	Version   string            `json:"version"`
	Metadata  map[string]string `json:"metadata"`
	Endpoints []struct {
		Name    string `json:"name"`
		Subject string `json:"subject"`
	} `json:"endpoints"`
}

// bridgeStatus is the answer of a bridge's status endpoint.
type bridgeStatus struct {
	Instance      string `json:"instance"`
	Version       string `json:"version"`
	Store         string `json:"store"`
	Registrations int    `json:"registrations"`
	Parked        int    `json:"parked"`
	Leases        int    `json:"leases"`
}

func listServices(t *testing.T, servers string) []serviceInfo {
	t.Helper()
	var infos []serviceInfo
	out := natsCLI(t, servers, "micro", "ls", "jetstream-bridge", "--json")
	if err := json.Unmarshal([]byte(out), &infos); err != nil {
		t.Fatalf("nats micro ls --json printed %q: %v", out, err)
	}
	return infos
}

func statusOf(t *testing.T, servers, instance string) bridgeStatus {
	t.Helper()
	out := natsCLI(t, servers, "request", "bridge.status."+instance, "", "--raw")
	var st bridgeStatus
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("nats request bridge.status.%s printed %q: %v", instance, out, err)
	}
	return st
}

// pinged are the service IDs that answered `nats micro ping`.
func pinged(t *testing.T, servers string) []string {
	t.Helper()
	var ids []string
	for _, l := range strings.Split(natsCLI(t, servers, "micro", "ping", "jetstream-bridge"), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "jetstream-bridge" {
			ids = append(ids, f[1])
		}
	}
	slices.Sort(ids)
	return ids
}

// apiCounts are the registrations and the parked ones as the admin API
// lists them, page by page.
func apiCounts(t *testing.T, d *daemon) (all, parked int) {
	t.Helper()
	count := func(query string) int {
		n := 0
		for after := ""; ; {
			var page struct {
				Registrations []json.RawMessage `json:"registrations"`
				Next          string            `json:"next"`
			}
			if code := d.api("GET", "/v1/registrations?limit=100&after="+after+query, nil, &page); code != http.StatusOK {
				t.Fatalf("GET /v1/registrations: %d", code)
			}
			n += len(page.Registrations)
			if after = page.Next; after == "" {
				return n
			}
		}
	}
	return count(""), count("&state=parked")
}

// bridgeVersion is the version `bridge version` prints.
func bridgeVersion(t *testing.T) string {
	t.Helper()
	out, code := runBridge(t, nil, "version")
	if f := strings.Fields(out); code != 0 || len(f) < 2 {
		t.Fatalf("bridge version: exit %d: %s", code, out)
	} else {
		return f[1]
	}
	return ""
}

// A NATS operator finds the bridge with `nats micro ls` and `info`, with
// its instance and version, and its status endpoint answers the counts
// the admin API lists, a parked registration among them.
func TestNATSServiceFoundByNatsCLI(t *testing.T) {
	d := newDaemon(t, "--instance", "solo", "--max-attempts", "1")
	d.start()
	servers := "nats://" + d.natsAddr
	ok, failing := newSink(t), newSinkAnswering(t, func() int { return http.StatusInternalServerError })
	for i := range 3 {
		d.create(map[string]any{"id": fmt.Sprintf("ok-%d", i), "namespace": "outbox", "subject": "journal.ok.>", "url": ok.URL})
	}
	d.create(map[string]any{"id": "parks", "namespace": "outbox", "subject": "journal.fail.>", "url": failing.URL})
	newPublisher(t, servers).publish(t, "journal.fail.1", `{}`)
	waitFor(t, 20*time.Second, "the failing registration to park", func() bool { return d.registration("parks")["state"] == "parked" })

	version := bridgeVersion(t)
	infos := listServices(t, servers)
	if len(infos) != 1 || infos[0].Name != "jetstream-bridge" || infos[0].Metadata["instance"] != "solo" ||
		infos[0].Metadata["version"] != version || infos[0].Metadata["store"] != "bolt" {
		t.Fatalf("nats micro ls: %+v, want jetstream-bridge with instance solo, version %s, store bolt", infos, version)
	}
	if table := natsCLI(t, servers, "micro", "ls"); !strings.Contains(table, "jetstream-bridge") || !strings.Contains(table, infos[0].ID) {
		t.Errorf("nats micro ls does not show the bridge:\n%s", table)
	}
	var info struct {
		Info serviceInfo `json:"info"`
	}
	out := natsCLI(t, servers, "micro", "info", "jetstream-bridge", "--json")
	if err := json.Unmarshal([]byte(out), &info); err != nil {
		t.Fatalf("nats micro info --json printed %q: %v", out, err)
	}
	if info.Info.ID != infos[0].ID || len(info.Info.Endpoints) != 1 || info.Info.Endpoints[0].Subject != "bridge.status.solo" {
		t.Errorf("nats micro info: %+v, want the status endpoint on bridge.status.solo", info.Info)
	}
	if text := natsCLI(t, servers, "micro", "info", "jetstream-bridge"); !strings.Contains(text, "instance: solo") {
		t.Errorf("nats micro info does not show the instance:\n%s", text)
	}

	all, parked := apiCounts(t, d)
	want := bridgeStatus{Instance: "solo", Version: version, Store: "bolt", Registrations: all, Parked: parked}
	if st := statusOf(t, servers, "solo"); st != want || all != 4 || parked != 1 {
		t.Errorf("status %+v; the API lists %d registrations, %d parked (want 4 and 1)", st, all, parked)
	}
	if code := d.api("DELETE", "/v1/registrations/ok-0", nil, nil); code != http.StatusNoContent {
		t.Fatalf("DELETE: %d", code)
	}
	if st := statusOf(t, servers, "solo"); st.Registrations != 3 {
		t.Errorf("status after a delete: %+v, want 3 registrations", st)
	}
	if ids := pinged(t, servers); !slices.Equal(ids, []string{infos[0].ID}) {
		t.Errorf("nats micro ping answered %q, want %q", ids, infos[0].ID)
	}
}

// --nats-service=false registers nothing: no instance answers a ping,
// none is listed.
func TestNATSServiceOff(t *testing.T) {
	d := newDaemon(t, "--nats-service=false")
	d.start()
	servers := "nats://" + d.natsAddr
	if ids := pinged(t, servers); len(ids) != 0 {
		t.Errorf("nats micro ping answered %q with --nats-service=false", ids)
	}
	out, errOut, err := runNatsCLI(servers, "micro", "ls", "jetstream-bridge")
	if err == nil || !strings.Contains(errOut, "no service instances found") {
		t.Errorf("nats micro ls with --nats-service=false: %v\n%s%s", err, out, errOut)
	}
}

// Three bridges on a three-node cluster: three instances answer a ping,
// each listed with its instance; each one's status counts the store as
// the API does and the shards it holds as its bridge_leases_held, all
// of them between the three.
func TestNATSServiceOfThreeBridges(t *testing.T) {
	c := newBridgeCluster(t, 3)
	c.register("svc", 9)
	c.waitLeasesSettled()
	servers := c.nats.urls()
	if ids := pinged(t, servers); len(ids) != 3 {
		t.Fatalf("nats micro ping: %d instances answered (%q), want 3", len(ids), ids)
	}
	var names []string
	for _, in := range listServices(t, servers) {
		names = append(names, in.Metadata["instance"])
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"b1", "b2", "b3"}) {
		t.Fatalf("nats micro ls: instances %q, want b1 b2 b3", names)
	}
	all, parked := apiCounts(t, c.bridges[0].daemon)
	leases := 0
	for i, b := range c.bridges {
		st := statusOf(t, servers, c.name(i))
		held := int(metricSum(t, b.admin, "bridge_leases_held"))
		if st.Instance != c.name(i) || st.Store != "kv" || st.Registrations != all || st.Parked != parked || st.Leases != held {
			t.Errorf("status of %s: %+v; the API lists %d registrations, %d parked; it holds %d leases", c.name(i), st, all, parked, held)
		}
		leases += st.Leases
	}
	if all != 9 || leases != 64 {
		t.Errorf("%d registrations, %d leases between the bridges; want 9 and 64", all, leases)
	}
}

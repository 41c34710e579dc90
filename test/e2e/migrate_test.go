package e2e

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The way from one bridge to a cluster: a bridge with the bolt store on
// the cluster's NATS delivers six registrations while messages stream in,
// a seventh's receiver refusing every POST, and is killed with SIGKILL
// mid-stream. `bridge migrate --from-bolt` copies its store into the kv
// store of three replicas; three bridges then deliver on the cluster
// while messages go on streaming in: every registration receives every
// message, first arrivals in stream order, what the bolt bridge had
// acknowledged is repeated at most as far as its last --flush-interval
// reached, and a second migrate copies nothing.
func TestClusterMigrateFromBoltThenDeliver(t *testing.T) {
	c := newBareCluster(t)
	bolt := newChaosDaemon(t, "--store", "bolt", "--nats-url", c.nats.urls(), "--stream", "JOURNAL", "--create-stream",
		"--flush-interval", clusterFlush.String())
	bolt.start()
	c.sink.sentBy(bolt.cmd.Process.Pid, "bolt")
	for i := range 6 {
		id := fmt.Sprintf("mig-%02d", i)
		bolt.create(map[string]any{"id": id, "namespace": "outbox", "subject": "journal.>", "url": c.sink.url(id), "start": "first"})
		c.ids = append(c.ids, id)
	}
	const refused = "mig-refused"
	refusing := map[string]any{"id": refused, "namespace": "outbox", "subject": "journal.>", "url": "http://" + freeAddr(t) + "/r/" + refused, "start": "first"}
	bolt.create(refusing)
	f := c.streamIn()
	waitFor(t, 10*time.Second, refused+" to fail twice", func() bool { return bolt.get(refused).Attempts >= 2 })
	killed := time.Now()
	bolt.kill9()
	t.Logf("the bolt bridge killed with %d messages published, %d acknowledged to every registration", f.published(), c.delivered())

	store := filepath.Join(bolt.dataDir, "bridge.db")
	migrate := func() string {
		t.Helper()
		out, code := runBridge(t, []string{"NATS_URL="}, "migrate", "--from-bolt", store, "--nats-url", c.nats.urls(), "--kv-replicas", "3")
		if code != 0 {
			t.Fatalf("bridge migrate: exit %d: %s", code, out)
		}
		return strings.TrimSpace(out)
	}
	if out := migrate(); out != "copied 7, skipped 0, different 0" {
		t.Fatalf("bridge migrate printed %q, want every registration copied", out)
	}

	c.startBridges(3)
	b1 := c.bridges[0]
	if r := b1.get(refused); r.NextSeq != 1 || r.Attempts < 2 || r.State != "active" {
		t.Errorf("%s on the cluster: %+v, want it as the bolt store left it: nothing acknowledged, its failures counted", refused, r)
	}
	refusing["url"] = c.sink.url(refused)
	var answer map[string]any
	if code := b1.api("PUT", "/v1/registrations/"+refused, refusing, &answer); code != http.StatusOK {
		t.Fatalf("PUT %s: %d %v", refused, code, answer)
	}
	c.ids = append(c.ids, refused)
	c.checkRepeats("kill -9 of the bolt bridge, then migrate", c.finish(f), killed)
	if out := migrate(); !strings.HasPrefix(out, "copied 0,") {
		t.Errorf("a second migrate printed %q, want nothing copied", out)
	} else {
		t.Logf("a second migrate: %s", out)
	}
}

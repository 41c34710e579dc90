package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Registrations created through one bridge while the shards move under
// them — bridges joining, one leaving, the split following the
// registrations' weights as they are created — each receive every
// message published after: none is left waiting for a next message on
// its filter. The fan-out of the cluster benchmark once left a whole
// registration's share undelivered after such creates: its owner's kv
// store took a read that found no key yet for a delete and dropped the
// new row from its index (fixed in the kv store's read). With that read
// restored, this drill failed 1 run in 5: a registration owned by b2
// received 0 of 10.
func TestClusterCreatesWhileSharesMove(t *testing.T) {
	c := newBareCluster(t)
	c.launchBridge()
	c.awaitReady(0)
	b1 := c.bridges[0]
	cr := startCreator(t, b1.daemon, c.sink, "journal.fan", 8)
	c.launchBridge()
	c.launchBridge()
	c.awaitReady(1)
	c.awaitReady(2)
	c.launchBridge()
	c.awaitReady(3)
	time.Sleep(clusterTTL)
	if code := c.bridges[3].stop(); code != 0 {
		t.Fatalf("b4 exited %d on SIGTERM", code)
	}
	c.ids = cr.stop(t)
	owners := c.waitOwned(b1.daemon, 2*clusterTTL, c.namesBut(3, -1))
	t.Logf("%d registrations created while shares moved (%.0f shard takeovers); owners %v",
		len(c.ids), c.takeovers(), shares(owners))
	const msgs = 10
	for _, b := range seqBodies("fan", 0, msgs) {
		if err := publishOnce(c.js, "journal.fan", b); err != nil {
			t.Fatal(err)
		}
	}
	// A registration left waiting shows here: nothing wakes it again.
	c.waitDelivered(4*clusterTTL+10*time.Second, msgs)
	c.checkDelivered()
}

// takeovers is the shard takeovers of the bridges running now.
func (c *bridgeCluster) takeovers() float64 {
	n := 0.0
	for _, b := range c.bridges {
		if b.running() {
			n += metricSum(c.t, b.admin, "bridge_lease_takeovers_total")
		}
	}
	return n
}

// creator creates registrations through one bridge from several clients
// at once until stopped, each starting at the next message published.
type creator struct {
	quit chan struct{}
	wg   sync.WaitGroup
	mu   sync.Mutex
	ids  []string
	err  error
}

func startCreator(t *testing.T, d *daemon, sink *chaosSink, subject string, clients int) *creator {
	cr := &creator{quit: make(chan struct{})}
	token := d.token()
	var next atomic.Int64
	for range clients {
		cr.wg.Go(func() {
			for {
				select {
				case <-cr.quit:
					return
				default:
				}
				id := fmt.Sprintf("fan-%04d", next.Add(1))
				body, _ := json.Marshal(map[string]any{"id": id, "namespace": "outbox", "subject": subject,
					"url": sink.url(id), "start": "new"})
				if err := createVia(d.admin, token, body); err != nil {
					cr.mu.Lock()
					cr.err = fmt.Errorf("create %s: %w", id, err)
					cr.mu.Unlock()
					return
				}
				cr.mu.Lock()
				cr.ids = append(cr.ids, id)
				cr.mu.Unlock()
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
	t.Cleanup(func() { cr.halt() })
	return cr
}

func (cr *creator) halt() {
	select {
	case <-cr.quit:
	default:
		close(cr.quit)
	}
	cr.wg.Wait()
}

// stop ends the creates and returns the ids created.
func (cr *creator) stop(t *testing.T) []string {
	t.Helper()
	cr.halt()
	if cr.err != nil {
		t.Fatal(cr.err)
	}
	return cr.ids
}

func createVia(admin, token string, body []byte) error {
	req, err := http.NewRequest(http.MethodPost, "http://"+admin+"/v1/registrations", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("answered %d", resp.StatusCode)
	}
	return nil
}

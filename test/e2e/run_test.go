package e2e

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

func seqBodies(prefix string, from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, prefix+strconv.Itoa(i))
	}
	return out
}

// The README's quick start, as a user runs it: no flags but a data dir
// and ports, the CLI to register, a NATS client to publish, SIGTERM to
// stop, and a clean restart that repeats nothing.
func TestEmbeddedQuickStartAndCleanRestart(t *testing.T) {
	d := newDaemon(t)
	d.start()
	s := newSink(t)
	out, code := d.cli("register", "--id", "orders", "--namespace", "outbox",
		"--subject", "journal.orders.>", "--url", s.URL+"/hook", "--secret", secret)
	if code != 0 {
		t.Fatalf("register exit %d: %s", code, out)
	}
	pub := newPublisher(t, "nats://"+d.natsAddr)
	for _, b := range seqBodies("m", 0, 50) {
		pub.publish(t, "journal.orders.eu", b)
	}
	waitFor(t, 15*time.Second, "50 deliveries", func() bool { return len(s.bodies()) >= 50 })
	if got := s.bodies(); !slices.Equal(got, seqBodies("m", 0, 50)) {
		t.Fatalf("deliveries out of order or repeated: %q", got)
	}
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	first := s.requests()[0]
	if err := wh.Verify([]byte(first.body), first.header); err != nil {
		t.Fatalf("signature does not verify: %v", err)
	}
	if first.header.Get("Ce-Specversion") != "1.0" || first.header.Get("Ce-Id") != "JOURNAL-1" ||
		first.header.Get("Ce-Subject") != "journal.orders.eu" || first.header.Get("Webhook-Id") != "JOURNAL-1" {
		t.Fatalf("not the CloudEvent the contract promises: %v", first.header)
	}
	if code := d.stop(); code != 0 {
		t.Fatalf("SIGTERM exit code %d, want 0\n%s", code, d.logs.String())
	}

	d.start()
	for _, b := range seqBodies("m", 50, 60) {
		pub.publish(t, "journal.orders.eu", b)
	}
	waitFor(t, 15*time.Second, "60 deliveries", func() bool { return len(s.bodies()) >= 60 })
	time.Sleep(300 * time.Millisecond)
	if got := s.bodies(); !slices.Equal(got, seqBodies("m", 0, 60)) {
		t.Fatalf("after a clean restart: %d deliveries, want exactly 60 in order (nothing repeated)", len(got))
	}
	waitFor(t, 10*time.Second, "the row to count 60 deliveries", func() bool { return d.registration("orders")["delivered"] == float64(60) })
	reg := d.registration("orders")
	if reg["delivered"] != float64(60) || reg["state"] != "active" {
		t.Fatalf("registration %v", reg)
	}
	if code := d.stop(); code != 0 {
		t.Fatalf("SIGTERM exit code %d, want 0", code)
	}
}

// natsServer is an external nats-server process on a fixed port and
// store, so it can be killed and started again.
type natsServer struct {
	t    *testing.T
	addr string
	dir  string
	cmd  *exec.Cmd
}

func startNATSServer(t *testing.T) *natsServer {
	n := &natsServer{t: t, addr: freeAddr(t), dir: t.TempDir()}
	n.start()
	t.Cleanup(n.kill)
	return n
}

func (n *natsServer) start() {
	n.t.Helper()
	host, port, _ := strings.Cut(n.addr, ":")
	n.cmd = exec.Command(bin.natsServer, "-a", host, "-p", port, "-js", "-sd", n.dir)
	if err := n.cmd.Start(); err != nil {
		n.t.Fatal(err)
	}
	waitFor(n.t, 10*time.Second, "nats-server to listen", func() bool {
		c, err := (&netDialer{}).dial(n.addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

func (n *natsServer) kill() {
	if n.cmd != nil && n.cmd.ProcessState == nil {
		_ = n.cmd.Process.Kill()
		_ = n.cmd.Wait()
	}
}

func (n *natsServer) url() string { return "nats://" + n.addr }

func TestExternalNATSMissingStreamIsRefused(t *testing.T) {
	ns := startNATSServer(t)
	d := newDaemon(t, "--nats-url", ns.url())
	cmd := exec.Command(bin.bridge, d.args...)
	cmd.Env = append(os.Environ(), "NATS_URL=")
	out, err := cmd.CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit %v, want 1\n%s", err, out)
	}
	if !strings.Contains(string(out), "JOURNAL") || !strings.Contains(string(out), ns.addr) {
		t.Fatalf("the message must name the stream and the server:\n%s", out)
	}
}

// A NATS outage mid-delivery: /readyz turns 503 and back, and every
// message reaches the receiver in order.
func TestExternalNATSRestartMidDelivery(t *testing.T) {
	ns := startNATSServer(t)
	d := newDaemon(t, "--nats-url", ns.url(), "--create-stream")
	d.start()
	s := newSinkAnswering(t, func() int { time.Sleep(2 * time.Millisecond); return 200 })
	if out, code := d.cli("register", "--id", "r", "--namespace", "outbox", "--subject", "journal.>", "--url", s.URL, "--start", "first"); code != 0 {
		t.Fatalf("register: %s", out)
	}
	pub := newPublisher(t, ns.url())
	for _, b := range seqBodies("x", 0, 300) {
		pub.publish(t, "journal.a", b)
	}
	waitFor(t, 10*time.Second, "delivery to start", func() bool { return len(s.bodies()) > 0 })
	ns.kill()
	waitFor(t, 10*time.Second, "/readyz to say 503", func() bool { return readyz(d) == http.StatusServiceUnavailable })
	ns.start()
	waitFor(t, 20*time.Second, "/readyz to say 200", func() bool { return readyz(d) == http.StatusOK })
	for _, b := range seqBodies("x", 300, 400) {
		pub.publish(t, "journal.a", b)
	}
	waitFor(t, 30*time.Second, "400 deliveries", func() bool { return len(firstArrivals(s.bodies())) >= 400 })
	if got := firstArrivals(s.bodies()); !slices.Equal(got, seqBodies("x", 0, 400)) {
		t.Fatalf("first arrivals out of order: %q", got)
	}
	if code := d.stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

func readyz(d *daemon) int {
	resp, err := http.Get("http://" + d.admin + "/readyz")
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// firstArrivals drops repeats, keeping each body's first arrival: the
// order promise is about those.
func firstArrivals(bodies []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, b := range bodies {
		if !seen[b] {
			seen[b] = true
			out = append(out, b)
		}
	}
	return out
}

var _ = fmt.Sprint

// The heap floor reaches the running process: with the default floor the
// collector's percentage, as /metrics reports it, is above the one a
// bridge run with --heap-floor 0 keeps, because a fresh bridge's heap is
// far below 64 MiB.
func TestHeapFloorRaisesTheCollectorsPercentage(t *testing.T) {
	floored := newDaemon(t)
	floored.start()
	plain := newDaemon(t, "--heap-floor", "0")
	plain.start()
	const metric = "go_gc_gogc_percent"
	withFloor, without := metricSum(t, floored.admin, metric), metricSum(t, plain.admin, metric)
	if without <= 0 || withFloor <= without {
		t.Fatalf("%s: %v with the default heap floor, %v with --heap-floor 0; want the floor's above", metric, withFloor, without)
	}
	t.Logf("%s: %v with the default floor, %v without", metric, withFloor, without)
	if code := floored.stop(); code != 0 {
		t.Errorf("bridge with the floor exited %d", code)
	}
	if code := plain.stop(); code != 0 {
		t.Errorf("bridge without the floor exited %d", code)
	}
}

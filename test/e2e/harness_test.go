// Package e2e drives the real bridge binary the way a user does: flags,
// the CLI, the admin API, NATS clients and HTTP receivers on loopback.
//
// A failed test logs the tail of each bridge's output, which ends with
// every goroutine's stack when the bridge was still running (it is sent
// SIGQUIT); with BRIDGE_E2E_LOGS set to a directory, the whole output of
// each bridge and of each nats-server of a cluster is written there too.
// BRIDGE_SOAK=1 (make soak) runs the long drills; BRIDGE_E2E_RACE=1
// (make soak too) builds the bridge binary with the race detector, so a
// race in the bridge under the drills ends its run with the report and
// exit status 66. BRIDGE_E2E_LEASE_TTL (a duration, 2s by default) runs
// the cluster drills with that --lease-ttl and the bounds that follow.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetstream-bridge/bridge/internal/testutil"
)

// binaries built once for the whole package.
var bin struct {
	bridge, natsServer string
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "bridge-e2e-")
	if err != nil {
		panic(err)
	}
	bin.bridge = filepath.Join(dir, "bridge")
	bin.natsServer = filepath.Join(dir, "nats-server")
	bridgeBuild := []string{"build", "-o", bin.bridge, "../../cmd/bridge"}
	if os.Getenv("BRIDGE_E2E_RACE") != "" {
		bridgeBuild = slices.Insert(bridgeBuild, 1, "-race")
	}
	for _, b := range [][]string{
		bridgeBuild,
		{"build", "-o", bin.natsServer, "github.com/nats-io/nats-server/v2"},
	} {
		cmd := exec.Command("go", b...)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "building", b[len(b)-1], ":", err)
			os.Exit(1)
		}
	}
	// Every admin call, /metrics and /healthz read included, is bounded:
	// a bridge that stops answering (a deadlock) fails the drill, whose
	// cleanup then asks it for its goroutines, instead of hanging it
	// until the suite's timeout, which runs no cleanup.
	http.DefaultClient.Timeout = 30 * time.Second
	// Every admin call through it is checked against the OpenAPI document.
	validating, err := checkOpenAPI(http.DefaultTransport)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	http.DefaultClient.Transport = validating
	code := m.Run()
	if reportMismatches() && code == 0 {
		code = 1
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// freeAddr returns a loopback address nothing listens on right now,
// below the kernel's ephemeral range (testutil.FreePorts): a port the
// kernel chose for a listener here was taken, before the bridge could
// listen on it, by one of the many connections the tests of other
// packages dial at the same time.
func freeAddr(t *testing.T) string {
	t.Helper()
	return fmt.Sprintf("127.0.0.1:%d", testutil.FreePorts(t, 1)[0])
}

// daemon is one `bridge run` process.
type daemon struct {
	t        *testing.T
	dataDir  string
	natsAddr string
	admin    string
	args     []string
	cmd      *exec.Cmd
	logs     *testutil.SyncBuffer
	done     chan error
}

// newDaemon prepares a bridge on an embedded server in a fresh data dir;
// extra flags are appended.
func newDaemon(t *testing.T, extra ...string) *daemon {
	d := &daemon{t: t, dataDir: t.TempDir(), natsAddr: freeAddr(t), admin: freeAddr(t)}
	d.args = append([]string{"run", "--data-dir", d.dataDir, "--embedded-listen", d.natsAddr,
		"--admin-listen", d.admin}, extra...)
	return d
}

func (d *daemon) start() {
	d.t.Helper()
	d.launch()
	d.waitHealthy(http.DefaultClient, "http://"+d.admin)
}

// launch starts the process without waiting for it to answer.
func (d *daemon) launch() {
	d.t.Helper()
	d.logs = &testutil.SyncBuffer{}
	d.cmd = exec.Command(bin.bridge, d.args...)
	d.cmd.Stdout, d.cmd.Stderr = d.logs, d.logs
	d.cmd.Env = append(os.Environ(), "NATS_URL=")
	if err := d.cmd.Start(); err != nil {
		d.t.Fatal(err)
	}
	d.done = make(chan error, 1)
	go func() { d.done <- d.cmd.Wait() }()
	logs := d.logs
	d.t.Cleanup(func() {
		if d.cmd.ProcessState == nil {
			_ = d.cmd.Process.Kill()
			<-d.done
		}
		checkNoRace(d.t, logs.String())
		if d.t.Failed() {
			d.t.Logf("bridge logs:\n%s", d.logs.String())
		}
	})
}

// checkNoRace fails the test when a bridge's output holds a report of
// the race detector (a binary built with BRIDGE_E2E_RACE).
func checkNoRace(t *testing.T, out string) {
	t.Helper()
	const mark, rule = "WARNING: DATA RACE", "=================="
	i := strings.Index(out, mark)
	if i < 0 {
		return
	}
	report := out[i:]
	if end := strings.Index(report[len(mark):], rule); end >= 0 {
		report = report[:len(mark)+end]
	}
	t.Errorf("the bridge reported a data race (%d reports in its output); the first:\n%s", strings.Count(out, mark), report[:min(len(report), 16<<10)])
}

// waitHealthy waits until the admin API at base answers /healthz to c.
func (d *daemon) waitHealthy(c *http.Client, base string) {
	d.t.Helper()
	waitFor(d.t, 20*time.Second, "the admin API to answer /healthz", func() bool {
		resp, err := c.Get(base + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
}

// stop sends SIGTERM and returns the exit code.
func (d *daemon) stop() int {
	d.t.Helper()
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(20 * time.Second):
		d.t.Fatalf("bridge did not stop within 20 s of SIGTERM\n%s", d.logs.String())
	}
	return d.cmd.ProcessState.ExitCode()
}

// cli runs a bridge subcommand against this daemon's admin API.
func (d *daemon) cli(args ...string) (string, int) {
	d.t.Helper()
	full := append([]string{args[0], "--admin-url", "http://" + d.admin, "--data-dir", d.dataDir}, args[1:]...)
	return runBridge(d.t, []string{"BRIDGE_ADMIN_TOKEN="}, full...)
}

// runBridge runs the binary with args and env added to the test's
// environment, and returns what it printed and its exit code.
func runBridge(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(bin.bridge, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.Env = append(os.Environ(), env...)
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), code
}

func (d *daemon) token() string {
	b, err := os.ReadFile(filepath.Join(d.dataDir, "admin-token"))
	if err != nil {
		d.t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// api calls the admin API with the daemon's token and decodes the answer.
func (d *daemon) api(method, path string, body any, out any) int {
	d.t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, "http://"+d.admin+path, r)
	req.Header.Set("Authorization", "Bearer "+d.token())
	resp, err := http.DefaultClient.Do(withTest(d.t, req))
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil {
		_ = json.NewDecoder(resp.Body).Decode(out)
	}
	return resp.StatusCode
}

func (d *daemon) registration(id string) map[string]any {
	d.t.Helper()
	var r map[string]any
	if code := d.api("GET", "/v1/registrations/"+id, nil, &r); code != 200 {
		d.t.Fatalf("GET registration %s: %d", id, code)
	}
	return r
}

// publisher connects to a NATS URL and publishes through JetStream.
type publisher struct {
	nc *nats.Conn
	js jetstream.JetStream
}

func newPublisher(t *testing.T, url string) *publisher {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return &publisher{nc: nc, js: js}
}

func (p *publisher) publish(t *testing.T, subject, data string) uint64 {
	t.Helper()
	var lastErr error
	for range 100 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		ack, err := p.js.Publish(ctx, subject, []byte(data))
		cancel()
		if err == nil {
			return ack.Sequence
		}
		lastErr = err
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("publish %s: %v", subject, lastErr)
	return 0
}

// sink is a loopback receiver recording every request.
type sink struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []received
	code func() int
}

type received struct {
	header http.Header
	body   string
}

func newSink(t *testing.T) *sink {
	return newSinkAnswering(t, func() int { return 204 })
}

// newSinkAnswering is a sink whose answer is code(), decided before it
// serves anything, so no request races the setting.
func newSinkAnswering(t *testing.T, code func() int) *sink {
	s := &sink{code: code}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		code := s.code()
		if code/100 == 2 {
			s.reqs = append(s.reqs, received{header: r.Header.Clone(), body: string(b)})
		}
		s.mu.Unlock()
		w.WriteHeader(code)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *sink) bodies() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, r := range s.reqs {
		out = append(out, r.body)
	}
	return out
}

func (s *sink) requests() []received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]received(nil), s.reqs...)
}

func waitFor(t *testing.T, timeout time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if ok() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("timed out after %v waiting for %s", timeout, what)
}

type netDialer struct{}

func (netDialer) dial(addr string) (net.Conn, error) {
	return net.DialTimeout("tcp", addr, 200*time.Millisecond)
}

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetstream-bridge/bridge/internal/testutil"
)

// chaosDaemon is a bridge that is killed and started again on the same data
// dir and ports. Unlike daemon.start, it registers its cleanup once and
// keeps the output of every run, so a failure after ten restarts shows the
// whole story.
type chaosDaemon struct {
	*daemon
	all     *testutil.SyncBuffer
	runs    int
	exited  chan struct{}
	waitErr error
}

func newChaosDaemon(t *testing.T, extra ...string) *chaosDaemon {
	c := &chaosDaemon{daemon: newDaemon(t, extra...), all: &testutil.SyncBuffer{}}
	t.Cleanup(func() {
		if c.running() {
			c.quit(t.Failed())
		}
		checkNoRace(t, c.all.String())
		if t.Failed() {
			if dir := os.Getenv("BRIDGE_E2E_LOGS"); dir != "" {
				_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("bridge-%d.log", c.cmd.Process.Pid)), []byte(c.all.String()), 0o644)
			}
			t.Logf("bridge output of every run (last 64 KiB):\n%s", lastBytes(c.all.String(), 64<<10))
		}
	})
	return c
}

// useDataDir moves the daemon, before its first start, to another data
// dir (one on a filesystem the test controls).
func (c *chaosDaemon) useDataDir(dir string) {
	c.t.Helper()
	i := slices.Index(c.args, "--data-dir")
	if i < 0 || i+1 >= len(c.args) {
		c.t.Fatalf("no --data-dir in %v", c.args)
	}
	c.args[i+1], c.dataDir = dir, dir
}

// quit ends a bridge the test leaves running. After a failure it is
// asked with SIGQUIT first, so its output ends with every goroutine's
// stack: what a silent bridge was waiting on.
func (c *chaosDaemon) quit(dump bool) {
	if dump && c.cmd.Process.Signal(syscall.SIGQUIT) == nil {
		select {
		case <-c.exited:
			return
		case <-time.After(5 * time.Second):
		}
	}
	_ = c.cmd.Process.Kill()
	<-c.exited
}

func (c *chaosDaemon) running() bool {
	if c.exited == nil {
		return false
	}
	select {
	case <-c.exited:
		return false
	default:
		return true
	}
}

// launch starts `bridge run` without waiting for it.
func (c *chaosDaemon) launch() {
	c.t.Helper()
	c.runs++
	fmt.Fprintf(c.all, "===== run %d =====\n", c.runs)
	c.logs = &testutil.SyncBuffer{}
	cmd := exec.Command(bin.bridge, c.args...)
	out := io.MultiWriter(c.logs, c.all)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = append(os.Environ(), "NATS_URL=")
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.cmd = cmd
	exited := make(chan struct{})
	c.exited = exited
	go func() {
		err := cmd.Wait()
		c.waitErr = err
		close(exited)
	}()
}

// start launches the bridge and waits until its admin API answers. A run
// that exits before that fails the test at once with its output.
func (c *chaosDaemon) start() {
	c.t.Helper()
	c.launch()
	c.awaitAPI()
}

// awaitAPI waits until the launched bridge's admin API answers, failing
// the test at once if the run exits first.
func (c *chaosDaemon) awaitAPI() {
	c.t.Helper()
	exited := c.exited
	waitFor(c.t, 30*time.Second, "the admin API to answer /healthz", func() bool {
		select {
		case <-exited:
			c.t.Fatalf("bridge run %d exited while starting: %v\n%s", c.runs, c.waitErr, c.logs.String())
		default:
		}
		return healthzStatus(c.admin) == http.StatusOK
	})
}

// kill9 ends the bridge with SIGKILL: no handler runs, no cursor is
// flushed, the file lock dies with the process.
func (c *chaosDaemon) kill9() {
	c.t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		c.t.Fatalf("kill -9: %v", err)
	}
	select {
	case <-c.exited:
	case <-time.After(20 * time.Second):
		c.t.Fatal("bridge still running 20 s after SIGKILL")
	}
	fmt.Fprintf(c.all, "===== run %d killed with SIGKILL =====\n", c.runs)
}

// stop sends SIGTERM and returns the exit code.
func (c *chaosDaemon) stop() int {
	c.t.Helper()
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
	case <-time.After(20 * time.Second):
		c.t.Fatalf("bridge did not stop within 20 s of SIGTERM\n%s", c.logs.String())
	}
	return c.cmd.ProcessState.ExitCode()
}

// registrations lists every registration through the CLI, which also
// proves the store the last run left behind opens and reads cleanly.
func (c *chaosDaemon) registrations() []apiRegistration {
	c.t.Helper()
	out, code := c.cli("list", "--json", "--limit", "1000")
	if code != 0 {
		c.t.Fatalf("bridge list exit %d after run %d:\n%s", code, c.runs, out)
	}
	var page struct {
		Registrations []apiRegistration `json:"registrations"`
	}
	if err := json.Unmarshal([]byte(out), &page); err != nil {
		c.t.Fatalf("bridge list --json: %v\n%s", err, out)
	}
	return page.Registrations
}

// apiRegistration is the part of the API's registration the tests read.
type apiRegistration struct {
	ID        string `json:"id"`
	Namespace string `json:"namespace"`
	State     string `json:"state"`
	NextSeq   uint64 `json:"nextSeq"`
	Attempts  uint32 `json:"attempts"`
	LastError string `json:"lastError"`
	Delivered uint64 `json:"delivered"`
}

func (c *chaosDaemon) get(id string) apiRegistration {
	c.t.Helper()
	var r apiRegistration
	if code := c.api("GET", "/v1/registrations/"+id, nil, &r); code != http.StatusOK {
		c.t.Fatalf("GET registration %s: %d", id, code)
	}
	return r
}

// create registers through the API and fails the test unless it is 201.
func (c *chaosDaemon) create(body map[string]any) {
	c.t.Helper()
	var answer map[string]any
	if code := c.api("POST", "/v1/registrations", body, &answer); code != http.StatusCreated {
		c.t.Fatalf("create %v: %d %v", body["id"], code, answer)
	}
}

func healthzStatus(admin string) int {
	resp, err := http.Get("http://" + admin + "/healthz")
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// metricSum sums the samples of a Prometheus counter or gauge whose labels
// contain every label given ("namespace=\"outbox\""), as /metrics shows it.
func metricSum(t *testing.T, admin, name string, labels ...string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
lines:
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, name)
		if !ok || rest == "" || (rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		for _, l := range labels {
			if !strings.Contains(rest, l) {
				continue lines
			}
		}
		v, err := strconv.ParseFloat(rest[strings.LastIndexByte(rest, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		sum += v
	}
	return sum
}

// runToExit runs `bridge run` with args and returns its output and exit
// code; a run that does not exit within 30 s is a hang and fails the test.
func runToExit(t *testing.T, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin.bridge, append([]string{"run"}, args...)...)
	cmd.Env = append(os.Environ(), "NATS_URL=")
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("bridge run %v did not exit within 30 s (a hang):\n%s", args, out)
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), code
}

// assertCleanFailure checks what an operator sees when the bridge refuses
// to start: exit 1, the message naming what is wrong, and no Go panic or
// goroutine dump.
func assertCleanFailure(t *testing.T, out string, code int, mustContain ...string) {
	t.Helper()
	if problems := cleanFailureProblems(out, code, mustContain...); len(problems) > 0 {
		t.Errorf("%s\noutput:\n%s", strings.Join(problems, "; "), out)
	}
}

func cleanFailureProblems(out string, code int, mustContain ...string) []string {
	var problems []string
	if code != 1 {
		problems = append(problems, fmt.Sprintf("exit code %d, want 1", code))
	}
	for _, s := range mustContain {
		if !strings.Contains(out, s) {
			problems = append(problems, fmt.Sprintf("output does not mention %q", s))
		}
	}
	if strings.Contains(out, "panic:") || strings.Contains(out, "goroutine ") {
		problems = append(problems, "output holds a panic or a goroutine dump")
	}
	return problems
}

func lastBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// chaosSink is a receiver that is slow and sometimes fails, like a real
// one under load. Registrations POST to /r/<id>; it records, per
// registration, the webhook-id and body of every request it answered 2xx,
// in arrival order, when it came and was answered, and which bridge sent
// it when told the bridges' processes (sentBy). It can also hold the next
// request inside the handler, so a test can kill the bridge with a POST
// certainly in flight.
type chaosSink struct {
	*httptest.Server

	mu       sync.Mutex
	rng      *rand.Rand
	minDelay time.Duration
	maxDelay time.Duration
	failRate float64
	failures int
	acked    map[string][]chaosAck // registration → acknowledged requests in arrival order
	senders  map[int]string        // pid → name of the processes that POST
	holdNext bool
	held     chan struct{} // receives once a request is held
	release  chan struct{} // closed to let held requests answer
}

type chaosAck struct {
	id       string    // webhook-id
	body     string    //
	at       time.Time // the request came (its header was read)
	answered time.Time // recorded, just before the answer
	from     string    // the sender's name, "" when not known
}

// newChaosSink answers each POST after a delay between minDelay and
// maxDelay, and fails it with probability failRate.
func newChaosSink(t *testing.T, seed uint64, minDelay, maxDelay time.Duration, failRate float64) *chaosSink {
	s := &chaosSink{
		rng:      rand.New(rand.NewPCG(seed, 0x5eed)),
		minDelay: minDelay,
		maxDelay: maxDelay,
		failRate: failRate,
		acked:    make(map[string][]chaosAck),
		senders:  make(map[int]string),
		held:     make(chan struct{}, 1),
		release:  make(chan struct{}),
	}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.Config.ConnContext = func(ctx context.Context, _ net.Conn) context.Context {
		return context.WithValue(ctx, connSenderKey{}, &connSender{})
	}
	s.Start()
	t.Cleanup(func() {
		s.releaseHeld()
		s.Close()
	})
	return s
}

// sentBy tells the sink that process pid is the bridge called name.
func (s *chaosSink) sentBy(pid int, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.senders[pid] = name
}

// connSender is, for one connection the sink accepted, the name of the
// process at its other end once found.
type connSender struct {
	mu   sync.Mutex
	name string
}

type connSenderKey struct{}

// sender names the bridge that sent r, "" when it is none the sink was
// told of. It is looked up once per connection.
func (s *chaosSink) sender(r *http.Request) string {
	c, _ := r.Context().Value(connSenderKey{}).(*connSender)
	if c == nil {
		return ""
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.name == "" {
		s.mu.Lock()
		pids := maps.Clone(s.senders)
		s.mu.Unlock()
		if len(pids) > 0 {
			c.name = processOf(r.RemoteAddr, s.Listener.Addr().String(), pids)
		}
	}
	return c.name
}

// processOf names, of the processes given (pid → name), the one that
// holds the client end of the loopback TCP connection from client to
// server: the socket /proc/net/tcp lists with those addresses, found by
// its inode among the process's file descriptors. "" when none does.
func processOf(client, server string, pids map[int]string) string {
	local, err1 := procTCPAddr(client)
	remote, err2 := procTCPAddr(server)
	table, err3 := os.ReadFile("/proc/net/tcp")
	if err1 != nil || err2 != nil || err3 != nil {
		return ""
	}
	inode := ""
	for line := range strings.Lines(string(table)) {
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
		if f := strings.Fields(line); len(f) > 9 && f[1] == local && f[2] == remote {
			inode = f[9]
			break
		}
	}
	if inode == "" {
		return ""
	}
	link := "socket:[" + inode + "]"
	for pid, name := range pids {
		dir := fmt.Sprintf("/proc/%d/fd", pid)
		fds, _ := os.ReadDir(dir)
		for _, fd := range fds {
			if l, _ := os.Readlink(filepath.Join(dir, fd.Name())); l == link {
				return name
			}
		}
	}
	return ""
}

// procTCPAddr writes an IPv4 address and port as /proc/net/tcp does:
// the address as a little-endian word, both in upper-case hex.
func procTCPAddr(addr string) (string, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil || !ap.Addr().Is4() {
		return "", fmt.Errorf("not an IPv4 address and port: %q", addr)
	}
	ip := ap.Addr().As4()
	return fmt.Sprintf("%02X%02X%02X%02X:%04X", ip[3], ip[2], ip[1], ip[0], ap.Port()), nil
}

func (s *chaosSink) serve(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return // the bridge went away mid-request
	}
	from := s.sender(r)
	s.mu.Lock()
	delay := s.minDelay + time.Duration(s.rng.Int64N(int64(s.maxDelay-s.minDelay)+1))
	fail := s.rng.Float64() < s.failRate
	s.mu.Unlock()
	time.Sleep(delay)

	// Taking the hold and saying so happen under one lock, so holdOne
	// never sees a signal from a request it stopped waiting for.
	s.mu.Lock()
	hold := s.holdNext
	release := s.release
	if hold {
		s.holdNext = false
		s.held <- struct{}{} // buffered and drained by holdOne: never blocks
	}
	s.mu.Unlock()
	if hold {
		<-release
		fail = false
	}
	if fail {
		s.mu.Lock()
		s.failures++
		s.mu.Unlock()
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	// Recorded before answering: the receiver has processed the message
	// whether or not the bridge lives to read the answer.
	reg := strings.TrimPrefix(r.URL.Path, "/r/")
	s.mu.Lock()
	s.acked[reg] = append(s.acked[reg], chaosAck{id: r.Header.Get("Webhook-Id"), body: string(body), at: at, answered: time.Now(), from: from})
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// holdOne makes the next request wait inside the handler and returns once
// one does, or false when none came within the timeout.
func (s *chaosSink) holdOne(timeout time.Duration) bool {
	s.mu.Lock()
	s.holdNext = true
	s.mu.Unlock()
	select {
	case <-s.held:
		return true
	case <-time.After(timeout):
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.holdNext = false
	select {
	case <-s.held:
		return true // one was held just as the wait ended
	default:
		return false
	}
}

// releaseHeld lets every held request answer.
func (s *chaosSink) releaseHeld() {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.release)
	s.release = make(chan struct{})
}

func (s *chaosSink) url(id string) string { return s.URL + "/r/" + id }

func (s *chaosSink) acks(id string) []chaosAck {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]chaosAck(nil), s.acked[id]...)
}

// ackedAround counts registration id's POSTs acknowledged in the window
// before at, and those that came before at and were answered after it:
// what a takeover at that moment may repeat.
func (s *chaosSink) ackedAround(id string, at time.Time, window time.Duration) (acked, open int) {
	for _, a := range s.acks(id) {
		switch {
		case a.at.After(at):
		case a.answered.After(at):
			open++
		case a.answered.After(at.Add(-window)):
			acked++
		}
	}
	return acked, open
}

func (s *chaosSink) failed() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failures
}

// uniqueIDs counts the distinct webhook-ids acknowledged for id.
func (s *chaosSink) uniqueIDs(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := make(map[string]bool, len(s.acked[id]))
	for _, a := range s.acked[id] {
		seen[a.id] = true
	}
	return len(seen)
}

// storedMsg is one message of the journal stream as the server keeps it.
type storedMsg struct {
	seq     uint64
	subject string
	data    []byte
}

// streamContents reads every message the stream holds, in order: the
// ground truth a delivery check compares against, whatever publishers
// believe they sent.
func streamContents(t *testing.T, js jetstream.JetStream, stream string) []storedMsg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatalf("stream %s: %v", stream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatalf("stream info: %v", err)
	}
	last := info.State.LastSeq
	if info.State.Msgs == 0 {
		return nil
	}
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy, MaxResetAttempts: 3})
	if err != nil {
		t.Fatalf("ordered consumer: %v", err)
	}
	// A cluster that just got a server back may answer a fetch with no
	// responders, or not at all: the ordered consumer asks again from
	// where it got to, until the minute is up.
	var out []storedMsg
	var lastErr error
	retry := func(err error) {
		lastErr = err
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
	for ctx.Err() == nil {
		batch, err := cons.Fetch(1000, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			retry(err)
			continue
		}
		for m := range batch.Messages() {
			md, err := m.Metadata()
			if err != nil {
				t.Fatalf("message metadata: %v", err)
			}
			if n := len(out); n > 0 && md.Sequence.Stream <= out[n-1].seq {
				continue // again, after a retried fetch
			}
			out = append(out, storedMsg{seq: md.Sequence.Stream, subject: m.Subject(), data: m.Data()})
			if md.Sequence.Stream >= last {
				return out
			}
		}
		if err := batch.Error(); err != nil {
			retry(err)
		}
	}
	t.Fatalf("reading the stream: %d of %d messages read in a minute; last error: %v", len(out), info.State.Msgs, lastErr)
	return nil
}

// subjectMatches is NATS subject matching: '*' one token, '>' the rest.
func subjectMatches(filter, subject string) bool {
	f, s := strings.Split(filter, "."), strings.Split(subject, ".")
	for i, tok := range f {
		switch {
		case tok == ">":
			return len(s) > i
		case i >= len(s):
			return false
		case tok != "*" && tok != s[i]:
			return false
		}
	}
	return len(f) == len(s)
}

// jsonEqual compares two JSON documents by value.
func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// a2aEvents splits an A2A journal message into the StreamResponses it
// holds: one object, or an array of them.
func a2aEvents(data []byte) ([]json.RawMessage, error) {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '[' {
		var evs []json.RawMessage
		err := json.Unmarshal(data, &evs)
		return evs, err
	}
	return []json.RawMessage{data}, nil
}

// mountTmpfs mounts a tmpfs of the given size (mount's syntax, "4m") on a
// fresh directory, unmounted when the test ends. It skips the test where
// mounting is not permitted.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir, err := tryMountTmpfs(t, size)
	if err != nil {
		t.Skipf("cannot mount a small filesystem here (needs root or CAP_SYS_ADMIN): %v", err)
	}
	return dir
}

// tryMountTmpfs is mountTmpfs that reports a refused mount instead of
// skipping.
func tryMountTmpfs(t *testing.T, size string) (string, error) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "fs")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0700", "tmpfs", dir).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%v %s", err, bytes.TrimSpace(out))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			// A process the test failed to end still holds it; detach so
			// the temp dir can go.
			if out2, err2 := exec.Command("umount", "-l", dir).CombinedOutput(); err2 != nil {
				t.Errorf("umount %s: %v %s / %v %s", dir, err, out, err2, out2)
			}
		}
	})
	return dir, nil
}

// remount changes the options of a mount made by mountTmpfs ("ro", "rw").
func remount(t *testing.T, dir, opts string) {
	t.Helper()
	if out, err := exec.Command("mount", "-o", "remount,"+opts, dir).CombinedOutput(); err != nil {
		t.Fatalf("remount %s %s: %v %s", dir, opts, err, out)
	}
}

// fillDisk writes a file in dir until the filesystem is full and returns
// its path.
func fillDisk(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := bytes.Repeat([]byte{0xff}, 4096)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !strings.Contains(err.Error(), "no space left") {
				t.Fatalf("filling %s: %v", dir, err)
			}
			return path
		}
	}
}

// gateSink is a receiver that can be taken down. While down it answers 503
// with Retry-After: 1, so the bridge retries every second rather than
// backing off further, and the tests stay short.
type gateSink struct {
	*httptest.Server
	down  atomic.Bool
	delay atomic.Int64 // think time per request, in nanoseconds
	mu    sync.Mutex
	got   []string
}

func newGateSink(t *testing.T) *gateSink {
	s := &gateSink{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		time.Sleep(time.Duration(s.delay.Load()))
		if s.down.Load() {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		s.mu.Lock()
		s.got = append(s.got, string(body))
		s.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(s.Close)
	return s
}

// bodies are the bodies answered 2xx, in arrival order.
func (s *gateSink) bodies() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.got...)
}

// Package bridgetest runs the real bridge inside a Go test: an embedded
// nats-server with JetStream on a free loopback port, and the daemon of
// `bridge run` in the same process, both over fresh temporary directories
// and both stopped when the test ends, leaving no goroutine behind.
//
// A test publishes to the journal with Env.Publish, registers webhooks
// through the admin API with Env.Register, and points them at recording
// receivers (Env.Receiver): loopback HTTP servers that keep every POST,
// verify its Standard Webhooks signature, decode it as a CloudEvent or an
// A2A StreamResponse, answer with the statuses they are told to, and wait
// for N accepted deliveries.
//
//	func TestOrdersReachBilling(t *testing.T) {
//		env := bridgetest.New(t)
//		billing := env.Receiver(bridgetest.Response{Status: 503}, bridgetest.Response{Status: 204})
//		env.Register(billing.Outbox("journal.orders.>"))
//		env.Publish("journal.orders.1", []byte(`{"order":1}`))
//		got := billing.WaitFor(1)
//		bridgetest.AssertSigned(t, got)
//		if s := got[0].Event.Subject(); s != "journal.orders.1" {
//			t.Errorf("delivered subject %q", s)
//		}
//	}
//
// The bridge is the one `bridge run` runs (package daemon), configured as
// its defaults say except where a test needs otherwise: the admin API and
// the NATS server on ports the kernel picks, A2A receivers allowed on
// loopback http://, no heap floor (the process's collector is the test
// binary's), logs kept and shown only when the test fails. WithConfig
// changes any of it; WithCluster runs it on the kv store of a three-node
// cluster instead of a bbolt file beside one server.
//
// A wait in this package is bounded (WithWait, 30 s by default) so that a
// delivery that never comes fails the test with a message saying what
// arrived; it is not a statement about speed.
package bridgetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetstream-bridge/bridge/admin"
	"github.com/jetstream-bridge/bridge/daemon"
	"github.com/jetstream-bridge/bridge/internal/testutil"
)

// DefaultWait bounds every wait of an Env unless WithWait says otherwise.
const DefaultWait = 30 * time.Second

// stopWait bounds the daemon's clean stop: it finishes or abandons
// in-flight POSTs within 10 s, so longer is a hang.
const stopWait = 30 * time.Second

// Env is one bridge and its NATS server, for one test.
type Env struct {
	tb      testing.TB
	wait    time.Duration
	server  *server.Server        // nil WithCluster
	cluster *testutil.NATSCluster // nil without WithCluster
	nc      *nats.Conn
	js      jetstream.JetStream
	d       *daemon.Daemon
	stream  string
	admin   *Client
	logs    *logBuffer

	closeOnce sync.Once
	stops     []func() // run last first by close
}

// Option changes how New starts an Env.
type Option func(*settings)

type settings struct {
	wait      time.Duration
	configure []func(*daemon.Config)
	mark      func(phase string) // the benchmark's clock; nil elsewhere
	cluster   bool
}

// WithConfig lets f change the bridge's configuration before it starts,
// after bridgetest's own settings (see the package documentation). The
// NATS connection (Config.Conn) is the Env's server's: leave it.
func WithConfig(f func(*daemon.Config)) Option {
	return func(s *settings) { s.configure = append(s.configure, f) }
}

// WithCluster runs the bridge on a three-node JetStream cluster of
// in-process nats-servers joined by routes on loopback, with the kv store
// (Config.Store "kv") on buckets of three replicas, as several bridges
// share it in production; StopNode and RestartNode take a node away and
// bring it back. A cluster takes a few seconds to elect its leaders.
func WithCluster() Option {
	return func(s *settings) { s.cluster = true }
}

// WithWait bounds the Env's waits (receivers' WaitFor, the start and the
// stop of the bridge) at d instead of DefaultWait.
func WithWait(d time.Duration) Option {
	return func(s *settings) { s.wait = d }
}

// New starts a nats-server with JetStream and a bridge on it, and stops
// both through tb.Cleanup. It fails the test if either does not start.
func New(tb testing.TB, opts ...Option) *Env {
	tb.Helper()
	s := settings{wait: DefaultWait, mark: func(string) {}}
	for _, o := range opts {
		o(&s)
	}
	e := &Env{tb: tb, wait: s.wait, logs: &logBuffer{}}
	// The directories first: tb removes them after close, which runs
	// cleanups registered after them first.
	storeDir, dataDir := tb.TempDir(), tb.TempDir()
	if s.cluster {
		e.cluster = testutil.Cluster(tb, 3) // stopped by tb after close
		s.configure = append([]func(*daemon.Config){func(c *daemon.Config) {
			c.Store, c.KVReplicas, c.Instance = "kv", 3, "bridgetest"
		}}, s.configure...)
	}
	tb.Cleanup(e.close)
	if e.cluster == nil {
		e.server = startServer(tb, storeDir)
		e.onClose(e.stopServer)
	}
	e.nc = e.connect("bridgetest")
	e.onClose(e.nc.Close)
	js, err := jetstream.New(e.nc)
	if err != nil {
		tb.Fatalf("bridgetest: JetStream: %v", err)
	}
	e.js = js
	s.mark("nats-server")
	e.startDaemon(dataDir, s.configure)
	s.mark("bridge")
	return e
}

// onClose adds f to what close runs.
func (e *Env) onClose(f func()) { e.stops = append(e.stops, f) }

// close stops the bridge, then the server; it runs once.
func (e *Env) close() {
	e.closeOnce.Do(func() {
		for i := len(e.stops) - 1; i >= 0; i-- {
			e.stops[i]()
		}
	})
}

// startServer starts a nats-server with JetStream on a free loopback port,
// its store in a temporary directory.
func startServer(tb testing.TB, storeDir string) *server.Server {
	tb.Helper()
	ns, err := server.NewServer(&server.Options{
		Host:      "127.0.0.1",
		Port:      server.RANDOM_PORT,
		JetStream: true,
		StoreDir:  storeDir,
		NoLog:     true,
		NoSigs:    true,
	})
	if err != nil {
		tb.Fatalf("bridgetest: nats-server: %v", err)
	}
	// Start returns once the client listener is up, so the readiness
	// check that follows answers at its first look instead of after its
	// 25 ms poll.
	ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		ns.Shutdown()
		tb.Fatalf("bridgetest: nats-server did not accept connections within 10s")
	}
	return ns
}

func (e *Env) stopServer() {
	e.server.Shutdown()
	e.server.WaitForShutdown()
}

// connect opens a connection to the Env's server, in process, or to the
// cluster's nodes, following the cluster through the loss of one.
func (e *Env) connect(name string) *nats.Conn {
	e.tb.Helper()
	opts := []nats.Option{nats.Name(name)}
	if e.server != nil {
		opts = append(opts, nats.InProcessServer(e.server))
	} else {
		opts = append(opts, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	}
	nc, err := nats.Connect(e.NATSURL(), opts...)
	if err != nil {
		e.tb.Fatalf("bridgetest: connecting to %s: %v", e.NATSURL(), err)
	}
	return nc
}

// startDaemon runs the bridge until the test ends, on a connection of its
// own, and waits until its admin API listens.
func (e *Env) startDaemon(dataDir string, configure []func(*daemon.Config)) {
	e.tb.Helper()
	conn := e.connect("bridgetest daemon")
	cfg := daemon.DefaultConfig()
	cfg.DataDir = dataDir
	cfg.Conn = conn
	create := true
	cfg.CreateStream = &create
	cfg.AdminListen = "127.0.0.1:0"
	cfg.A2AAllowLoopback = true
	cfg.HeapFloor = 0
	cfg.Logger = slog.New(slog.NewTextHandler(e.logs, nil))
	for _, f := range configure {
		f(&cfg)
	}
	e.stream = cfg.Stream
	d, err := daemon.New(cfg)
	if err != nil {
		conn.Close()
		e.tb.Fatalf("bridgetest: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	stop := func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				e.tb.Errorf("bridgetest: the bridge stopped with an error: %v", err)
			}
		case <-time.After(max(e.wait, stopWait)):
			e.tb.Errorf("bridgetest: the bridge did not stop within %v", max(e.wait, stopWait))
		}
		conn.Close()
		if e.tb.Failed() {
			e.tb.Logf("bridgetest: the bridge's log:\n%s", e.logs.String())
		}
	}
	select {
	case <-d.Ready():
	case err := <-done:
		cancel()
		conn.Close()
		e.tb.Fatalf("bridgetest: the bridge did not start: %v\n%s", err, e.logs.String())
	case <-time.After(e.wait):
		stop()
		e.tb.Fatalf("bridgetest: the bridge was not ready within %v\n%s", e.wait, e.logs.String())
	}
	e.onClose(stop)
	e.d = d
	e.admin = &Client{URL: d.AdminURL(), Token: d.AdminToken(), HTTP: &http.Client{Timeout: e.wait}}
}

// NATSURL is the client URL of the Env's nats-server, for publishers and
// subscribers of the code under test; WithCluster, the URLs of every
// node, comma-separated, as nats.Connect takes them.
func (e *Env) NATSURL() string {
	if e.cluster != nil {
		return e.cluster.ClientURLs()
	}
	return e.server.ClientURL()
}

// StopNode shuts node i (0, 1 or 2) of a WithCluster Env down, keeping
// its store: the cluster keeps its quorum and the bridge keeps
// delivering. Streams led by the node elect another leader meanwhile,
// and a publish sent before one is elected goes unanswered: publish with
// a Nats-Msg-Id and send again on a timeout, as clients of a cluster do.
func (e *Env) StopNode(i int) {
	e.tb.Helper()
	e.mustCluster("StopNode")
	e.cluster.Stop(i)
}

// RestartNode brings node i back on its store and waits until the
// cluster is whole again.
func (e *Env) RestartNode(i int) {
	e.tb.Helper()
	e.mustCluster("RestartNode")
	e.cluster.Restart(i)
}

func (e *Env) mustCluster(what string) {
	e.tb.Helper()
	if e.cluster == nil {
		e.tb.Fatalf("bridgetest: %s needs an Env made WithCluster", what)
	}
}

// Conn is a connection to the Env's nats-server, closed when the test
// ends.
func (e *Env) Conn() *nats.Conn { return e.nc }

// JetStream is the JetStream API over Conn.
func (e *Env) JetStream() jetstream.JetStream { return e.js }

// Daemon is the bridge itself: its admin address, token and NATS URL.
func (e *Env) Daemon() *daemon.Daemon { return e.d }

// Admin is a client of the bridge's admin API.
func (e *Env) Admin() *Client { return e.admin }

// Publish publishes data on subject to the journal and returns its stream
// sequence once the stream stored it. headers are name, value pairs
// (Content-Type, Nats-Msg-Id, ce-type, …). It fails the test if the
// stream does not store the message.
func (e *Env) Publish(subject string, data []byte, headers ...string) uint64 {
	e.tb.Helper()
	if len(headers)%2 != 0 {
		e.tb.Fatalf("bridgetest: Publish(%q): headers come in name, value pairs, got %d strings", subject, len(headers))
	}
	msg := &nats.Msg{Subject: subject, Data: data, Header: nats.Header{}}
	for i := 0; i < len(headers); i += 2 {
		msg.Header.Add(headers[i], headers[i+1])
	}
	ctx, cancel := context.WithTimeout(context.Background(), e.wait)
	defer cancel()
	ack, err := e.js.PublishMsg(ctx, msg)
	if err != nil {
		e.tb.Fatalf("bridgetest: publishing to %s: %v", subject, err)
	}
	if ack.Stream != e.stream {
		e.tb.Fatalf("bridgetest: %s was stored in stream %s, not the journal %s", subject, ack.Stream, e.stream)
	}
	return ack.Sequence
}

// Registration is the body of POST /v1/registrations: a webhook
// destination reading one subject filter of the journal. Receiver.Outbox
// and Receiver.A2A fill one in for a receiver.
type Registration struct {
	ID              string            `json:"id,omitempty"`
	Namespace       string            `json:"namespace"`
	Subject         string            `json:"subject,omitempty"`
	TaskID          string            `json:"taskId,omitempty"`
	URL             string            `json:"url"`
	Format          string            `json:"format,omitempty"`
	DataContentType string            `json:"dataContentType,omitempty"`
	Secret          string            `json:"secret,omitempty"`
	Token           string            `json:"token,omitempty"`
	Headers         map[string]string `json:"headers,omitempty"`
	Batch           *admin.Batch      `json:"batch,omitempty"`
	// Ordering keeps order per key and many POSTs in flight (CONTRACT §12).
	Ordering *admin.Ordering `json:"ordering,omitempty"`
	// Start is "new" (the outbox default), "first", {"seq": N} or
	// {"time": RFC 3339}.
	Start any `json:"start,omitempty"`
}

// Register creates r through the admin API and returns the registration
// as the API answered it. It fails the test with the API's message when
// the API refuses it.
func (e *Env) Register(r Registration) admin.Registration {
	e.tb.Helper()
	var got admin.Registration
	status, err := e.admin.Do(context.Background(), http.MethodPost, "/v1/registrations", r, &got)
	if err != nil || status != http.StatusCreated {
		e.tb.Fatalf("bridgetest: registering %s %q: status %d: %v", r.Namespace, r.URL, status, err)
	}
	return got
}

// Eventually waits until cond holds, asking every few milliseconds, and
// fails the test saying what it waited for when it does not within the
// Env's wait. Call it from the test's own goroutine.
func (e *Env) Eventually(what string, cond func() bool) {
	e.tb.Helper()
	deadline := time.Now().Add(e.wait)
	for !cond() {
		if time.Now().After(deadline) {
			e.tb.Fatalf("bridgetest: %s: not within %v", what, e.wait)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Registration returns registration id as the admin API shows it; it fails
// the test when there is none.
func (e *Env) Registration(id string) admin.Registration {
	e.tb.Helper()
	var got admin.Registration
	status, err := e.admin.Do(context.Background(), http.MethodGet, "/v1/registrations/"+id, nil, &got)
	if err != nil || status != http.StatusOK {
		e.tb.Fatalf("bridgetest: registration %q: status %d: %v", id, status, err)
	}
	return got
}

// Client calls the bridge's admin API with its bearer token.
type Client struct {
	// URL is the API's base URL, e.g. http://127.0.0.1:40123.
	URL string
	// Token is the bearer token of /v1/*.
	Token string
	// HTTP makes the requests.
	HTTP *http.Client
}

// APIError is an answer of the admin API outside 2xx, with its message.
type APIError struct {
	// Status is the HTTP status of the answer.
	Status int
	// Message is the API's error message, or the body when it has none.
	Message string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("admin API answered %d: %s", e.Status, e.Message)
}

// Do sends body (JSON, when not nil) to method path and decodes a 2xx
// answer into out (when not nil). It returns the status; an answer
// outside 2xx is an *APIError with the API's message.
func (c *Client) Do(ctx context.Context, method, path string, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.URL, "/")+path, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error struct{ Message string } `json:"error"`
		}
		msg := strings.TrimSpace(string(data))
		if json.Unmarshal(data, &e) == nil && e.Error.Message != "" {
			msg = e.Error.Message
		}
		return resp.StatusCode, &APIError{Status: resp.StatusCode, Message: msg}
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, fmt.Errorf("decoding the answer of %s %s: %w", method, path, err)
		}
	}
	return resp.StatusCode, nil
}

// logBuffer keeps the bridge's log for a failing test, bounded so a
// long test cannot grow it without limit: past maxLog the oldest half
// goes.
type logBuffer struct {
	mu sync.Mutex
	b  []byte
}

const maxLog = 1 << 20

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b = append(l.b, p...)
	if len(l.b) > maxLog {
		l.b = append(l.b[:0], l.b[len(l.b)-maxLog/2:]...)
	}
	return len(p), nil
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.b)
}

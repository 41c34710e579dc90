package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// env is what every scenario shares: one nats-server in this process, one
// client connection, one sink, and the bridge binary built at start. The
// bridge and the baselines are processes of their own (baseline.go).
type env struct {
	dir     string
	bridge  string // path of the built binary
	ns      *server.Server
	natsURL string // what the bridges and the baseline consumer connect to
	nc      *nats.Conn
	js      jetstream.JetStream
	sink    *sink
}

func newEnv(ctx context.Context, dir string) (*env, error) {
	e := &env{dir: dir, bridge: filepath.Join(dir, "bridge")}
	logf("building the bridge binary")
	build := exec.CommandContext(ctx, "go", "build", "-o", e.bridge, "github.com/jetstream-bridge/bridge/cmd/bridge")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return nil, fmt.Errorf("building the bridge: %w", err)
	}

	ns, err := server.NewServer(&server.Options{
		ServerName: "bench",
		Host:       "127.0.0.1",
		Port:       server.RANDOM_PORT,
		JetStream:  true,
		StoreDir:   filepath.Join(dir, "nats"),
		NoSigs:     true,
		NoLog:      true,
	})
	if err != nil {
		return nil, fmt.Errorf("nats-server: %w", err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(15 * time.Second) {
		ns.Shutdown()
		return nil, errors.New("nats-server did not become ready")
	}
	e.ns, e.natsURL = ns, ns.ClientURL()
	if e.nc, err = nats.Connect(e.natsURL, nats.Name("bench")); err != nil {
		e.close()
		return nil, err
	}
	if e.js, err = jetstream.New(e.nc, jetstream.WithPublishAsyncMaxPending(4096)); err != nil {
		e.close()
		return nil, err
	}
	if e.sink, err = newSink(); err != nil {
		e.close()
		return nil, err
	}
	return e, nil
}

func (e *env) close() {
	if e.sink != nil {
		e.sink.close()
	}
	if e.nc != nil {
		e.nc.Close()
	}
	if e.ns != nil {
		e.ns.Shutdown()
		e.ns.WaitForShutdown()
	}
}

// stream is one scenario's journal: its own stream, so scenarios never see
// each other's messages and each can be deleted when done.
type stream struct {
	name, prefix string // "BENCH_S1", "bench.s1"
}

// streamConfig is the configuration a scenario's stream is created with.
// The bench creates every stream itself and the bridge is told never to
// (--create-stream=false), so a scenario measures the configuration it
// names and a missing stream fails the bridge's start instead of being
// replaced by one of the bridge's own making.
type streamConfig int

const (
	// allowDirect is what the bridge creates (journal.EnsureStream): file
	// storage, and allow_direct for its batched reads.
	allowDirect streamConfig = iota
	// defaultConfig is what jetstream.StreamConfig leaves it at, as many
	// users' streams are: file storage, no allow_direct, so the bridge
	// cannot read it through direct gets.
	defaultConfig
)

func (e *env) newStream(ctx context.Context, scenario string, config streamConfig) (stream, error) {
	s := stream{name: "BENCH_" + strings.ToUpper(scenario), prefix: "bench." + strings.ToLower(scenario)}
	_, err := e.js.CreateStream(ctx, jetstream.StreamConfig{
		Name:        s.name,
		Subjects:    []string{s.prefix + ".>"},
		Storage:     jetstream.FileStorage,
		AllowDirect: config == allowDirect,
	})
	if err != nil {
		return s, fmt.Errorf("creating stream %s: %w", s.name, err)
	}
	return s, nil
}

func (e *env) deleteStream(s stream) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := e.js.DeleteStream(ctx, s.name); err != nil {
		logf("deleting stream %s: %v", s.name, err)
	}
}

func (e *env) lastSeq(ctx context.Context, s stream) (uint64, error) {
	st, err := e.js.Stream(ctx, s.name)
	if err != nil {
		return 0, err
	}
	info, err := st.Info(ctx)
	if err != nil {
		return 0, err
	}
	return info.State.LastSeq, nil
}

// publishBacklog stores n messages of payload on subject as fast as the
// server takes them, and returns the first sequence.
func (e *env) publishBacklog(ctx context.Context, s stream, subject string, n int, payload []byte) (uint64, error) {
	return e.publishSpread(ctx, s, func(int) string { return subject }, n, payload)
}

// publishSpread is publishBacklog with message i on subjectOf(i).
func (e *env) publishSpread(ctx context.Context, s stream, subjectOf func(i int) string, n int, payload []byte) (uint64, error) {
	return e.publishEach(ctx, s, subjectOf, n, func(int) []byte { return payload })
}

// publishEach is publishSpread with message i's payload payloadOf(i).
func (e *env) publishEach(ctx context.Context, s stream, subjectOf func(i int) string, n int, payloadOf func(i int) []byte) (uint64, error) {
	first, err := e.lastSeq(ctx, s)
	if err != nil {
		return 0, err
	}
	first++
	start := time.Now()
	progress := time.NewTicker(5 * time.Second)
	defer progress.Stop()
	size := 0
	for i := range n {
		payload := payloadOf(i)
		size += len(payload)
		// A long stall wait: on a busy machine acknowledgements lag, and
		// the backlog must be stored whole, not fail half-way.
		if _, err := e.js.PublishAsync(subjectOf(i), payload, jetstream.WithStallWait(30*time.Second)); err != nil {
			return 0, fmt.Errorf("publishing message %d of %d: %w", i+1, n, err)
		}
		select {
		case <-progress.C:
			logf("  published %d of %d", i+1, n)
		default:
		}
	}
	select {
	case <-e.js.PublishAsyncComplete():
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(2 * time.Minute):
		return 0, errors.New("publish acknowledgements did not arrive within 2 minutes")
	}
	last, err := e.lastSeq(ctx, s)
	if err != nil {
		return 0, err
	}
	if got := last - first + 1; got != uint64(n) {
		return 0, fmt.Errorf("stream %s stored %d of %d messages", s.name, got, n)
	}
	el := time.Since(start)
	logf("  published %d × %d B in %v (%.0f msg/s)", n, size/max(n, 1), el.Round(time.Millisecond), float64(n)/el.Seconds())
	return first, nil
}

// stamped returns a payload of size bytes that starts with the current
// time in unix nanoseconds, for the sink to measure publish→arrival.
func stamped(size int) []byte {
	p := bytes.Repeat([]byte{'x'}, size)
	copy(p, strconv.AppendInt(nil, time.Now().UnixNano(), 10))
	p[19] = ' '
	return p
}

// bridgeProc is one `bridge run` process against the bench's nats-server.
type bridgeProc struct {
	cmd     *exec.Cmd
	dataDir string
	admin   string
	token   string
	logPath string
	started time.Time // just before the process was started
	ready   time.Time // when /readyz first answered 200
	done    chan struct{}
	exitErr error
}

// freeAddr returns a loopback address nothing listens on right now.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// newBridgeDir makes an empty data dir for a bridge, a new one on every
// call, so a scenario's rounds never share a store; a scenario may preload
// it before startBridge.
func (e *env) newBridgeDir(name string) (string, error) {
	return os.MkdirTemp(e.dir, "bridge-"+name+"-")
}

// startFresh starts a bridge on s with an empty store of its own; extra
// are flags of `bridge run` added to the bench's own.
func (e *env) startFresh(ctx context.Context, s stream, name string, extra ...string) (*bridgeProc, error) {
	dir, err := e.newBridgeDir(name)
	if err != nil {
		return nil, err
	}
	return e.startBridgeWithin(ctx, s, dir, 30*time.Second, extra...)
}

// startFreshEnv is startFresh with environ added to the bridge's
// environment, for the variables it reads that no flag sets
// (OTEL_EXPORTER_OTLP_ENDPOINT).
func (e *env) startFreshEnv(ctx context.Context, s stream, name string, environ []string, extra ...string) (*bridgeProc, error) {
	dir, err := e.newBridgeDir(name)
	if err != nil {
		return nil, err
	}
	return e.startBridgeEnv(ctx, s, dir, 30*time.Second, append(cleanEnv(), environ...), extra...)
}

// startBridge starts a bridge on s and dataDir and returns once its
// /readyz answers 200, or fails after 30 s.
func (e *env) startBridge(ctx context.Context, s stream, dataDir string) (*bridgeProc, error) {
	return e.startBridgeWithin(ctx, s, dataDir, 30*time.Second)
}

// startBridgeWithin is startBridge failing after limit, for a store large
// enough that opening it may take longer; extra are flags of `bridge run`
// added to the bench's own.
func (e *env) startBridgeWithin(ctx context.Context, s stream, dataDir string, limit time.Duration, extra ...string) (*bridgeProc, error) {
	return e.startBridgeEnv(ctx, s, dataDir, limit, cleanEnv(), extra...)
}

// startBridgeEnv is startBridgeWithin with environ as the bridge's whole
// environment.
func (e *env) startBridgeEnv(ctx context.Context, s stream, dataDir string, limit time.Duration, environ []string, extra ...string) (*bridgeProc, error) {
	admin, err := freeAddr()
	if err != nil {
		return nil, err
	}
	tok := make([]byte, 16)
	_, _ = rand.Read(tok)
	b := &bridgeProc{dataDir: dataDir, admin: admin, token: hex.EncodeToString(tok),
		logPath: filepath.Join(dataDir, "bridge.log"), done: make(chan struct{})}
	logFile, err := os.Create(b.logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	b.cmd = exec.Command(e.bridge, append([]string{"run",
		"--nats-url", e.natsURL,
		"--create-stream=false",
		"--stream", s.name,
		"--data-dir", dataDir,
		"--admin-listen", admin,
		"--admin-token", b.token,
		"--log-format", "json",
	}, extra...)...)
	b.cmd.Stdout, b.cmd.Stderr = logFile, logFile
	b.cmd.Env = environ
	b.cmd.SysProcAttr = childAttrs()
	b.started = time.Now()
	if err := b.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		b.exitErr = b.cmd.Wait()
		close(b.done)
	}()
	deadline := b.started.Add(limit)
	probe := &http.Client{Timeout: time.Second}
	for {
		if resp, err := probe.Get("http://" + admin + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				b.ready = time.Now()
				return b, nil
			}
		}
		select {
		case <-b.done:
			return nil, fmt.Errorf("bridge exited at start (%v); log: %s", b.exitErr, tail(b.logPath))
		case <-ctx.Done():
			b.stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			b.stop()
			return nil, fmt.Errorf("bridge's /readyz not 200 within %v of its start; log: %s", limit, tail(b.logPath))
		}
	}
}

// cleanEnv is this process's environment without the variables the bridge
// reads, so an operator's shell cannot change what is measured; only
// BRIDGE_DEBUG_LISTEN passes, to profile the bridge during a run, and
// BRIDGE_ATTEMPT_LOG, to measure what the attempt log costs. Every OTEL_*
// variable goes too: one left over from a shell would export spans from
// every bridge, and S1s's run without them would not be without them.
func cleanEnv() []string {
	return withoutBridgeVars(os.Environ())
}

func withoutBridgeVars(environ []string) []string {
	var out []string
	for _, kv := range environ {
		if strings.HasPrefix(kv, "BRIDGE_DEBUG_LISTEN=") || strings.HasPrefix(kv, "BRIDGE_ATTEMPT_LOG=") {
			out = append(out, kv)
			continue
		}
		if strings.HasPrefix(kv, "BRIDGE_") || strings.HasPrefix(kv, "NATS_URL=") || strings.HasPrefix(kv, "OTEL_") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// stop asks the bridge to shut down cleanly, and kills it after 30 s.
func (b *bridgeProc) stop() {
	if b == nil || b.cmd.Process == nil {
		return
	}
	select {
	case <-b.done:
		return
	default:
	}
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.done:
	case <-time.After(30 * time.Second):
		logf("bridge did not stop within 30 s of SIGTERM; killing it")
		_ = b.cmd.Process.Kill()
		<-b.done
	}
}

func (b *bridgeProc) pid() int { return b.cmd.Process.Pid }

// api calls the admin API; out, when not nil, receives the JSON answer.
func (b *bridgeProc) api(ctx context.Context, method, path string, body, out any) (int, error) {
	return b.apiVia(ctx, http.DefaultClient, method, path, body, out)
}

// apiVia is api through client, for callers that each hold a connection
// of their own.
func (b *bridgeProc) apiVia(ctx context.Context, client *http.Client, method, path string, body, out any) (int, error) {
	var r io.Reader
	if body != nil {
		j, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		r = bytes.NewReader(j)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+b.admin+path, r)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+b.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode/100 != 2 {
		return resp.StatusCode, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, bytes.TrimSpace(raw))
	}
	if out != nil {
		return resp.StatusCode, json.Unmarshal(raw, out)
	}
	return resp.StatusCode, nil
}

// metric reads one unlabelled series from the bridge's /metrics; ok is
// false when the bridge does not export it.
func (b *bridgeProc) metric(ctx context.Context, name string) (v float64, ok bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+b.admin+"/metrics", nil)
	if err != nil {
		return 0, false, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, false, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		rest, found := strings.CutPrefix(line, name+" ")
		if !found {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
		return v, err == nil, err
	}
	return 0, false, sc.Err()
}

// tail is the end of a log file, for error messages.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

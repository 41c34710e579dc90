package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/jetstream-bridge/bridge/admin"
	"github.com/jetstream-bridge/bridge/bridge"
	"github.com/jetstream-bridge/bridge/cursor"
	"github.com/jetstream-bridge/bridge/journal"
	"github.com/jetstream-bridge/bridge/netguard"
	"github.com/jetstream-bridge/bridge/projection/a2a"
	"github.com/jetstream-bridge/bridge/projection/cloudevents"
	"github.com/jetstream-bridge/bridge/webhook"
)

// serve runs the daemon until ctx ends. Everything it opens it closes, in
// the reverse order: workers, admin API, store, NATS, embedded server.
func serve(ctx context.Context, c *runConfig, log *slog.Logger) error {
	// What the environment and the flags name is loaded before anything
	// starts, so a bad file or variable fails the start at once.
	adminTLS, err := c.adminTLS.config(log)
	if err != nil {
		return err
	}
	tp, err := startTracing(ctx, os.Getenv, log)
	if err != nil {
		return err
	}
	defer stopTracing(tp, log)
	if err := os.MkdirAll(c.dataDir, 0o700); err != nil {
		return fmt.Errorf("creating data dir: %w", err)
	}
	// The bolt store first: a data dir held by another bridge must be
	// refused before this one starts a second server on it.
	var db *cursor.DB
	if c.store.store == "bolt" {
		if db, err = cursor.Open(filepath.Join(c.dataDir, "bridge.db")); err != nil {
			return err
		}
		defer db.Close()
	}

	url, embedded, err := startEmbedded(c, log)
	if err != nil {
		return err
	}
	if embedded != nil {
		defer func() {
			embedded.Shutdown()
			embedded.WaitForShutdown()
		}()
	}
	nc, err := connectNATS(c, url, embedded, log)
	if err != nil {
		return err
	}
	defer nc.Close()

	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	// The cluster before the journal: joining refuses a taken --instance
	// and more replicas than servers with the numbers.
	stores := boltSet(db)
	if db == nil {
		if stores, err = joinCluster(ctx, c, js, log); err != nil {
			return err
		}
	}
	defer stores.close()

	create := c.createStream.value
	if !c.createStream.set {
		create = embedded != nil
	}
	if err := ensureJournal(ctx, c, js, create, log); err != nil {
		return err
	}
	reader, err := journal.NewReader(nc, c.stream, journal.WithLogger(log))
	if err != nil {
		return err
	}
	defer reader.Close()
	attempts, err := openAttempts(ctx, c, nc, log)
	if err != nil {
		return err
	}
	defer closeAttempts(attempts)

	token, err := adminToken(c, log)
	if err != nil {
		return err
	}
	guard := netguard.NewPolicy(netguard.WithAllowHosts(splitList(c.a2aAllowHosts)...), netguard.WithAllowLoopbackHTTP(c.a2aAllowLoop))
	if c.a2aAllowLoop {
		log.Warn("A2A webhooks may use http:// on loopback addresses (--a2a-allow-loopback); never use this in production")
	}
	sender := webhook.NewSender(webhook.WithPolicy(guard), webhook.WithTimeout(c.requestTimeout), responseBody(attempts))
	defer sender.Close()

	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := bridge.NewMetrics(registry)
	registry.MustRegister(stores.metrics...)
	registry.MustRegister(newStoreCollector(stores.gauges, func(ctx context.Context) (uint64, error) {
		st, err := reader.Info(ctx)
		return st.LastSeq, err
	}))
	registerJournalMetrics(registry, reader)
	registry.MustRegister(attemptCollectors(attempts)...)

	viewer := admin.NewViewer(journalBounds{reader}, stores.cluster)
	announcer, err := openEvents(c, nc, stores.store, viewer, log)
	if err != nil {
		return err
	}
	defer closeEvents(announcer)
	registry.MustRegister(announcer.Collectors()...)

	daemon, err := newDaemon(c, stores, reader, sender, metrics, log, []bridge.DaemonOption{eventOptions(c, announcer)}, append(recording(attempts), tracing(tp)...)...)
	if err != nil {
		return err
	}
	stores.due.attach(daemon)

	api := admin.New(admin.Options{
		Store:    stores.store,
		Cluster:  stores.cluster,
		Journal:  journalBounds{reader},
		Guard:    guard,
		Waker:    daemon,
		Attempts: attemptReader(attempts),
		Resender: daemon,
		Events:   announcer,
		Token:    token,
		Ready:    func(ctx context.Context) error { return ready(ctx, nc, stores.ping) },
		Metrics:  promhttp.HandlerFor(registry, promhttp.HandlerOpts{}),
		Logger:   log,
	})
	ln, err := net.Listen("tcp", c.adminListen)
	if err != nil {
		return fmt.Errorf("admin API cannot listen on %s: %w", c.adminListen, err)
	}
	httpSrv := &http.Server{Handler: api, ReadHeaderTimeout: 10 * time.Second, TLSConfig: adminTLS,
		// Refused handshakes and the like in the bridge's own log format.
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	go func() { _ = serveAdmin(httpSrv, ln) }()
	log.Info("bridge running", "admin", adminScheme(adminTLS)+"://"+ln.Addr().String(), "nats", redactURLs(url), "stream", c.stream, "embedded", embedded != nil)

	if c.debugListen != "" {
		stopDebug, err := serveDebug(c.debugListen, log)
		if err != nil {
			return err
		}
		defer stopDebug()
	}
	runErr := daemon.Run(ctx)
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = httpSrv.Shutdown(shutdownCtx)
	if runErr != nil {
		return runErr
	}
	log.Info("bridge stopped cleanly; every acknowledged cursor is flushed")
	return nil
}

func newDaemon(c *runConfig, stores *storeSet, reader *journal.Reader, sender *webhook.Sender, m *bridge.Metrics, log *slog.Logger,
	daemonOpts []bridge.DaemonOption, extra ...bridge.Option) (*bridge.Daemon, error) {
	source := c.ceSource
	if source == "" {
		source = "/jetstream/" + c.stream
	}
	opts := []bridge.Option{
		bridge.WithMaxAttempts(c.maxAttempts),
		bridge.WithMaxInFlight(c.maxInFlight),
		bridge.WithLogger(log),
		bridge.WithMetrics(m),
	}
	opts = append(opts, extra...)
	db := stores.store
	outbox, err := bridge.New(db, reader, sender,
		cloudevents.New(cloudevents.WithStream(c.stream), cloudevents.WithSource(source), cloudevents.WithType(c.ceType)), opts...)
	if err != nil {
		return nil, err
	}
	push, err := bridge.New(db, reader, sender, a2a.New(a2a.WithStream(c.stream)), opts...)
	if err != nil {
		return nil, err
	}
	created := func(ctx context.Context) (time.Time, error) {
		st, err := reader.Info(ctx)
		return st.Created, err
	}
	opts2 := []bridge.DaemonOption{
		bridge.WithDaemonLogger(log),
		bridge.WithFlushInterval(c.flushInterval),
		bridge.WithStreamIdentity(c.stream, created, stores.meta),
	}
	if stores.owner != nil {
		opts2 = append(opts2, bridge.WithOwnership(stores.owner))
	}
	opts2 = append(opts2, daemonOpts...)
	return bridge.NewDaemon(db, reader, []*bridge.Worker{outbox, push}, opts2...), nil
}

// connectNATS connects with the usual client security and reconnects
// forever: a NATS outage pauses delivery and /readyz, it never ends the
// bridge.
func connectNATS(c *runConfig, url string, embedded *server.Server, log *slog.Logger) (*nats.Conn, error) {
	opts := []nats.Option{
		nats.Name("jetstream-bridge"),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(time.Second),
		nats.ReconnectJitter(500*time.Millisecond, time.Second),
		nats.RetryOnFailedConnect(false),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err == nil {
				return // a deliberate close at shutdown
			}
			log.Warn("disconnected from NATS; delivery pauses until it is back", "error", err)
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("reconnected to NATS; delivery resumes", "server", redactURLs(nc.ConnectedUrl()))
		}),
	}
	if embedded != nil {
		opts = append(opts, nats.InProcessServer(embedded))
	}
	security, err := c.natsSecurity.options()
	if err != nil {
		return nil, err
	}
	opts = append(opts, security...)
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("connecting to NATS at %s: %w", redactURLs(url), err)
	}
	return nc, nil
}

// ready says whether the bridge can work now: NATS connected and the
// store answering, each asked within a couple of seconds.
func ready(ctx context.Context, nc *nats.Conn, store func(context.Context) error) error {
	if s := nc.Status(); s != nats.CONNECTED {
		return fmt.Errorf("NATS is %s", strings.ToLower(s.String()))
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return store(ctx)
}

// adminToken returns the configured token, or the one in
// <data-dir>/admin-token, generating it on first start.
func adminToken(c *runConfig, log *slog.Logger) (string, error) {
	if c.adminToken != "" {
		return c.adminToken, nil
	}
	path := filepath.Join(c.dataDir, "admin-token")
	if b, err := os.ReadFile(path); err == nil {
		if t := strings.TrimSpace(string(b)); t != "" {
			log.Info("admin token read from file", "path", path)
			return t, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("reading admin token: %w", err)
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	t := hex.EncodeToString(raw)
	if err := os.WriteFile(path, []byte(t+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("writing admin token: %w", err)
	}
	log.Info("generated an admin token", "path", path)
	return t, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// journalBounds adapts the reader to what the admin API needs to resolve
// `start` and `rewind --time`.
type journalBounds struct{ r *journal.Reader }

func (j journalBounds) Bounds(ctx context.Context) (uint64, uint64, error) {
	st, err := j.r.Info(ctx)
	return st.FirstSeq, st.LastSeq, err
}

func (j journalBounds) SeqAtTime(ctx context.Context, t time.Time) (uint64, error) {
	return j.r.SeqAtTime(ctx, t)
}

// serveDebug serves Go's profiles on their own listener, apart from the
// admin API, so they are never reachable where the API is.
func serveDebug(addr string, log *slog.Logger) (func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--debug-listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	log.Warn("serving Go profiles (--debug-listen); do not expose this address", "addr", "http://"+ln.Addr().String()+"/debug/pprof/")
	return func() { _ = srv.Close() }, nil
}

package daemon

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/jetstream-bridge/bridge/admin"
	"github.com/jetstream-bridge/bridge/bridge"
	"github.com/jetstream-bridge/bridge/cursor"
	"github.com/jetstream-bridge/bridge/internal/heapfloor"
	"github.com/jetstream-bridge/bridge/journal"
	"github.com/jetstream-bridge/bridge/netguard"
	"github.com/jetstream-bridge/bridge/projection/a2a"
	"github.com/jetstream-bridge/bridge/projection/cloudevents"
	"github.com/jetstream-bridge/bridge/webhook"
)

// adminShutdown bounds the admin API's graceful stop.
const adminShutdown = 5 * time.Second

// serve runs d until ctx ends. Everything it opens it closes, in the
// reverse order: workers, admin API, store, NATS, embedded server.
func serve(ctx context.Context, d *Daemon) error {
	c, log := &d.cfg, d.cfg.Logger
	// What the environment and the config name is loaded before anything
	// starts, so a bad file or variable fails the start at once.
	adminTLS, err := adminTLSConfig(c, log)
	if err != nil {
		return err
	}
	tp, stopTracing, err := tracerProvider(ctx, c, os.Getenv)
	if err != nil {
		return err
	}
	defer stopTracing()
	defer heapfloor.Keep(c.HeapFloor)()
	if err := os.MkdirAll(c.DataDir, 0o700); err != nil {
		return fmt.Errorf("creating data dir: %w", err)
	}
	// The bolt store first: a data dir held by another bridge must be
	// refused before this one starts a second server on it.
	var db *cursor.DB
	if c.Store == "bolt" {
		if db, err = cursor.Open(filepath.Join(c.DataDir, "bridge.db")); err != nil {
			return err
		}
		defer db.Close()
	}
	conn, err := connect(c, log)
	if err != nil {
		return err
	}
	defer conn.close()
	nc := conn.nc
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	// The cluster before the journal: joining refuses a taken Instance
	// and more replicas than servers with the numbers.
	stores := boltSet(db)
	if db == nil {
		if stores, err = joinCluster(ctx, c, js, log); err != nil {
			return err
		}
	}
	defer stores.close()

	create := conn.embedded != nil
	if c.CreateStream != nil {
		create = *c.CreateStream
	}
	if err := ensureJournal(ctx, c, js, create, log); err != nil {
		return err
	}
	reader, err := journal.NewReader(nc, c.Stream, journal.WithLogger(log))
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
	guard := netguard.NewPolicy(netguard.WithAllowHosts(c.A2AAllowHosts...), netguard.WithAllowLoopbackHTTP(c.A2AAllowLoopback))
	if c.A2AAllowLoopback {
		log.Warn("A2A webhooks may use http:// on loopback addresses (A2AAllowLoopback, --a2a-allow-loopback); never use this in production")
	}
	// The keep-alive pool holds a connection for every POST the bridge may
	// have in flight to one receiver, so a keyed registration's window
	// reuses its connections instead of opening one per POST.
	sender := webhook.NewSender(webhook.WithPolicy(guard), webhook.WithTimeout(c.RequestTimeout), responseBody(attempts),
		webhook.WithMaxIdleConnsPerHost(max(webhook.DefaultMaxIdlePerHost, c.MaxInFlight)))
	defer sender.Close()

	reg := newRegistry()
	metrics := bridge.NewMetrics(reg)
	reg.MustRegister(stores.metrics...)
	reg.MustRegister(newStoreCollector(stores.gauges, func(ctx context.Context) (uint64, error) {
		st, err := reader.Info(ctx)
		return st.LastSeq, err
	}))
	registerJournalMetrics(reg, reader)
	reg.MustRegister(attemptCollectors(attempts)...)

	viewer := admin.NewViewer(journalBounds{reader}, stores.cluster)
	announcer, err := openEvents(c, nc, stores.store, viewer, log)
	if err != nil {
		return err
	}
	defer closeEvents(announcer)
	reg.MustRegister(announcer.Collectors()...)
	if c.Registerer != nil {
		unregister, err := reg.share(c.Registerer)
		if err != nil {
			return err
		}
		defer unregister()
	}

	extra := append(recording(attempts), tracing(tp)...)
	daemon, err := newWorkers(c, stores, reader, sender, metrics, []bridge.DaemonOption{bridge.WithEvents(announcer, c.FailingAfter)}, extra...)
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
		InFlight: daemon,
		Attempts: attemptReader(attempts),
		Resender: daemon,
		Events:   announcer,
		Token:    token,
		Ready:    func(ctx context.Context) error { return ready(ctx, nc, stores.ping) },
		Metrics:  promhttp.HandlerFor(reg.own, promhttp.HandlerOpts{}),
		Logger:   log,
	})
	ln, err := net.Listen("tcp", c.AdminListen)
	if err != nil {
		return fmt.Errorf("admin API cannot listen on %s: %w", c.AdminListen, err)
	}
	httpSrv := &http.Server{Handler: api, ReadHeaderTimeout: 10 * time.Second, TLSConfig: adminTLS,
		// Refused handshakes and the like in the bridge's own log format.
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = serveAdmin(httpSrv, ln)
	}()
	defer func() {
		shutdownCtx, cancel := context.WithTimeout(context.Background(), adminShutdown)
		defer cancel()
		_ = httpSrv.Shutdown(shutdownCtx)
		<-served
	}()
	adminURL := adminScheme(adminTLS) + "://" + ln.Addr().String()
	log.Info("bridge running", "admin", adminURL, "nats", redactURLs(conn.url), "stream", c.Stream, "embedded", conn.embedded != nil)

	if c.DebugListen != "" {
		stopDebug, err := serveDebug(c.DebugListen, log)
		if err != nil {
			return err
		}
		defer stopDebug()
	}
	if c.NATSService {
		stopService, err := startService(c, nc, statusSource{counts: stores.gauges.Counts, leases: stores.leases}, log)
		if err != nil {
			return fmt.Errorf("registering with the NATS services framework (--nats-service=false turns it off): %w", err)
		}
		defer stopService()
	}
	d.announce(ln.Addr(), adminURL, token, redactURLs(conn.url))
	if err := daemon.Run(ctx); err != nil {
		return err
	}
	log.Info("bridge stopped cleanly; every acknowledged cursor is flushed")
	return nil
}

// newWorkers makes the delivery engine: a worker per namespace, tied to
// the store and the journal by a bridge.Daemon.
func newWorkers(c *Config, stores *storeSet, reader *journal.Reader, sender *webhook.Sender, m *bridge.Metrics,
	daemonOpts []bridge.DaemonOption, extra ...bridge.Option) (*bridge.Daemon, error) {
	opts := []bridge.Option{
		bridge.WithMaxAttempts(c.MaxAttempts),
		bridge.WithMaxInFlight(c.MaxInFlight),
		bridge.WithLogger(c.Logger),
		bridge.WithMetrics(m),
	}
	opts = append(opts, extra...)
	db := stores.store
	outbox, err := bridge.New(db, reader, sender,
		cloudevents.New(cloudevents.WithStream(c.Stream), cloudevents.WithSource(c.ceSource()), cloudevents.WithType(c.CEType)), opts...)
	if err != nil {
		return nil, err
	}
	push, err := bridge.New(db, reader, sender, a2a.New(a2a.WithStream(c.Stream)), opts...)
	if err != nil {
		return nil, err
	}
	created := func(ctx context.Context) (time.Time, error) {
		st, err := reader.Info(ctx)
		return st.Created, err
	}
	opts2 := []bridge.DaemonOption{
		bridge.WithDaemonLogger(c.Logger),
		bridge.WithFlushInterval(c.FlushInterval),
		bridge.WithStreamIdentity(c.Stream, created, stores.meta),
	}
	if stores.owner != nil {
		opts2 = append(opts2, bridge.WithOwnership(stores.owner))
	}
	opts2 = append(opts2, daemonOpts...)
	return bridge.NewDaemon(db, reader, []*bridge.Worker{outbox, push}, opts2...), nil
}

// adminToken returns the configured token, or the one in
// <data-dir>/admin-token, generating it on first start.
func adminToken(c *Config, log *slog.Logger) (string, error) {
	if c.AdminToken != "" {
		return c.AdminToken, nil
	}
	path := filepath.Join(c.DataDir, "admin-token")
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

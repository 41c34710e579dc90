package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/jetstream-bridge/bridge/internal/natsopt"
	"github.com/jetstream-bridge/bridge/journal"
)

// embeddedClusterName is the cluster name of every embedded server: routes
// are only accepted between servers that agree on it, and embedded servers
// only ever cluster with each other.
const embeddedClusterName = "bridge"

// embeddedServerName names a lone embedded server.
const embeddedServerName = "bridge-embedded"

// clusterReadyTimeout bounds the wait for the embedded JetStream cluster
// to elect its meta leader: long enough for the other bridges of a
// deployment to be started one after another, short enough that a route
// list that can never form a quorum ends the bridge with a reason.
const clusterReadyTimeout = 2 * time.Minute

// natsConn is the daemon's NATS: its connection and, when it started one,
// the embedded server.
type natsConn struct {
	nc       *nats.Conn
	url      string
	embedded *server.Server // nil when joining an outside NATS
	owned    bool           // the daemon dialled nc, and closes it
}

// close closes what the daemon opened: the connection, then the server.
func (n *natsConn) close() {
	if n.owned {
		n.nc.Close()
	}
	if n.embedded != nil {
		n.embedded.Shutdown()
		n.embedded.WaitForShutdown()
	}
}

// connect returns the host's connection, or starts the embedded server
// when no NATSURL was given and connects to it or to NATSURL.
func connect(c *Config, log *slog.Logger) (*natsConn, error) {
	if c.Conn != nil {
		return &natsConn{nc: c.Conn, url: c.Conn.ConnectedUrl()}, nil
	}
	n := &natsConn{url: c.NATSURL, owned: true}
	if c.NATSURL == "" {
		ns, err := startEmbedded(c, log)
		if err != nil {
			return nil, err
		}
		n.embedded, n.url = ns, ns.ClientURL()
	}
	nc, err := dial(c, n.url, n.embedded, log)
	if err != nil {
		n.owned = false
		n.close()
		return nil, err
	}
	n.nc = nc
	return n, nil
}

// dial connects with the usual client security and reconnects forever: a
// NATS outage pauses delivery and /readyz, it never ends the bridge.
func dial(c *Config, url string, embedded *server.Server, log *slog.Logger) (*nats.Conn, error) {
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
	security, err := natsopt.Security{Creds: c.NATSCreds, Nkey: c.NATSNkey, User: c.NATSUser, Password: c.NATSPassword,
		TLSCA: c.NATSTLSCA, TLSCert: c.NATSTLSCert, TLSKey: c.NATSTLSKey}.Options()
	if err != nil {
		return nil, configErr("NATSNkey", "%s: %v", err)
	}
	nc, err := nats.Connect(url, append(opts, security...)...)
	if err != nil {
		return nil, fmt.Errorf("connecting to NATS at %s: %w", redactURLs(url), err)
	}
	return nc, nil
}

func redactURLs(servers string) string { return natsopt.RedactURLs(servers) }

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

// embeddedServerOptions are the embedded server's options: its client
// address, its store under DataDir and, with EmbeddedCluster, its routes.
func embeddedServerOptions(c *Config) (*server.Options, error) {
	host, portStr, err := net.SplitHostPort(c.EmbeddedListen)
	if err != nil {
		return nil, configErr("EmbeddedListen", "%s %q: %v", c.EmbeddedListen, err)
	}
	port, err := net.LookupPort("tcp", portStr)
	if err != nil {
		return nil, configErr("EmbeddedListen", "%s %q: %v", c.EmbeddedListen, err)
	}
	if port == 0 {
		port = server.RANDOM_PORT
	}
	opts := &server.Options{
		Host:       host,
		Port:       port,
		JetStream:  true,
		StoreDir:   filepath.Join(c.DataDir, "nats"),
		NoSigs:     true,
		ServerName: embeddedName(c),
	}
	if c.EmbeddedCluster == "" {
		return opts, nil
	}
	host, _, _ = net.SplitHostPort(c.EmbeddedCluster)
	port, err = hostPort(c.EmbeddedCluster)
	if err != nil {
		return nil, configErr("EmbeddedCluster", "%s %q: %v", c.EmbeddedCluster, err)
	}
	routes, err := routeURLs(c.EmbeddedRoutes)
	if err != nil {
		return nil, err
	}
	opts.Cluster = server.ClusterOpts{Name: embeddedClusterName, Host: host, Port: port}
	opts.Routes = routes
	return opts, nil
}

// embeddedName is unique among the cluster's servers by default, because
// JetStream tells its peers apart by name: the host name, with the route
// port for several bridges on one host.
func embeddedName(c *Config) string {
	switch {
	case c.EmbeddedName != "":
		return c.EmbeddedName
	case c.EmbeddedCluster == "":
		return embeddedServerName
	}
	_, port, _ := net.SplitHostPort(c.EmbeddedCluster)
	return hostLabel() + "-" + port
}

// startEmbedded starts the embedded server and waits until it takes
// connections and, in a cluster, follows a JetStream meta leader.
func startEmbedded(c *Config, log *slog.Logger) (*server.Server, error) {
	opts, err := embeddedServerOptions(c)
	if err != nil {
		return nil, err
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded nats-server: %w", err)
	}
	// Start returns once the client listener is up, so the readiness
	// check answers at its first look instead of after its 25 ms poll.
	ns.Start()
	if !ns.ReadyForConnections(15 * time.Second) {
		ns.Shutdown()
		ns.WaitForShutdown()
		return nil, configErr("EmbeddedListen", "embedded nats-server did not start listening on %[2]s (is the port in use? set %[1]s or %[3]s)",
			c.EmbeddedListen, field("EmbeddedCluster"))
	}
	if c.EmbeddedCluster != "" {
		if err := waitClusterReady(ns, clusterReadyTimeout, log); err != nil {
			ns.Shutdown()
			ns.WaitForShutdown()
			return nil, err
		}
	}
	log.Info("embedded nats-server with JetStream started", "listen", ns.ClientURL(), "store", opts.StoreDir,
		"name", opts.ServerName, "cluster", c.EmbeddedCluster)
	return ns, nil
}

// waitClusterReady waits until the cluster's JetStream has a meta leader
// this server follows. ReadyForConnections only says the listeners are up:
// until a quorum of the routed servers has elected the meta leader, every
// JetStream call (the journal stream, the store's buckets) fails with "no
// responders" or a timeout, and the bridge would give up on them.
func waitClusterReady(ns *server.Server, timeout time.Duration, log *slog.Logger) error {
	deadline := time.Now().Add(timeout)
	var lastLog time.Time
	for !ns.JetStreamIsCurrent() {
		if time.Now().After(deadline) {
			return configErr("EmbeddedRoutes", "embedded JetStream cluster elected no meta leader within %[2]v (%[3]d routes connected): start the other bridges, check %[1]s",
				timeout, ns.NumRoutes())
		}
		if time.Since(lastLog) >= 5*time.Second {
			log.Info("waiting for the embedded JetStream cluster to elect a meta leader; it needs a majority of the servers of EmbeddedRoutes",
				"routes", ns.NumRoutes(), "left", time.Until(deadline).Round(time.Second))
			lastLog = time.Now()
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}

// journalReplicas gives a journal the bridge creates the replicas of the
// kv store's buckets: three bridges on a cluster of their embedded servers
// would otherwise keep every message on one server, and lose the journal
// with the bridge that holds it.
func journalReplicas(c *Config) journal.StreamOption {
	if c.Store != "kv" {
		return journal.StreamReplicas(1)
	}
	return journal.StreamReplicas(c.KVReplicas)
}

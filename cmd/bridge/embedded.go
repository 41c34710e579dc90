package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"

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

// embeddedCluster makes the embedded server one node of a cluster with the
// embedded servers of other bridges, so three bridges replicate their
// JetStream state without a NATS deployment of their own.
type embeddedCluster struct {
	listen string // route listen address, HOST:PORT
	routes string // comma-separated nats://HOST:PORT of the other servers
	name   string // server name, unique in the cluster
}

func (e *embeddedCluster) register(fs *flag.FlagSet) {
	fs.StringVar(&e.listen, "embedded-cluster", "", "route listen address HOST:PORT: the embedded server joins a cluster (named \""+embeddedClusterName+"\") with other bridges' embedded servers")
	fs.StringVar(&e.routes, "embedded-routes", "", "comma-separated nats://HOST:PORT route addresses of the cluster's embedded servers (this one's may be listed too)")
	fs.StringVar(&e.name, "embedded-name", "", "server name of the embedded server, unique in the cluster (default \""+embeddedServerName+"\", or host name and route port with --embedded-cluster)")
}

var serverName = regexp.MustCompile(`^[-_.=a-zA-Z0-9]+$`)

// validate refuses addresses the server would only reject once started,
// and cluster flags that a bridge joining an outside NATS would ignore.
func (e *embeddedCluster) validate(external bool) error {
	if e.listen == "" {
		if e.routes != "" {
			return errors.New("--embedded-routes needs --embedded-cluster, the address the other servers route to")
		}
	} else if _, err := hostPort(e.listen); err != nil {
		return fmt.Errorf("--embedded-cluster %q: %w", e.listen, err)
	}
	if external && (e.listen != "" || e.name != "") {
		return errors.New("--embedded-cluster and --embedded-name configure the embedded server, which --nats-url (or NATS_URL) replaces")
	}
	if _, err := e.routeURLs(); err != nil {
		return err
	}
	if e.name != "" && !serverName.MatchString(e.name) {
		return fmt.Errorf("--embedded-name %q: only letters, digits, '-', '_', '=' and '.' are allowed", e.name)
	}
	return nil
}

// hostPort splits HOST:PORT, the port a number from 1 to 65535: the other
// servers must be able to route to it, so 0 (any port) is refused.
func hostPort(addr string) (int, error) {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 1 || port > 65535 {
		return 0, fmt.Errorf("port %q is not a number from 1 to 65535", p)
	}
	return port, nil
}

func (e *embeddedCluster) routeURLs() ([]*url.URL, error) {
	var out []*url.URL
	for _, r := range splitList(e.routes) {
		u, err := url.Parse(r)
		if err == nil && (u.Scheme != "nats" || u.Host == "" || u.User != nil || strings.Trim(u.Path, "/") != "" || u.RawQuery != "") {
			err = errors.New("want nats://HOST:PORT")
		}
		if err == nil {
			_, err = hostPort(u.Host)
		}
		if err != nil {
			return nil, fmt.Errorf("--embedded-routes %q: %w", r, err)
		}
		out = append(out, u)
	}
	return out, nil
}

// serverName is unique among the cluster's servers by default, because
// JetStream tells its peers apart by name: the host name, with the route
// port for several bridges on one host.
func (e *embeddedCluster) serverName() string {
	switch {
	case e.name != "":
		return e.name
	case e.listen == "":
		return embeddedServerName
	}
	_, port, _ := net.SplitHostPort(e.listen)
	return hostLabel() + "-" + port
}

// options adds the cluster to the embedded server's options.
func (e *embeddedCluster) options(o *server.Options) error {
	o.ServerName = e.serverName()
	if e.listen == "" {
		return nil
	}
	host, _, _ := net.SplitHostPort(e.listen)
	port, err := hostPort(e.listen)
	if err != nil {
		return fmt.Errorf("--embedded-cluster %q: %w", e.listen, err)
	}
	routes, err := e.routeURLs()
	if err != nil {
		return err
	}
	o.Cluster = server.ClusterOpts{Name: embeddedClusterName, Host: host, Port: port}
	o.Routes = routes
	return nil
}

// startEmbedded returns the URL to connect to, starting the embedded server
// when no --nats-url was given.
func startEmbedded(c *runConfig, log *slog.Logger) (string, *server.Server, error) {
	if c.natsURL != "" {
		return c.natsURL, nil, nil
	}
	host, portStr, err := net.SplitHostPort(c.embeddedListen)
	if err != nil {
		return "", nil, fmt.Errorf("--embedded-listen %q: %w", c.embeddedListen, err)
	}
	port, err := net.LookupPort("tcp", portStr)
	if err != nil {
		return "", nil, fmt.Errorf("--embedded-listen %q: %w", c.embeddedListen, err)
	}
	opts := &server.Options{
		Host:      host,
		Port:      port,
		JetStream: true,
		StoreDir:  filepath.Join(c.dataDir, "nats"),
		NoSigs:    true,
	}
	if err := c.cluster.options(opts); err != nil {
		return "", nil, err
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		return "", nil, fmt.Errorf("embedded nats-server: %w", err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(15 * time.Second) {
		ns.Shutdown()
		return "", nil, fmt.Errorf("embedded nats-server did not start listening on %s (is the port in use? set --embedded-listen or --embedded-cluster)", c.embeddedListen)
	}
	if c.cluster.listen != "" {
		if err := waitClusterReady(ns, clusterReadyTimeout, log); err != nil {
			ns.Shutdown()
			return "", nil, err
		}
	}
	log.Info("embedded nats-server with JetStream started", "listen", ns.ClientURL(), "store", opts.StoreDir,
		"name", opts.ServerName, "cluster", c.cluster.listen)
	return ns.ClientURL(), ns, nil
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
			return fmt.Errorf("embedded JetStream cluster elected no meta leader within %v (%d routes connected): start the other bridges, check --embedded-routes", timeout, ns.NumRoutes())
		}
		if time.Since(lastLog) >= 5*time.Second {
			log.Info("waiting for the embedded JetStream cluster to elect a meta leader; it needs a majority of the servers in --embedded-routes",
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
func journalReplicas(c *runConfig) journal.StreamOption {
	if c.store.store != "kv" {
		return journal.StreamReplicas(1)
	}
	return journal.StreamReplicas(c.store.kv.replicas)
}

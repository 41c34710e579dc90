package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetstream-bridge/bridge/lease"
)

// The cluster scenarios run on three nats-servers with JetStream in this
// process, joined by routes on loopback, every stream and bucket on
// three replicas, as docs/deployment.md sets a cluster up. The bridges
// are the real binary, given all three client URLs.

const (
	clusterNodes = 3
	// clusterReady bounds the wait for the cluster to elect its meta
	// leader and take a replicated stream: elections take seconds.
	clusterReady = 30 * time.Second
	// benchTTL is the bridges' --lease-ttl: short, so a takeover is
	// timed in seconds, and well above the renewals' round trips.
	benchTTL = 5 * time.Second
)

// natsCluster is the three servers.
type natsCluster struct {
	servers []*server.Server
	urls    string // every client URL, comma-separated
}

// startNATSCluster starts n servers with their stores under dir and
// returns once a replicated stream can be created on them.
func startNATSCluster(ctx context.Context, dir string, n int) (*natsCluster, error) {
	ports, err := freePorts(2 * n)
	if err != nil {
		return nil, err
	}
	client, routes := ports[:n], ports[n:]
	var routeURLs []*url.URL
	for _, p := range routes {
		routeURLs = append(routeURLs, &url.URL{Scheme: "nats-route", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(p))})
	}
	c := &natsCluster{}
	urls := make([]string, n)
	for i := range n {
		srv, err := server.NewServer(&server.Options{
			ServerName: fmt.Sprintf("bench-%d", i+1),
			Host:       "127.0.0.1",
			Port:       client[i],
			JetStream:  true,
			StoreDir:   filepath.Join(dir, fmt.Sprintf("nats-%d", i+1)),
			NoLog:      true,
			NoSigs:     true,
			Cluster:    server.ClusterOpts{Name: "bench", Host: "127.0.0.1", Port: routes[i]},
			Routes:     routeURLs,
		})
		if err != nil {
			c.shutdown()
			return nil, fmt.Errorf("nats-server %d: %w", i+1, err)
		}
		go srv.Start()
		c.servers = append(c.servers, srv)
		urls[i] = fmt.Sprintf("nats://127.0.0.1:%d", client[i])
	}
	c.urls = strings.Join(urls, ",")
	for i, srv := range c.servers {
		if !srv.ReadyForConnections(clusterReady) {
			c.shutdown()
			return nil, fmt.Errorf("nats-server %d not accepting connections within %v", i+1, clusterReady)
		}
	}
	if err := c.waitReady(ctx); err != nil {
		c.shutdown()
		return nil, err
	}
	return c, nil
}

// freePorts returns n distinct loopback ports nothing listened on a
// moment ago: routes must be known before any server starts, so the
// servers cannot choose their own.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// waitReady waits for a meta leader that sees every server as a peer,
// then until a stream of three replicas can be created, which is what
// every scenario needs first.
func (c *natsCluster) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(clusterReady)
	for !c.metaReady() {
		if time.Now().After(deadline) {
			return fmt.Errorf("NATS cluster: no JetStream meta leader seeing all %d servers within %v", len(c.servers), clusterReady)
		}
		if err := sleepCtx(ctx, 25*time.Millisecond); err != nil {
			return err
		}
	}
	nc, js, err := c.connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	for {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := js.CreateStream(actx, jetstream.StreamConfig{Name: "BENCH_PROBE", Subjects: []string{"bench.probe"}, Replicas: clusterNodes})
		if err == nil {
			err = js.DeleteStream(actx, "BENCH_PROBE")
		}
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("NATS cluster: a stream of %d replicas not created within %v: %w", clusterNodes, clusterReady, err)
		}
		if err := sleepCtx(ctx, 250*time.Millisecond); err != nil {
			return err
		}
	}
}

func (c *natsCluster) metaReady() bool {
	leader := slices.IndexFunc(c.servers, (*server.Server).JetStreamIsLeader)
	if leader < 0 || len(c.servers[leader].JetStreamClusterPeers()) != len(c.servers) {
		return false
	}
	return !slices.ContainsFunc(c.servers, func(s *server.Server) bool { return !s.JetStreamIsCurrent() })
}

// connect is a client of the whole cluster, following it to a live node.
func (c *natsCluster) connect() (*nats.Conn, jetstream.JetStream, error) {
	nc, err := nats.Connect(c.urls, nats.Name("bench-cluster"), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

func (c *natsCluster) shutdown() {
	for _, s := range c.servers {
		s.Shutdown()
	}
	for _, s := range c.servers {
		s.WaitForShutdown()
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// clusterBench runs the cluster scenarios: the bench's env with its
// client, its streams and its bridges on the cluster instead of the
// single server.
type clusterBench struct {
	*bench
	nats *natsCluster
}

// newClusterBench starts the cluster and points a copy of b's env at it;
// the sink and the built binary stay b's.
func (b *bench) newClusterBench(ctx context.Context) (*clusterBench, error) {
	logf("starting a JetStream cluster of %d nats-servers on loopback", clusterNodes)
	nc, err := startNATSCluster(ctx, filepath.Join(b.dir, "cluster"), clusterNodes)
	if err != nil {
		return nil, err
	}
	e := *b.env
	e.ns = nil
	if e.nc, e.js, err = nc.connect(); err != nil {
		nc.shutdown()
		return nil, err
	}
	e.natsURL = nc.urls
	return &clusterBench{bench: &bench{env: &e, sz: b.sz}, nats: nc}, nil
}

func (c *clusterBench) close() {
	c.env.nc.Close()
	c.nats.shutdown()
}

// newStream is a scenario's journal on three replicas, as the bridge
// creates it for --store kv.
func (c *clusterBench) newStream(ctx context.Context, scenario string) (stream, error) {
	s := stream{name: "BENCH_" + strings.ToUpper(scenario), prefix: "bench." + strings.ToLower(scenario)}
	_, err := c.js.CreateStream(ctx, jetstream.StreamConfig{
		Name:        s.name,
		Subjects:    []string{s.prefix + ".>"},
		Storage:     jetstream.FileStorage,
		AllowDirect: true,
		Replicas:    clusterNodes,
	})
	if err != nil {
		return s, fmt.Errorf("creating stream %s (%d replicas): %w", s.name, clusterNodes, err)
	}
	return s, nil
}

// startKV starts a bridge of --store kv on s, named instance among the
// bridges sharing bucket.
func (c *clusterBench) startKV(ctx context.Context, s stream, bucket, instance string) (*bridgeProc, error) {
	dir, err := c.newBridgeDir(instance)
	if err != nil {
		return nil, err
	}
	return c.startBridgeWithin(ctx, s, dir, time.Minute,
		"--store", "kv", "--kv-bucket", bucket, "--instance", instance, "--lease-ttl", benchTTL.String())
}

// startKVs starts n bridges b1…bn of bucket, b1 first, then the others
// at once, and returns them in order. b1 alone first: of three bridges
// started at once on fresh buckets, the first has been seen to exit 5 s
// after it was ready, its start's read of the stream's creation mark in
// the meta bucket timed out.
func (c *clusterBench) startKVs(ctx context.Context, s stream, bucket string, n int) ([]*bridgeProc, error) {
	brs := make([]*bridgeProc, n)
	errs := make([]error, n)
	if brs[0], errs[0] = c.startKV(ctx, s, bucket, instanceName(0)); errs[0] != nil {
		return nil, errs[0]
	}
	var wg sync.WaitGroup
	for i := 1; i < n; i++ {
		wg.Go(func() { brs[i], errs[i] = c.startKV(ctx, s, bucket, instanceName(i)) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		stopAll(brs)
		return nil, err
	}
	return brs, nil
}

func instanceName(i int) string { return fmt.Sprintf("b%d", i+1) }

// stopAll stops every bridge of brs at once; nil ones are skipped.
func stopAll(brs []*bridgeProc) {
	var wg sync.WaitGroup
	for _, br := range brs {
		wg.Go(br.stop)
	}
	wg.Wait()
}

// deleteBuckets removes every bucket named prefix_…, the kv store's and
// the leases', so the next scenario's bridges start on an empty store.
func (c *clusterBench) deleteBuckets(prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	names := c.js.KeyValueStoreNames(ctx)
	var mine []string
	for n := range names.Name() {
		if strings.HasPrefix(n, prefix+"_") {
			mine = append(mine, n)
		}
	}
	if err := names.Error(); err != nil {
		logf("listing the buckets of %s: %v", prefix, err)
	}
	for _, n := range mine {
		if err := c.js.DeleteKeyValue(ctx, n); err != nil {
			logf("deleting bucket %s: %v", n, err)
		}
	}
}

// owned is one registration as the admin API lists it in kv mode.
type owned struct {
	ID    string `json:"id"`
	Owner string `json:"owner"`
}

// owners lists every registration's owner through br.
func owners(ctx context.Context, br *bridgeProc) (map[string]string, error) {
	list, err := listAll[owned](ctx, br)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(list))
	for _, r := range list {
		out[r.ID] = r.Owner
	}
	return out, nil
}

// listAll lists every registration through br, a page at a time, each
// answer read as a T.
func listAll[T any](ctx context.Context, br *bridgeProc) ([]T, error) {
	var out []T
	after := ""
	for {
		var page struct {
			Registrations []T    `json:"registrations"`
			Next          string `json:"next"`
		}
		if _, err := br.api(ctx, "GET", "/v1/registrations?limit=1000&after="+url.QueryEscape(after), nil, &page); err != nil {
			return nil, err
		}
		out = append(out, page.Registrations...)
		if page.Next == "" {
			return out, nil
		}
		after = page.Next
	}
}

// instances is GET /v1/cluster through br: each live bridge's name and
// how many registrations it delivers.
func instances(ctx context.Context, br *bridgeProc) (map[string]int, error) {
	var view struct {
		Instances []struct {
			Name          string `json:"name"`
			Registrations int    `json:"registrations"`
		} `json:"instances"`
	}
	if _, err := br.api(ctx, "GET", "/v1/cluster", nil, &view); err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, in := range view.Instances {
		out[in.Name] = in.Registrations
	}
	return out, nil
}

// settled says whether an ownership is the one a scenario waits for
// before it times anything: the live bridges are exactly want, all n
// registrations are listed, each owned by one of them, and every one of
// them owns some.
func settled(own map[string]string, live map[string]int, want []string, n int) bool {
	if len(own) != n || len(live) != len(want) {
		return false
	}
	holding := map[string]bool{}
	for _, o := range own {
		if !slices.Contains(want, o) {
			return false
		}
		holding[o] = true
	}
	for _, w := range want {
		if _, ok := live[w]; !ok || (n >= len(want) && !holding[w]) {
			return false
		}
	}
	return true
}

// waitSettled waits until, asked through via, the bridges named want
// share all n registrations (settled) and the ownership is the same on
// two reads a second apart, so rebalancing is over; it returns the
// share of each bridge.
func waitSettled(ctx context.Context, via *bridgeProc, want []string, n int) (map[string]int, error) {
	limit := 4*benchTTL + 30*time.Second
	deadline := time.Now().Add(limit)
	var prev map[string]string
	for {
		own, err := owners(ctx, via)
		if err != nil {
			return nil, err
		}
		live, err := instances(ctx, via)
		if err != nil {
			return nil, err
		}
		if settled(own, live, want, n) {
			if prev != nil && mapsEqual(prev, own) {
				return shares(own), nil
			}
			prev = own
		} else {
			prev = nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("ownership not settled within %v: want bridges %v sharing %d registrations; %d listed, shares %v, live %v",
				limit, want, n, len(own), shares(own), live)
		}
		if err := sleepCtx(ctx, time.Second); err != nil {
			return nil, err
		}
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// shares counts the registrations of each owner.
func shares(own map[string]string) map[string]int {
	out := map[string]int{}
	for _, o := range own {
		out[o]++
	}
	return out
}

// heaviest is the owner of the most registrations (the first by name on
// a tie) and the ids it owns, sorted.
func heaviest(own map[string]string) (string, []string) {
	sh := shares(own)
	names := make([]string, 0, len(sh))
	for n := range sh {
		if n != "" {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	best := ""
	for _, n := range names {
		if best == "" || sh[n] > sh[best] {
			best = n
		}
	}
	var ids []string
	for id, o := range own {
		if o == best && best != "" {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return best, ids
}

// waitLeases waits until br holds every shard's lease: a bridge alone on
// its bucket owns all registrations once it does, so what is timed after
// is delivery, not joining.
func waitLeases(ctx context.Context, br *bridgeProc) error {
	deadline := time.Now().Add(4*benchTTL + 30*time.Second)
	for {
		held, ok, err := br.metric(ctx, "bridge_leases_held")
		if err != nil {
			return err
		}
		if !ok {
			return errors.New("no bridge_leases_held in /metrics")
		}
		if held >= lease.DefaultShards {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bridge holds %.0f of %d shard leases after waiting", held, lease.DefaultShards)
		}
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

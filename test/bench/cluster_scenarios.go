package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetstream-bridge/bridge/bridge"
	"github.com/jetstream-bridge/bridge/cursor"
	"github.com/jetstream-bridge/bridge/cursor/kvstore"
)

// clusterNames are the cluster scenarios, in the order they run.
var clusterNames = []string{"C1", "C2", "C3", "C4", "C5"}

// clusterScenarios runs the selected cluster scenarios on one cluster,
// started only when one is selected.
func (b *bench) clusterScenarios(ctx context.Context, selected map[string]bool) []result {
	if !slices.ContainsFunc(clusterNames, func(n string) bool { return selected[n] }) || ctx.Err() != nil {
		return nil
	}
	c, err := b.newClusterBench(ctx)
	if err != nil {
		var out []result
		for _, n := range clusterNames {
			if selected[n] {
				out = append(out, failed(n, n+" cluster", err))
			}
		}
		return out
	}
	defer c.close()
	return runSelected(ctx, selected, []scenario{
		{"C1", c.clusterDrain},
		{"C2", c.clusterFanOut},
		{"C3", c.slowReceiver},
		{"C4", c.takeover},
		{"C5", c.cursorWrites},
	})
}

// scenario is one the bench runs when -only selects its name.
type scenario struct {
	name string
	fn   func(context.Context) result
}

// runSelected runs the selected scenarios of scs in order, until ctx ends.
func runSelected(ctx context.Context, selected map[string]bool, scs []scenario) []result {
	var out []result
	for _, sc := range scs {
		if selected[sc.name] && ctx.Err() == nil {
			out = append(out, sc.fn(ctx))
		}
	}
	return out
}

// clusterDrain is C1: one registration draining a backlog on the
// cluster, through a bridge of --store kv and through one of the bolt
// store on the same cluster; against as many sequential bare POSTs.
func (c *clusterBench) clusterDrain(ctx context.Context) result {
	const what = "C1 drain, kv store ÷ bolt store, 3 nodes"
	n := c.sz.c1Backlog
	logf("C1: drain of a %s × 1 KiB backlog on the cluster, kv store and bolt store", count(float64(n)))
	s, done, err := c.begin(ctx, "C1")
	if err != nil {
		return failed("C1", what, err)
	}
	defer done()
	subject := s.prefix + ".orders"
	first, err := c.publishBacklog(ctx, s, subject, n, bytes.Repeat([]byte{'x'}, kib))
	if err != nil {
		return failed("C1", what, err)
	}
	same := wire{stream: s.name, subject: subject}
	runBare := func(when string) (bareRun, error) {
		logf("C1: baseline %s, %s sequential bare POSTs", when, count(float64(n)))
		r, err := c.barePOSTs(ctx, n, 1, kib, same)
		if err == nil {
			logf("C1: baseline %s", r)
		}
		return r, err
	}
	var bare baseline
	if bare.before, err = runBare("before"); err != nil {
		return failed("C1", what, err)
	}
	kvStart := func(ctx context.Context) (*bridgeProc, error) {
		br, err := c.startKV(ctx, s, "C1", "c1")
		if err == nil {
			if err = waitLeases(ctx, br); err != nil {
				br.stop()
			}
		}
		return br, err
	}
	logf("C1: a bridge of --store kv")
	kv, early := c.drainBy(ctx, kvStart, subject, first, n, variant{name: "C1", what: "C1 drain, kv store (msg/s)"}, nil)
	if early != nil {
		return *early
	}
	boltStart := func(ctx context.Context) (*bridgeProc, error) { return c.startFresh(ctx, s, "c1-bolt") }
	logf("C1: a bridge of --store bolt")
	bolt, early := c.drainBy(ctx, boltStart, subject, first, n, variant{name: "C1", what: "C1 drain, bolt store (msg/s)"}, nil)
	if early != nil {
		return *early
	}
	if bare.after, err = runBare("after"); err != nil {
		return failed("C1", what, err)
	}
	best := bare.best()
	return result{name: "C1", figure: kv.rate, vsBare: kv.rate / best,
		rows: []row{
			{what: what, bridge: count(kv.rate), baseline: count(bolt.rate) + " msg/s", ratio: ratio(kv.rate, bolt.rate),
				target: "≥ 0.80 × bolt", met: yesNo(kv.rate >= 0.80*bolt.rate)},
			{what: "C1 drain, kv store ÷ sequential POST", bridge: count(kv.rate), baseline: count(best) + " POST/s", ratio: ratio(kv.rate, best),
				target: "report", met: "-"},
		},
		line: fmt.Sprintf("C1: kv ÷ bolt %s, kv ÷ bare %s, bolt ÷ bare %s — %s × 1 KiB on a stream of %d replicas: kv store %.0f msg/s in %v (CPU %s per message, peak RSS %.0f MiB, %s, %d error log lines); bolt store %.0f msg/s in %v (CPU %s per message, peak RSS %.0f MiB, %s, %d error log lines); bare sequential POST loop %s",
			ratio(kv.rate, bolt.rate), ratio(kv.rate, best), ratio(bolt.rate, best), count(float64(n)), clusterNodes,
			kv.rate, kv.took.Round(time.Millisecond), perMsg(kv.cpu, n), mib(kv.hwm), kv.extras, kv.errLines,
			bolt.rate, bolt.took.Round(time.Millisecond), perMsg(bolt.cpu, n), mib(bolt.hwm), bolt.extras, bolt.errLines, bare),
	}
}

// clusterFanOut is C2: many registrations on one subject shared by three
// bridges, each message delivered to every registration; against as many
// bare POSTs from 16 goroutines.
func (c *clusterBench) clusterFanOut(ctx context.Context) result {
	const what = "C2 fan-out, 3 kv bridges (deliveries/s)"
	regs, msgs := c.sz.c2Regs, c.sz.c2Msgs
	logf("C2: fan-out, %s registrations × %s messages, three bridges", count(float64(regs)), count(float64(msgs)))
	s, done, err := c.begin(ctx, "C2")
	if err != nil {
		return failed("C2", what, err)
	}
	defer done()
	subject := s.prefix + ".fan"
	runBare := func(when string) (bareRun, error) {
		logf("C2: baseline %s, %s bare POSTs from 16 goroutines", when, count(float64(regs*msgs)))
		r, err := c.barePOSTs(ctx, regs*msgs, 16, kib, wire{stream: s.name, subject: subject})
		if err == nil {
			logf("C2: baseline %s", r)
		}
		return r, err
	}
	var bare baseline
	if bare.before, err = runBare("before"); err != nil {
		return failed("C2", what, err)
	}
	brs, err := c.startKVs(ctx, s, "C2", 3)
	if err != nil {
		return failed("C2", what, err)
	}
	stopped := false
	defer func() {
		if !stopped {
			stopAll(brs)
		}
	}()
	if err := c.createOn(ctx, brs[0], regs, "fan-%05d", subject); err != nil {
		return failed("C2", what, err)
	}
	share, err := waitSettled(ctx, brs[0], names(3), regs)
	if err != nil {
		return failed("C2", what, err)
	}
	for _, br := range brs {
		if _, _, err := settle(ctx, br.pid(), time.Second, 30*time.Second); err != nil {
			return failed("C2", what, err)
		}
	}
	d, err := c.deliverAll(ctx, brs, s, subject, regs, msgs)
	if err != nil {
		return failed("C2", what, err)
	}
	total := float64(regs * msgs)
	errLines := errorLines(brs)
	stopAll(brs)
	stopped = true
	if bare.after, err = runBare("after"); err != nil {
		return failed("C2", what, err)
	}
	best := bare.best()
	return result{name: "C2", figure: d.rate, vsBare: d.rate / best,
		rows: []row{{what: what, bridge: count(d.rate), baseline: count(best) + " POST/s", ratio: ratio(d.rate, best),
			target: "≥ 0.60 × bare", met: yesNo(d.rate >= 0.60*best)}},
		line: fmt.Sprintf("C2: ratio %s — three bridges (shares %v) %s deliveries: %s; bare 16-goroutine POST loop %s; CPU per delivery: the three bridges %s, bare loop %s; %d error log lines",
			ratio(d.rate, best), share, count(total), d, bare, perMsg(d.bridgeCPU, int(total)), bare.cpu(), errLines),
	}
}

// begin creates scenario's stream; done deletes it and the buckets of
// the scenario's bridges (--kv-bucket scenario).
func (c *clusterBench) begin(ctx context.Context, scenario string) (s stream, done func(), err error) {
	if s, err = c.newStream(ctx, strings.ToLower(scenario)); err != nil {
		return s, nil, err
	}
	return s, func() {
		c.deleteStream(s)
		c.deleteBuckets(scenario)
	}, nil
}

// createOn creates n registrations through br, the i-th with the id
// idFormat makes of i, on subject from new messages, delivering to the
// sink's registration i.
func (c *clusterBench) createOn(ctx context.Context, br *bridgeProc, n int, idFormat, subject string) error {
	_, err := createMany(ctx, br, n, func(i int) registration {
		return registration{ID: fmt.Sprintf(idFormat, i), Namespace: "outbox", Subject: subject,
			URL: fmt.Sprintf("%s/r/%d", c.sink.url, i), Start: "new"}
	})
	return err
}

// names are the instance names of n bridges started by startKVs.
func names(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = instanceName(i)
	}
	return out
}

// cpuOf is the CPU the live bridges of brs have used so far.
func cpuOf(brs []*bridgeProc) time.Duration {
	var sum time.Duration
	for _, br := range brs {
		if br == nil {
			continue
		}
		if d, err := cpuTime(br.pid()); err == nil {
			sum += d
		}
	}
	return sum
}

func errorLines(brs []*bridgeProc) int {
	n := 0
	for _, br := range brs {
		if br != nil {
			n += max(errorsLogged(br.logPath), 0)
		}
	}
	return n
}

// slowRegs is how many registrations C3 spreads: three bridges' worth of
// POSTs in flight each (--max-in-flight's default), so each bridge added
// brings receivers no other was keeping busy. It was 48 while the default
// was 16 a bridge; at 64, one bridge kept all 48 busy and C3 measured no
// gain from a second.
const slowRegs = 3 * bridge.DefaultMaxInFlight

// slowReceiver is C3: a receiver answering after 20 ms, so a bridge
// delivers as many POSTs per second as it has receivers waiting at once;
// with one, two and three bridges sharing the registrations.
func (c *clusterBench) slowReceiver(ctx context.Context) result {
	const what = "C3 20 ms receiver, 1 kv bridge (deliveries/s)"
	msgs := c.sz.c3Msgs
	logf("C3: %d registrations on a receiver answering after 20 ms, %d messages each, with 1, 2 and 3 bridges", slowRegs, msgs)
	s, done, err := c.begin(ctx, "C3")
	if err != nil {
		return failed("C3", what, err)
	}
	defer done()
	c.sink.setDelay(20 * time.Millisecond)
	defer c.sink.setDelay(0)
	subject := s.prefix + ".slow"
	first, err := c.startKV(ctx, s, "C3", instanceName(0))
	if err != nil {
		return failed("C3", what, err)
	}
	brs := []*bridgeProc{first}
	defer func() { stopAll(brs) }()
	if err := c.createOn(ctx, first, slowRegs, "slow-%03d", subject); err != nil {
		return failed("C3", what, err)
	}
	var rates []float64
	var lines []string
	for k := 1; k <= 3; k++ {
		if k > 1 {
			br, err := c.startKV(ctx, s, "C3", instanceName(k-1))
			if err != nil {
				return failed("C3", what, err)
			}
			brs = append(brs, br)
		}
		share, err := waitSettled(ctx, first, names(k), slowRegs)
		if err != nil {
			return failed("C3", what, err)
		}
		d, err := c.deliverAll(ctx, brs, s, subject, slowRegs, msgs)
		if err != nil {
			return failed("C3", what, err)
		}
		logf("C3: %d bridge(s), shares %v: %s", k, share, d)
		rates = append(rates, d.rate)
		lines = append(lines, fmt.Sprintf("%d bridge(s) (shares %v) %s", k, share, d))
	}
	one := count(rates[0])
	return result{name: "C3", figure: rates[0],
		rows: []row{
			{what: what, bridge: one, baseline: "-", ratio: "-", target: "-", met: "-"},
			{what: "C3 20 ms receiver, 2 kv bridges ÷ 1", bridge: count(rates[1]), baseline: one, ratio: ratio(rates[1], rates[0]),
				target: "≥ 1.80 × 1", met: yesNo(rates[1] >= 1.8*rates[0])},
			{what: "C3 20 ms receiver, 3 kv bridges ÷ 1", bridge: count(rates[2]), baseline: one, ratio: ratio(rates[2], rates[0]),
				target: "≥ 2.60 × 1", met: yesNo(rates[2] >= 2.6*rates[0])},
		},
		line: fmt.Sprintf("C3: 2 ÷ 1 %s, 3 ÷ 1 %s — %d registrations × %d messages each time: %s; %d error log lines",
			ratio(rates[1], rates[0]), ratio(rates[2], rates[0]), slowRegs, msgs, strings.Join(lines, "; "), errorLines(brs)),
	}
}

// delivered is what deliverAll measured.
type delivered struct {
	rate       float64       // deliveries per second
	took       time.Duration // from the first publish to the last first arrival
	bridgeCPU  time.Duration // the bridges' CPU over it
	clusterCPU time.Duration // this process's: the three nats-servers and the sink
	extras     string
}

func (d delivered) String() string {
	return fmt.Sprintf("%.0f/s in %v, CPU: bridges %.1f s, nats-servers and sink %.1f s (%.2f of the machine's %d cores), %s",
		d.rate, d.took.Round(time.Millisecond), d.bridgeCPU.Seconds(), d.clusterCPU.Seconds(),
		(d.bridgeCPU+d.clusterCPU).Seconds()/d.took.Seconds(), runtime.NumCPU(), d.extras)
}

// deliverAll publishes msgs messages on subject and waits until each
// reached all regs registrations through the bridges brs.
func (c *clusterBench) deliverAll(ctx context.Context, brs []*bridgeProc, s stream, subject string, regs, msgs int) (delivered, error) {
	last, err := c.lastSeq(ctx, s)
	if err != nil {
		return delivered{}, err
	}
	r := newRun(regs, msgs, last+1, false)
	c.sink.start(r)
	cpu0, self0 := cpuOf(brs), selfCPU()
	start := time.Now()
	if _, err := c.publishBacklog(ctx, s, subject, msgs, bytes.Repeat([]byte{'x'}, kib)); err != nil {
		return delivered{}, err
	}
	if err := waitRun(ctx, r, subject); err != nil {
		c.explainStall(ctx, brs, r, "fan-%05d")
		return delivered{}, err
	}
	d := delivered{took: time.Duration(r.last.Load() - start.UnixNano()),
		bridgeCPU: cpuOf(brs) - cpu0, clusterCPU: selfCPU() - self0, extras: r.extras()}
	d.rate = float64(regs*msgs) / d.took.Seconds()
	return d, nil
}

// Takeover (C4): liveRegs registrations on one subject, liveRate messages
// a second to each, through three bridges.
const (
	liveRegs = 12
	liveRate = 50
)

// takeover is C4: the bridge owning the most registrations killed with
// SIGKILL while messages stream in, and the time from the kill to the
// first POST another bridge makes to one of its registrations; the
// killed bridge is started again, and the ownership let settle, before
// the next kill.
func (c *clusterBench) takeover(ctx context.Context) result {
	const what = "C4 takeover after kill -9, median"
	kills := c.sz.c4Kills
	logf("C4: takeover after kill -9, %d kills, --lease-ttl %v", kills, benchTTL)
	s, done, err := c.begin(ctx, "C4")
	if err != nil {
		return failed("C4", what, err)
	}
	defer done()
	subject := s.prefix + ".live"
	brs, err := c.startKVs(ctx, s, "C4", 3)
	if err != nil {
		return failed("C4", what, err)
	}
	defer func() { stopAll(brs) }()
	if err := c.createOn(ctx, brs[0], liveRegs, "live-%02d", subject); err != nil {
		return failed("C4", what, err)
	}
	if _, err := waitSettled(ctx, brs[0], names(3), liveRegs); err != nil {
		return failed("C4", what, err)
	}
	last, err := c.lastSeq(ctx, s)
	if err != nil {
		return failed("C4", what, err)
	}
	// Room for every message of the longest run: each kill takes at most
	// a few TTLs to take over, restart and settle.
	r := newRun(liveRegs, liveRate*kills*int((12*benchTTL+time.Minute)/time.Second), last+1, false)
	c.sink.start(r)
	pubCtx, stopPub := context.WithCancel(ctx)
	var published atomic.Int64
	pubDone := make(chan error, 1)
	go func() { pubDone <- c.steady(pubCtx, subject, &published) }()
	stopPublisher := sync.OnceValue(func() error {
		stopPub()
		return <-pubDone
	})
	defer stopPublisher()

	var took []time.Duration
	for k := range kills {
		d, victim, n, err := c.killOne(ctx, brs, r)
		if err != nil {
			return failed("C4", what, err)
		}
		logf("C4: kill %d of %d: %s owned %d registrations; first POST to one of them %v after the kill", k+1, kills, instanceName(victim), n, d.Round(time.Millisecond))
		took = append(took, d)
		if brs[victim], err = c.restartKV(ctx, s, "C4", instanceName(victim)); err != nil {
			return failed("C4", what, err)
		}
		alive := slices.IndexFunc(brs, func(b *bridgeProc) bool { return b != nil })
		if _, err := waitSettled(ctx, brs[alive], names(3), liveRegs); err != nil {
			return failed("C4", what, err)
		}
	}
	if err := stopPublisher(); err != nil {
		return failed("C4", what, err)
	}
	med, worst := percentile(took, 50), slices.Max(took)
	limit := 2 * benchTTL
	ttl := fmt.Sprintf("TTL %v", benchTTL)
	return result{name: "C4",
		rows: []row{
			{what: what, bridge: ms(med), baseline: ttl, ratio: fmt.Sprintf("%.2f", med.Seconds()/benchTTL.Seconds()),
				target: "≤ 2 × TTL", met: yesNo(med <= limit)},
			{what: "C4 takeover after kill -9, worst", bridge: ms(worst), baseline: ttl, ratio: fmt.Sprintf("%.2f", worst.Seconds()/benchTTL.Seconds()),
				target: "≤ 2 × TTL", met: yesNo(worst <= limit)},
		},
		line: fmt.Sprintf("C4: median %s, worst %s with --lease-ttl %v — %d kills of the bridge owning most of %d registrations, %d messages/s each: %s; %d messages published, %s, %d error log lines",
			ms(med), ms(worst), benchTTL, kills, liveRegs, liveRate, fmtDurations(took), published.Load(), r.extras(), errorLines(brs)),
	}
}

// steady publishes liveRate messages a second on subject until ctx ends.
func (c *clusterBench) steady(ctx context.Context, subject string, published *atomic.Int64) error {
	tick := time.NewTicker(time.Second / liveRate)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := c.js.Publish(pctx, subject, stamped(kib))
		cancel()
		if err != nil && ctx.Err() == nil {
			return fmt.Errorf("publishing the steady stream: %w", err)
		}
		published.Add(1)
	}
}

// killOne kills the bridge of brs owning the most registrations with
// SIGKILL and returns the time from the kill to the first POST to one of
// its registrations after it was gone, which only another bridge can
// have made; its place in brs is left nil.
func (c *clusterBench) killOne(ctx context.Context, brs []*bridgeProc, r *run) (time.Duration, int, int, error) {
	own, err := owners(ctx, brs[0])
	if err != nil {
		return 0, 0, 0, err
	}
	name, ids := heaviest(own)
	victim := slices.Index(names(len(brs)), name)
	if victim < 0 {
		return 0, 0, 0, fmt.Errorf("the heaviest owner %q is not one of the bench's bridges", name)
	}
	regs := make([]int, len(ids))
	for i, id := range ids {
		if regs[i], err = strconv.Atoi(strings.TrimPrefix(id, "live-")); err != nil {
			return 0, 0, 0, fmt.Errorf("registration %q: %w", id, err)
		}
	}
	br := brs[victim]
	killed := time.Now()
	if err := br.cmd.Process.Kill(); err != nil {
		return 0, 0, 0, err
	}
	<-br.done
	brs[victim] = nil
	gone := time.Now().UnixNano()
	limit := 6 * benchTTL
	for {
		for _, reg := range regs {
			if at := r.latestAt(reg); at > gone {
				return time.Duration(at - killed.UnixNano()), victim, len(ids), nil
			}
		}
		if time.Since(killed) > limit {
			return 0, 0, 0, fmt.Errorf("no POST to any of %s's %d registrations within %v of its kill", name, len(ids), limit)
		}
		if err := sleepCtx(ctx, 2*time.Millisecond); err != nil {
			return 0, 0, 0, err
		}
	}
}

// restartKV starts a killed bridge again under its name, which is free
// once its lease has expired; until then the start is refused, and
// tried again.
func (c *clusterBench) restartKV(ctx context.Context, s stream, bucket, instance string) (*bridgeProc, error) {
	deadline := time.Now().Add(4 * benchTTL)
	for {
		br, err := c.startKV(ctx, s, bucket, instance)
		if err == nil || time.Now().After(deadline) {
			return br, err
		}
		if err := sleepCtx(ctx, benchTTL/5); err != nil {
			return nil, err
		}
	}
}

// Cursor writes (C5): c5Rows registrations, written c5Concurrency at once.
const (
	c5Rows        = 1000
	c5Concurrency = kvstore.DefaultFlushConcurrency
)

// cursorWrites is C5: the cursor writes per second the kv store sustains
// on the cluster — every registration advanced, then flushed, again and
// again — beside a bare kv.Update loop on the same bucket, the same keys
// and bytes, as many at once: the raw limit of compare-and-set on one
// replicated bucket.
func (c *clusterBench) cursorWrites(ctx context.Context) result {
	const what = "C5 kv store cursor writes (per s)"
	dur := c.sz.c5Dur
	logf("C5: cursor writes of %d registrations, %d at once, for %v; against a bare kv.Update loop", c5Rows, c5Concurrency, dur)
	defer c.deleteBuckets("C5")
	st, err := kvstore.Open(ctx, c.js, kvstore.WithPrefix("C5"), kvstore.WithReplicas(clusterNodes),
		kvstore.WithFlushConcurrency(c5Concurrency), kvstore.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		return failed("C5", what, err)
	}
	defer st.Close()
	ids := make([]string, c5Rows)
	for i := range ids {
		ids[i] = fmt.Sprintf("w%04d", i)
		reg := cursor.Registration{Config: cursor.Config{ID: ids[i], Namespace: "outbox", Subject: "bench.c5.orders", URL: c.sink.url + "/r/0"}, NextSeq: 1}
		if _, _, err := st.Create(ctx, reg, nil); err != nil {
			return failed("C5", what, err)
		}
	}
	kv, err := c.js.KeyValue(ctx, "C5_regs")
	if err != nil {
		return failed("C5", what, err)
	}
	var bare [2]float64
	if bare[0], err = bareCAS(ctx, kv, dur); err != nil {
		return failed("C5", what, err)
	}
	logf("C5: bare kv.Update before: %.0f writes/s", bare[0])
	store, err := flushLoop(ctx, st, ids, dur)
	if err != nil {
		return failed("C5", what, err)
	}
	logf("C5: kv store: %.0f writes/s", store)
	if bare[1], err = bareCAS(ctx, kv, dur); err != nil {
		return failed("C5", what, err)
	}
	logf("C5: bare kv.Update after: %.0f writes/s", bare[1])
	best := max(bare[0], bare[1])
	return result{name: "C5", figure: store, vsBare: store / best,
		rows: []row{{what: what, bridge: count(store), baseline: count(best) + " CAS/s", ratio: ratio(store, best), target: "report", met: "-"}},
		line: fmt.Sprintf("C5: ratio %s — %d registrations advanced and flushed, %d writes at once, for %v each: kv store %.0f writes/s; bare kv.Update of the same keys and bytes %.0f/s (before %.0f, after %.0f); bucket of %d replicas; %d fenced writes",
			ratio(store, best), c5Rows, c5Concurrency, dur, store, best, bare[0], bare[1], clusterNodes, st.FencedWrites()),
	}
}

// flushLoop advances every id by one message and flushes, until dur has
// passed, and returns the cursor writes per second.
func flushLoop(ctx context.Context, st *kvstore.Store, ids []string, dur time.Duration) (float64, error) {
	start := time.Now()
	writes := 0
	for seq := uint64(2); time.Since(start) < dur; seq++ {
		for _, id := range ids {
			if err := st.Advance(ctx, id, cursor.Progress{NextSeq: seq, Delivered: 1}); err != nil {
				return 0, err
			}
		}
		if err := st.Flush(ctx); err != nil {
			return 0, err
		}
		writes += len(ids)
	}
	return float64(writes) / time.Since(start).Seconds(), nil
}

// bareCAS rewrites every key of kv with its own bytes and the revision of
// its last write, c5Concurrency at once, until dur has passed, and
// returns the writes per second.
func bareCAS(ctx context.Context, kv jetstream.KeyValue, dur time.Duration) (float64, error) {
	keys, err := kv.ListKeys(ctx)
	if err != nil {
		return 0, err
	}
	type entry struct {
		key string
		val []byte
		rev uint64
	}
	var entries []entry
	for k := range keys.Keys() {
		e, err := kv.Get(ctx, k)
		if err != nil {
			return 0, err
		}
		entries = append(entries, entry{k, e.Value(), e.Revision()})
	}
	if len(entries) == 0 {
		return 0, fmt.Errorf("bucket %s has no keys", kv.Bucket())
	}
	// Worker w owns the keys w, w+c5Concurrency, …: one write at a time
	// per key, as Flush makes them.
	var writes atomic.Int64
	errs := make([]error, c5Concurrency)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range min(c5Concurrency, len(entries)) {
		var mine []*entry
		for i := w; i < len(entries); i += c5Concurrency {
			mine = append(mine, &entries[i])
		}
		wg.Go(func() {
			for k := 0; time.Since(start) < dur; k++ {
				e := mine[k%len(mine)]
				rev, err := kv.Update(ctx, e.key, e.val, e.rev)
				if err != nil {
					errs[w] = fmt.Errorf("kv.Update %s: %w", e.key, err)
					return
				}
				e.rev = rev
				writes.Add(1)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	return float64(writes.Load()) / time.Since(start).Seconds(), nil
}

// explainStall logs how every bridge sees the first registrations a
// stalled run left short, and their newest attempts: whether the cursor
// stayed behind, moved past the messages, or waits in a backoff.
func (c *clusterBench) explainStall(ctx context.Context, brs []*bridgeProc, r *run, idFormat string) {
	short := r.shortRegs()
	for _, reg := range short[:min(len(short), 3)] {
		id := fmt.Sprintf(idFormat, reg)
		for i, br := range brs {
			var row, attempts json.RawMessage
			_, err := br.api(ctx, http.MethodGet, "/v1/registrations/"+id, nil, &row)
			_, err2 := br.api(ctx, http.MethodGet, "/v1/registrations/"+id+"/attempts?limit=3", nil, &attempts)
			logf("  stall: %s via %s: %s (err %v); attempts %s (err %v)", id, instanceName(i), row, err, attempts, err2)
			var listed struct {
				Registrations []struct{ ID string } `json:"registrations"`
			}
			_, err = br.api(ctx, http.MethodGet, fmt.Sprintf("/v1/registrations?after="+idFormat+"&limit=1", reg-1), nil, &listed)
			logf("  stall: %s listed by %s's index: %v (err %v)", id, instanceName(i), len(listed.Registrations) == 1 && listed.Registrations[0].ID == id, err)
		}
	}
	// A goroutine dump of every bridge, into its log: a turn that never
	// ended shows where it waits.
	for _, br := range brs {
		_ = br.cmd.Process.Signal(syscall.SIGQUIT)
	}
	time.Sleep(time.Second)
}

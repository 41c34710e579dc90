package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/jetstream-bridge/bridge/cursor"
)

// idleRun is what S3 and R2 measured of one bridge holding many idle
// registrations, each on a subject of its own, with no traffic.
type idleRun struct {
	n int
	// readyz and firstDelivery are from the bridge process's start.
	readyz, firstDelivery time.Duration
	settled               bool
	settleTook            time.Duration
	cpuRate               float64 // CPU-s per s over the idle window
	mem                   memory  // at the end of the idle window
	scrapes               []time.Duration
	scrapeBytes           int64
	lat, bareLat          []time.Duration // one message at a time: bridge, bare consumer
	errLines              int
}

const samples = 5 // one-message latencies and /metrics scrapes per idle run

// idleSubject is registration i's subject in an idle run.
func idleSubject(s stream, i int) string { return fmt.Sprintf("%s.idle.%d", s.prefix, i) }

// idle preloads n idle registrations into a fresh bridge's store, starts
// the bridge and measures it: its start, its CPU and memory at rest, a
// /metrics scrape, one message's latency; then the same messages through
// a bare consumer with the bridge gone.
func (b *bench) idle(ctx context.Context, name string, n int) (idleRun, error) {
	f := idleRun{n: n}
	s, err := b.newStream(ctx, strings.ToLower(name), allowDirect)
	if err != nil {
		return f, err
	}
	defer b.deleteStream(s)
	dir, err := b.newBridgeDir(strings.ToLower(name))
	if err != nil {
		return f, err
	}
	loadStart := time.Now()
	err = preload(dir, n, func(i int) cursor.Registration {
		return cursor.Registration{NextSeq: 1, Config: cursor.Config{
			ID: fmt.Sprintf("idle-%06d", i), Namespace: "outbox", Subject: idleSubject(s, i),
			URL: fmt.Sprintf("%s/r/%d", b.sink.url, i),
		}}
	})
	if err != nil {
		return f, fmt.Errorf("preloading %s registrations: %w", count(float64(n)), err)
	}
	logf("%s: preloaded %s registrations in %v", name, count(float64(n)), time.Since(loadStart).Round(time.Millisecond))

	br, err := b.startBridgeWithin(ctx, s, dir, b.sz.idleStart)
	if err != nil {
		return f, err
	}
	defer br.stop() // at once if stopped before
	f.readyz = br.ready.Sub(br.started)
	if f.firstDelivery, err = b.firstDelivery(ctx, br, s); err != nil {
		return f, err
	}
	logf("%s: /readyz 200 after %v, first delivery %v after the start", name,
		f.readyz.Round(time.Millisecond), f.firstDelivery.Round(time.Millisecond))
	if err := b.rest(ctx, br, &f); err != nil {
		return f, err
	}
	logf("%s: settled=%v after %v, then %.4f CPU-s/s over %v idle", name, f.settled, f.settleTook.Round(time.Second), f.cpuRate, b.sz.idleWindow)
	for range samples {
		took, size, err := br.scrape(ctx)
		if err != nil {
			return f, err
		}
		f.scrapes, f.scrapeBytes = append(f.scrapes, took), size
	}
	if f.lat, err = b.oneAtATime(ctx, s, n); err != nil {
		return f, err
	}
	f.errLines = errorsLogged(br.logPath)
	br.stop()

	// The baseline latency: the same messages through a bare ordered
	// consumer and one POST each, with the bridge gone.
	if f.bareLat, err = b.bareSamples(ctx, s, samples); err != nil {
		return f, fmt.Errorf("baseline: %w", err)
	}
	return f, nil
}

// probeEvery is how often firstDelivery publishes while it waits.
const probeEvery = 50 * time.Millisecond

// firstDelivery publishes a message to registration 0 every probeEvery
// from /readyz 200 on, and returns when the first of them arrived, counted
// from the bridge's start. /readyz says NATS is connected; the daemon
// loads its registrations after it (bridge.Daemon.Run) and delivers
// nothing until it has, so this delivery, not /readyz, is when the bridge
// serves what it holds. Publishing again and again, rather than once,
// times the first message the bridge can take live instead of the turn a
// restart's catch-up of every registration gives an old one. The wait
// ends idleStart after the start, or as soon as the bridge exits.
func (b *bench) firstDelivery(ctx context.Context, br *bridgeProc, s stream) (time.Duration, error) {
	last, err := b.lastSeq(ctx, s)
	if err != nil {
		return 0, err
	}
	probes := int(b.sz.idleStart/probeEvery) + 1
	r := newRun(1, probes, last+1, false)
	b.sink.start(r)
	deadline := time.NewTimer(time.Until(br.started.Add(b.sz.idleStart)))
	defer deadline.Stop()
	tick := time.NewTicker(probeEvery)
	defer tick.Stop()
	for sent := 0; r.distinct.Load() == 0; {
		if sent < probes {
			if err := b.publishOne(ctx, idleSubject(s, 0)); err != nil {
				return 0, err
			}
			sent++
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-br.done:
			return 0, fmt.Errorf("bridge exited before its first delivery (%v); log: %s", br.exitErr, tail(br.logPath))
		case <-deadline.C:
			mem, _ := memoryOf(br.pid())
			return 0, fmt.Errorf("/readyz 200 after %v, then %d messages published to idle-000000, none delivered within %v of the bridge's start (RSS %.0f MiB): registrations not loaded or not served; log: %s",
				br.ready.Sub(br.started).Round(time.Millisecond), sent, b.sz.idleStart, mib(mem.rss), tail(br.logPath))
		case <-tick.C:
		}
	}
	first := int64(0)
	for i := range r.arrived {
		if t := r.arrived[i].Load(); t > 0 && (first == 0 || t < first) {
			first = t
		}
	}
	return time.Unix(0, first).Sub(br.started), nil
}

// rest waits for the bridge to settle, then measures its CPU over the idle
// window and its memory at the end of it.
func (b *bench) rest(ctx context.Context, br *bridgeProc, f *idleRun) error {
	var err error
	if f.settleTook, f.settled, err = settle(ctx, br.pid(), b.sz.idleWarm, b.sz.idleSettle); err != nil {
		return err
	}
	c0, err := cpuTime(br.pid())
	if err != nil {
		return err
	}
	t0 := time.Now()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(b.sz.idleWindow):
	}
	c1, err := cpuTime(br.pid())
	if err != nil {
		return err
	}
	f.cpuRate = (c1 - c0).Seconds() / time.Since(t0).Seconds()
	f.mem, err = memoryOf(br.pid())
	return err
}

// oneAtATime sends one message at a time to registrations spread over the
// store and returns their publish→arrival times.
func (b *bench) oneAtATime(ctx context.Context, s stream, n int) ([]time.Duration, error) {
	first, err := b.lastSeq(ctx, s)
	if err != nil {
		return nil, err
	}
	r := newRun(n, samples, first+1, true)
	b.sink.start(r)
	for i := range samples {
		k := (i*7919 + 13) % n
		if err := b.publishOne(ctx, idleSubject(s, k)); err != nil {
			return nil, err
		}
		if err := waitCount(ctx, r, int64(i+1), 10*time.Second); err != nil {
			return nil, fmt.Errorf("one message to an idle registration: %w", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return r.latencies(), nil
}

// scrape times one GET /metrics with its whole answer read, as a
// Prometheus server's scrape would.
func (b *bridgeProc) scrape(ctx context.Context) (time.Duration, int64, error) {
	ctx, cancel := context.WithTimeout(ctx, stallAfter)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+b.admin+"/metrics", nil)
	if err != nil {
		return 0, 0, err
	}
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, fmt.Errorf("scraping /metrics: %w", err)
	}
	defer resp.Body.Close()
	size, err := io.Copy(io.Discard, resp.Body)
	took := time.Since(start)
	if err != nil {
		return 0, 0, fmt.Errorf("scraping /metrics: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("scraping /metrics: %s", resp.Status)
	}
	return took, size, nil
}

// rows are the figures S3 and R2 both report: CPU and memory at rest, and
// one message's latency beside the bare consumer's.
func (f idleRun) rows(name string, rssLimit float64) []row {
	worst, bareWorst := slices.Max(f.lat), slices.Max(f.bareLat)
	rss := mib(f.mem.rss)
	return []row{
		{what: name + " idle CPU (CPU-s per s)", bridge: fmt.Sprintf("%.4f", f.cpuRate), baseline: "-", ratio: "-", target: "≤ 0.02", met: yesNo(f.cpuRate <= 0.02)},
		{what: name + " idle RSS (MiB)", bridge: fmt.Sprintf("%.0f", rss), baseline: "-", ratio: "-", target: fmt.Sprintf("≤ %.0f", rssLimit), met: yesNo(rss <= rssLimit)},
		{what: name + " one message, worst of 5", bridge: ms(worst), baseline: ms(bareWorst), ratio: ratio(float64(worst), float64(bareWorst)),
			target: "≤ 50 ms", met: yesNo(worst <= 50*time.Millisecond)},
	}
}

// line is the one-line summary S3 and R2 share.
func (f idleRun) line(name string, idleWindow time.Duration) string {
	return fmt.Sprintf("%s: ratio %s (one-message latency) — %s idle registrations: /readyz 200 after %v, first message delivered %v after the start; settled=%v after %v, then %.4f CPU-s/s over %v idle, RSS %.0f MiB (peak %.0f); /metrics scrapes (%d B) %s; one message %s vs bare consumer %s; %d error log lines",
		name, ratio(float64(slices.Max(f.lat)), float64(slices.Max(f.bareLat))), count(float64(f.n)),
		f.readyz.Round(time.Millisecond), f.firstDelivery.Round(time.Millisecond), f.settled, f.settleTook.Round(time.Second),
		f.cpuRate, idleWindow, mib(f.mem.rss), mib(f.mem.hwm), f.scrapeBytes, fmtDurations(f.scrapes),
		fmtDurations(f.lat), fmtDurations(f.bareLat), f.errLines)
}

// idleScale is S3: many registrations on distinct subjects and no traffic.
func (b *bench) idleScale(ctx context.Context) result {
	logf("S3: idle scale, %s registrations", count(float64(b.sz.s3Regs)))
	f, err := b.idle(ctx, "S3", b.sz.s3Regs)
	if err != nil {
		return failed("S3", "S3 idle CPU (CPU-s per s)", err)
	}
	return result{name: "S3", rows: f.rows("S3", 300), line: f.line("S3", b.sz.idleWindow)}
}

// registryScale is R2: S3's measures with ten times the registrations,
// and the start and the /metrics scrape those make costly.
func (b *bench) registryScale(ctx context.Context) result {
	const whatStart = "R2 start to first delivery"
	logf("R2: registry scale, %s registrations", count(float64(b.sz.r2Regs)))
	f, err := b.idle(ctx, "R2", b.sz.r2Regs)
	if err != nil {
		return failed("R2", whatStart, err)
	}
	scrape := slices.Max(f.scrapes)
	rows := append([]row{{what: whatStart, bridge: fmt.Sprintf("%.2f s", f.firstDelivery.Seconds()), baseline: "-", ratio: "-",
		target: "≤ 15 s", met: yesNo(f.firstDelivery <= 15*time.Second)}}, f.rows("R2", 512)...)
	rows = append(rows, row{what: "R2 /metrics scrape, worst of 5", bridge: ms(scrape), baseline: "-", ratio: "-",
		target: "≤ 200 ms", met: yesNo(scrape <= 200*time.Millisecond)})
	return result{name: "R2", rows: rows, line: f.line("R2", b.sz.idleWindow)}
}

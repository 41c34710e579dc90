package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/jetstream-bridge/bridge/cursor"
)

// The ordering-key scenarios (CONTRACT §12): a registration that names
// what must stay in order keeps many POSTs in flight. S1k is S1's drain
// so (scenarios.go); S5 is where it matters most, a slow receiver; MEMK
// is what a key that keeps failing costs the bridge's memory.

// keyedOrder is the ordering S5 and MEMK register: order per subject,
// 16 POSTs in flight.
var keyedOrder = ordering{Key: "subject", MaxInFlight: 16}

// slowAnswer is how long S5's receiver takes to answer.
const slowAnswer = 20 * time.Millisecond

// withTarget is r with every row's target set to target, for a result
// made by a helper that does not know the scenario's.
func withTarget(r result, target string) result {
	for i := range r.rows {
		r.rows[i].target = target
	}
	return r
}

// slowKeyed is S5: one registration on a receiver answering after 20 ms,
// its backlog spread over 200 subjects. Keyed by subject with 16 in
// flight, against a bare loop POSTing the same messages 16 at a time to
// the same receiver, before and after; and against a strict registration
// (no ordering) draining the start of the same backlog from the same
// receiver, one POST at a time.
func (b *bench) slowKeyed(ctx context.Context) result {
	const name, what = "S5", "S5 20 ms receiver, key subject, 16 in flight (msg/s)"
	const bareTarget, strictTarget = 0.90, 0.90 * 16
	n, strictN := b.sz.s5Msgs, b.sz.s5Strict
	v := variant{name: name, what: what, config: allowDirect, keyed: &keyedDrain{subjects: 200, order: keyedOrder}}
	logf("S5: a receiver answering after %v, %s × 1 KiB over %d subjects, keyed and strict", slowAnswer, count(float64(n)), v.keyed.subjects)
	s, err := b.newStream(ctx, "s5", allowDirect)
	if err != nil {
		return v.failed(err)
	}
	defer b.deleteStream(s)
	filter, subjectOf := v.subjects(s.prefix + ".orders")
	first, err := b.publishSpread(ctx, s, subjectOf, n, bytes.Repeat([]byte{'x'}, kib))
	if err != nil {
		return v.failed(err)
	}
	b.sink.setDelay(slowAnswer)
	defer b.sink.setDelay(0)

	runBare := func(when string) (bareRun, error) {
		return b.bareLoop(ctx, name, fmt.Sprintf("%s, %s bare POSTs of the same 1 KiB, %d at a time, to the same receiver", when, count(float64(n)), v.inFlight()),
			n, v.inFlight(), wire{stream: s.name, subject: subjectOf(n - 1), delayed: true})
	}
	var bare baseline
	if bare.before, err = runBare("before"); err != nil {
		return v.failed(err)
	}
	start := func(ctx context.Context) (*bridgeProc, error) { return b.startFresh(ctx, s, "s5") }
	keyed, early := b.drainBy(ctx, start, filter, first, n, v, nil)
	if early != nil {
		return withTarget(*early, fmt.Sprintf("≥ %.2f × bare", bareTarget))
	}
	logf("S5: keyed drained at %.0f msg/s", keyed.rate)
	if bare.after, err = runBare("after"); err != nil {
		return v.failed(err)
	}
	strictV := variant{name: name, what: "S5 20 ms receiver, strict (msg/s)", config: allowDirect}
	logf("S5: strict registration, the first %s of the backlog", count(float64(strictN)))
	strict, early := b.drainBy(ctx, start, filter, first, strictN, strictV, nil)
	if early != nil {
		return *early
	}
	logf("S5: strict drained at %.0f msg/s", strict.rate)

	best := bare.best()
	vsBare, vsStrict := keyed.rate/best, keyed.rate/strict.rate
	side := func(d drained, n int) string {
		return fmt.Sprintf("%s in %v (%.0f msg/s), CPU %s per message, peak RSS %.0f MiB, %s, %d error log lines",
			count(float64(n)), d.took.Round(time.Millisecond), d.rate, perMsg(d.cpu, n), mib(d.hwm), d.extras, d.errLines)
	}
	return result{name: name, figure: keyed.rate, vsBare: vsBare,
		rows: []row{
			{what: what, bridge: count(keyed.rate), baseline: count(best) + " POST/s", ratio: ratioFor(vsBare, bareTarget),
				target: fmt.Sprintf("≥ %.2f × bare", bareTarget), met: yesNo(vsBare >= bareTarget)},
			{what: "S5 keyed ÷ strict, same receiver", bridge: count(keyed.rate), baseline: count(strict.rate) + " msg/s", ratio: ratioFor(vsStrict, strictTarget),
				target: "≥ 0.90 × 16", met: yesNo(vsStrict >= strictTarget)},
		},
		line: fmt.Sprintf("S5: ratio %s against the bare loop, %s against strict — a receiver answering after %v (at most %.0f answers/s with %d in flight): keyed (%s, maxInFlight %d) drained %s; bare POST loop with %d in flight to the same receiver %s; strict registration drained the first %s",
			ratio(keyed.rate, best), ratio(keyed.rate, strict.rate), slowAnswer, float64(v.inFlight())*float64(time.Second)/float64(slowAnswer), v.inFlight(),
			keyedOrder.Key, keyedOrder.MaxInFlight, side(keyed, n), v.inFlight(), bare, side(strict, strictN)),
	}
}

// listedWindow is what MEMK reads of a registration in the admin API's
// list.
type listedWindow struct {
	ID       string `json:"id"`
	State    string `json:"state"`
	NextSeq  uint64 `json:"nextSeq"`
	Attempts int    `json:"attempts"`
	InFlight int    `json:"inFlight"`
	Ahead    int    `json:"ahead"`
}

// windows is what the admin API says of MEMK's registrations.
type windows struct {
	listed, full, atHeld, parked, maxAttempts int
}

func (w windows) String() string {
	return fmt.Sprintf("%d listed, %d with a full window at the held message, %d with the cursor there, %d parked, at most %d attempts",
		w.listed, w.full, w.atHeld, w.parked, w.maxAttempts)
}

// readWindows lists br's registrations: how many hold a window of acked
// sequences ahead of a cursor standing at held.
func readWindows(ctx context.Context, br *bridgeProc, held uint64, acked int) (windows, error) {
	list, err := listAll[listedWindow](ctx, br)
	if err != nil {
		return windows{}, err
	}
	w := windows{listed: len(list)}
	for _, r := range list {
		if r.NextSeq == held {
			w.atHeld++
			if r.Ahead >= acked {
				w.full++
			}
		}
		if r.State == string(cursor.Parked) {
			w.parked++
		}
		w.maxAttempts = max(w.maxAttempts, r.Attempts)
	}
	return w, nil
}

// waitWindows waits until all regs registrations of br hold a full
// window at held, or for limit.
func waitWindows(ctx context.Context, br *bridgeProc, regs int, held uint64, acked int, limit time.Duration) (windows, error) {
	deadline := time.Now().Add(limit)
	for {
		w, err := readWindows(ctx, br, held, acked)
		if err != nil || w.full == regs {
			return w, err
		}
		if time.Now().After(deadline) {
			return w, fmt.Errorf("windows not full within %v: %s", limit, w)
		}
		select {
		case <-ctx.Done():
			return w, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// bridgeMemory is a bridge's memory once it settled.
type bridgeMemory struct {
	memory
	settled bool
	took    time.Duration
}

// settledMemory waits for br to settle and reads its memory.
func (b *bench) settledMemory(ctx context.Context, br *bridgeProc) (bridgeMemory, error) {
	took, ok, err := settle(ctx, br.pid(), b.sz.idleWarm, b.sz.idleSettle)
	if err != nil {
		return bridgeMemory{}, err
	}
	mem, err := memoryOf(br.pid())
	return bridgeMemory{memory: mem, settled: ok, took: took}, err
}

func (m bridgeMemory) String() string {
	return fmt.Sprintf("peak RSS %.0f MiB, RSS %.0f MiB once settled (settled=%v after %v)", mib(m.hwm), mib(m.rss), m.settled, m.took.Round(time.Second))
}

// perReg is what each of regs registrations adds to base, in KiB.
func perReg(m, base int64, regs int) float64 { return float64(m-base) / float64(regs) / kib }

// heldWindows is MEMK: keyed registrations, each with its window full
// behind a key that keeps failing. All of them read one stream: a first
// message on a subject the receiver answers 503 forever (no Retry-After,
// so only that message backs off), then WindowSize+4 messages on 256
// other subjects, answered 204. Each registration's cursor stays at the
// first message with the WindowSize-1 after it acknowledged ahead of it,
// and the last few wait for the window to move. The bridge's peak memory,
// against a bridge holding the same registrations caught up (created at
// the stream's end), and again after a restart on the full windows' store,
// where no draining has left its garbage.
func (b *bench) heldWindows(ctx context.Context) result {
	const name = "MEMK"
	regs := b.sz.memkRegs
	later := cursor.WindowSize + 4
	acked := cursor.WindowSize - 1
	what := fmt.Sprintf("MEMK peak RSS, %s registrations with full windows (MiB)", count(float64(regs)))
	logf("MEMK: %s keyed registrations, each with its first message refused and %s after it", count(float64(regs)), count(float64(later)))
	s, err := b.newStream(ctx, "memk", allowDirect)
	if err != nil {
		return failed(name, what, err)
	}
	defer b.deleteStream(s)
	hold := s.prefix + ".hold"
	first, err := b.publishSpread(ctx, s, func(i int) string {
		if i == 0 {
			return hold
		}
		return fmt.Sprintf("%s.ok.%d", s.prefix, i%256)
	}, later+1, bytes.Repeat([]byte{'x'}, kib))
	if err != nil {
		return failed(name, what, err)
	}
	mk := func(start string) func(i int) registration {
		return func(i int) registration {
			order := keyedOrder
			return registration{ID: fmt.Sprintf("held-%04d", i), Namespace: "outbox", Subject: s.prefix + ".>",
				URL: fmt.Sprintf("%s/r/%d", b.sink.url, i), Start: start, Ordering: &order}
		}
	}

	// The baseline: the same registrations, created at the stream's end,
	// with nothing to deliver.
	logf("MEMK: baseline, %s idle keyed registrations", count(float64(regs)))
	idleBr, err := b.startFresh(ctx, s, "memk-idle")
	if err != nil {
		return failed(name, what, err)
	}
	if _, err := createMany(ctx, idleBr, regs, mk("new")); err != nil {
		idleBr.stop()
		return failed(name, what, fmt.Errorf("idle baseline: %w", err))
	}
	idle, err := b.settledMemory(ctx, idleBr)
	idleBr.stop()
	if err != nil {
		return failed(name, what, fmt.Errorf("idle baseline: %w", err))
	}
	logf("MEMK: idle baseline %s", idle)

	b.sink.setRefuse(func(r *http.Request) bool { return r.Header.Get("Ce-Subject") == hold })
	defer b.sink.setRefuse(nil)
	r := newRun(regs, later+1, first, false)
	b.sink.start(r)
	br, err := b.startFresh(ctx, s, "memk")
	if err != nil {
		return failed(name, what, err)
	}
	defer br.stop() // at once if stopped before
	start := time.Now()
	if _, err := createMany(ctx, br, regs, mk("first")); err != nil {
		return failed(name, what, err)
	}
	if err := waitDistinct(ctx, r, int64(regs*acked), "MEMK windows"); err != nil {
		return failed(name, what, err)
	}
	took := time.Since(start)
	w, err := waitWindows(ctx, br, regs, first, acked, stallAfter)
	if err != nil {
		return failed(name, what, err)
	}
	logf("MEMK: %s acknowledged in %v; %s", count(float64(regs*acked)), took.Round(time.Millisecond), w)
	held, err := b.settledMemory(ctx, br)
	if err != nil {
		return failed(name, what, err)
	}
	logf("MEMK: holding, %s", held)
	past := 0
	for reg := range regs {
		for m := cursor.WindowSize; m <= later; m++ {
			if r.arrived[reg*r.msgs+m].Load() != 0 {
				past++
			}
		}
	}
	errLines := errorsLogged(br.logPath)
	br.stop()

	// The same store again: the windows read back, nothing left to drain.
	posted := r.total.Load()
	again, err := b.startBridgeWithin(ctx, s, br.dataDir, time.Minute)
	if err != nil {
		return failed(name, what, fmt.Errorf("restart: %w", err))
	}
	defer again.stop()
	w2, err := waitWindows(ctx, again, regs, first, acked, stallAfter)
	if err != nil {
		return failed(name, what, fmt.Errorf("restart: %w", err))
	}
	restarted, err := b.settledMemory(ctx, again)
	if err != nil {
		return failed(name, what, fmt.Errorf("restart: %w", err))
	}
	logf("MEMK: restarted, %s; %s", restarted, w2)
	repeats := r.total.Load() - posted
	errLines += errorsLogged(again.logPath)

	peak := mib(held.hwm)
	return result{name: name,
		rows: []row{
			{what: what, bridge: fmt.Sprintf("%.0f", peak), baseline: fmt.Sprintf("%.0f idle", mib(idle.hwm)), ratio: ratio(float64(held.hwm), float64(idle.hwm)),
				target: "report", met: "-"},
			{what: "MEMK per registration over idle, peak (KiB)", bridge: fmt.Sprintf("%.1f", perReg(held.hwm, idle.hwm, regs)), baseline: "-", ratio: "-",
				target: "report", met: "-"},
			{what: "MEMK the same, restarted on the full windows (KiB)", bridge: fmt.Sprintf("%.1f", perReg(restarted.hwm, idle.hwm, regs)), baseline: "-", ratio: "-",
				target: "report", met: "-"},
		},
		line: fmt.Sprintf("MEMK: %s keyed registrations (%s, maxInFlight %d) on one stream of %s × 1 KiB, the first message answered 503 forever, the others 204: %s acknowledged in %v (%.0f/s), %d POSTs refused, %d past the window; then %s; holding: %s; restarted on its store: %s, %s, %d POSTs repeated; idle baseline (the same registrations created at the stream's end): %s; per registration over idle: %.1f KiB at peak, %.1f KiB settled, restarted %.1f KiB at peak and %.1f KiB settled; %d error log lines",
			count(float64(regs)), keyedOrder.Key, keyedOrder.MaxInFlight, count(float64(later+1)), count(float64(regs*acked)), took.Round(time.Millisecond),
			float64(regs*acked)/took.Seconds(), b.sink.refused.Load(), past, w, held, restarted, w2, repeats, idle,
			perReg(held.hwm, idle.hwm, regs), perReg(held.rss, idle.rss, regs), perReg(restarted.hwm, idle.hwm, regs), perReg(restarted.rss, idle.rss, regs), errLines),
	}
}

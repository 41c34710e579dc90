package main

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/jetstream-bridge/bridge/cursor"
)

// bench runs the scenarios against one env.
type bench struct {
	*env
	sz sizes
}

const (
	kib = 1 << 10
	// stallAfter ends a wait that saw no new delivery for this long: a
	// stuck bridge fails its scenario instead of hanging the run.
	stallAfter = 60 * time.Second
)

// waitRun waits until every delivery of r arrived.
func waitRun(ctx context.Context, r *run, what string) error {
	return waitDistinct(ctx, r, r.want(), what)
}

// waitDistinct waits until want deliveries of r arrived.
func waitDistinct(ctx context.Context, r *run, want int64, what string) error {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	lastN, lastChange, lastLog := int64(0), time.Now(), time.Now()
	for {
		select {
		case <-r.done:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		n := r.distinct.Load()
		if n >= want {
			return nil
		}
		now := time.Now()
		if n != lastN {
			lastN, lastChange = n, now
		} else if now.Sub(lastChange) > stallAfter {
			return fmt.Errorf("%s stalled: %d of %d deliveries arrived, none for %v; %s", what, n, want, stallAfter, r.short(5))
		}
		if now.Sub(lastLog) >= 5*time.Second {
			logf("  %s: %s of %s delivered", what, count(float64(n)), count(float64(want)))
			lastLog = now
		}
	}
}

// shortRegs are the indexes of the registrations missing deliveries.
func (r *run) shortRegs() []int {
	var out []int
	for reg := range r.regs {
		for m := range r.msgs {
			if r.expects(reg, m) && r.arrived[reg*r.msgs+m].Load() == 0 {
				out = append(out, reg)
				break
			}
		}
	}
	return out
}

// short names the first max registrations (by index) missing deliveries,
// each with how many it got and its first missing message: whether a
// stall left whole registrations behind or the end of many.
func (r *run) short(max int) string {
	var out []string
	lacking := 0
	for reg := range r.regs {
		got, of, first := 0, 0, -1
		for m := range r.msgs {
			if !r.expects(reg, m) {
				continue
			}
			of++
			if r.arrived[reg*r.msgs+m].Load() != 0 {
				got++
			} else if first < 0 {
				first = m
			}
		}
		if got == of {
			continue
		}
		lacking++
		if len(out) < max {
			out = append(out, fmt.Sprintf("registration %d: %d of %d, first missing seq %d", reg, got, of, r.firstSeq+uint64(first)))
		}
	}
	return fmt.Sprintf("%d registrations short: %s", lacking, strings.Join(out, "; "))
}

// registration is the admin API's create body, as a user sends it.
type registration struct {
	ID        string         `json:"id"`
	Namespace string         `json:"namespace"`
	Subject   string         `json:"subject"`
	URL       string         `json:"url"`
	Start     any            `json:"start,omitempty"`
	Batch     map[string]any `json:"batch,omitempty"`
	// The receiver options (options.go).
	Headers map[string]string `json:"headers,omitempty"`
	TLS     *receiverTLS      `json:"tls,omitempty"`
	OAuth2  *oauth2Grant      `json:"oauth2,omitempty"`
	// Ordering keys (CONTRACT §12; keyed.go).
	Ordering *ordering `json:"ordering,omitempty"`
	// A filter and the content type that makes data JSON for it
	// (CONTRACT §13; filters.go).
	DataContentType string `json:"dataContentType,omitempty"`
	Filter          string `json:"filter,omitempty"`
}

// ordering is a registration's ordering option.
type ordering struct {
	Key         string `json:"key"`
	MaxInFlight int    `json:"maxInFlight,omitempty"`
}

// errorsLogged counts the error lines in a bridge's JSON log.
func errorsLogged(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return -1
	}
	return bytes.Count(b, []byte(`"level":"ERROR"`))
}

// variant is a scenario on one stream configuration: what names its
// figure in the report, and the stream it runs on.
type variant struct {
	name, what string
	config     streamConfig
	// flags are added to the bridge's command line.
	flags []string
	// keyed, when set, spreads a drain's backlog over subjects and drains
	// it through a registration with ordering keys, against a bare loop
	// keeping as many POSTs in flight as the registration may.
	keyed *keyedDrain
	// filtered, when set, gives a fan-out's registrations filters and
	// JSON messages (filters.go).
	filtered *fanFilter
}

// keyedDrain is how a keyed variant drains.
type keyedDrain struct {
	subjects int // message i of the backlog is on subject i mod subjects
	order    ordering
}

// The drain and fan-out variants. S1 and S2 run on the stream the bridge
// would create; S1d and S2d on one as jetstream.StreamConfig leaves it,
// which is how many users' streams are made.
var (
	s1  = variant{"S1", "S1 drain (msg/s)", allowDirect, nil, nil, nil}
	s1b = variant{"S1b", "S1b drain, batch 100 (msg/s)", allowDirect, nil, nil, nil}
	s1d = variant{"S1d", "S1 drain, default stream (msg/s)", defaultConfig, nil, nil, nil}
	s1o = variant{"S1o", "S1 drain, attempt log off (msg/s)", allowDirect, logOff, nil, nil}
	s1k = variant{"S1k", "S1k drain, key subject, 16 in flight (msg/s)", allowDirect, nil,
		&keyedDrain{subjects: 1_000, order: ordering{Key: "subject", MaxInFlight: 16}}, nil}
	s2  = variant{"S2", "S2 fan-out (deliveries/s)", allowDirect, nil, nil, nil}
	s2d = variant{"S2d", "S2 fan-out, default stream (deliveries/s)", defaultConfig, nil, nil, nil}
	s2o = variant{"S2o", "S2 fan-out, attempt log off (deliveries/s)", allowDirect, logOff, nil, nil}
	s2f = variant{"S2f", "S2f fan-out, filters passing half (deliveries/s)", allowDirect, nil, nil, &halfByParity}
)

// inFlight is how many POSTs v's registration, and so its bare loop,
// keeps in flight.
func (v variant) inFlight() int {
	if v.keyed == nil {
		return 1
	}
	return v.keyed.order.MaxInFlight
}

// loop names v's bare loop in the report.
func (v variant) loop() string {
	if v.keyed == nil {
		return "bare sequential POST loop"
	}
	return fmt.Sprintf("bare POST loop with %d in flight", v.keyed.order.MaxInFlight)
}

// subjects are the filter v's registration reads under base, and the
// subject of each message of its backlog: base itself, or for a keyed
// variant base.<i mod subjects>.
func (v variant) subjects(base string) (filter string, subjectOf func(int) string) {
	if v.keyed == nil {
		return base, func(int) string { return base }
	}
	return base + ".>", func(i int) string { return fmt.Sprintf("%s.%d", base, i%v.keyed.subjects) }
}

// logOff is what S1o and S2o change: the attempt log's cost is S1 and S2
// against them.
var logOff = []string{"--attempt-log=false"}

func (v variant) failed(err error) result { return failed(v.name, v.what, err) }

// drain runs v (S1, S1d, S1o or S1k) and, when batch, S1b on one backlog.
func (b *bench) drain(ctx context.Context, v variant, plain, batch bool) []result {
	n := b.sz.s1Backlog
	logf("%s: drain of a %s × 1 KiB backlog", v.name, count(float64(n)))
	drainFailed := func(err error) []result {
		var out []result
		if plain {
			out = append(out, v.failed(err))
		}
		if batch {
			out = append(out, s1b.failed(err))
		}
		return out
	}
	s, err := b.newStream(ctx, strings.ToLower(v.name), v.config)
	if err != nil {
		return drainFailed(err)
	}
	defer b.deleteStream(s)
	filter, subjectOf := v.subjects(s.prefix + ".orders")
	first, err := b.publishSpread(ctx, s, subjectOf, n, bytes.Repeat([]byte{'x'}, kib))
	if err != nil {
		return drainFailed(err)
	}
	var out []result
	if plain {
		out = append(out, b.drainPlain(ctx, s, v, filter, subjectOf(n-1), first))
	}
	if batch && ctx.Err() == nil {
		out = append(out, b.drainBatched(ctx, s, filter, first))
	}
	return out
}

// drainPlain is v's drain of the backlog from first on filter, in rounds
// between runs of its bare loop; subject is a message's, whose headers
// the bare loop sends.
func (b *bench) drainPlain(ctx context.Context, s stream, v variant, filter, subject string, first uint64) result {
	n, workers := b.sz.s1Backlog, v.inFlight()
	// The baseline POSTs as many messages as the bridge drains, so both
	// figures average the machine's moods over as long a time; a short
	// loop catches a quiet spell or a busy one, and the better of two
	// short ones sets a bar the machine only reaches now and then.
	runBare := func(when string, w wire, posts int) (bareRun, error) {
		return b.bareLoop(ctx, v.name, fmt.Sprintf("%s, %s bare POSTs of the same 1 KiB, %d at a time, from a process of their own",
			when, count(float64(posts)), workers), posts, workers, w)
	}
	same := wire{stream: s.name, subject: subject}
	bare0, err := runBare("before, with the bridge's headers", same, n)
	if err != nil {
		return v.failed(err)
	}
	// For the record, what the headers cost: the same loop with a
	// Content-Type only, shorter, since no ratio is taken against it.
	bodyOnly, err := runBare("with a Content-Type only", wire{}, max(n/5, 1))
	if err != nil {
		return v.failed(err)
	}
	after := func() (bareRun, error) { return runBare("after, with the bridge's headers", same, n) }
	plains, err := b.drainRounds(ctx, s, filter, first, v, bare0, after)
	if err != nil {
		return v.failed(err)
	}
	return drainResult(median(plains), plains, n, bodyOnly, v.loop())
}

// drainBatched is S1b: the backlog drained once in batch mode, against a
// bare loop POSTing the same batches — as many events in each as the
// registration allows, made by the bridge's own projection — one at a
// time, before and after.
func (b *bench) drainBatched(ctx context.Context, s stream, subject string, first uint64) result {
	const events = 100
	n := b.sz.s1Backlog
	w := wire{stream: s.name, subject: subject, batch: events}
	posts := max(n/events, 1)
	runBare := func(when string) (bareRun, error) {
		return b.bareLoop(ctx, "S1b", fmt.Sprintf("%s, %s sequential bare POSTs of %d-event batches of the same 1 KiB from a process of their own",
			when, count(float64(posts)), events), posts, 1, w)
	}
	var bare baseline
	var err error
	if bare.before, err = runBare("before"); err != nil {
		return s1b.failed(err)
	}
	d, early := b.drainOnce(ctx, s, subject, first, s1b, map[string]any{"maxEvents": events})
	if early != nil {
		return *early
	}
	if bare.after, err = runBare("after"); err != nil {
		return s1b.failed(err)
	}
	best := bare.best() * events
	perEvent := func(r bareRun) string { return perMsg(r.cpu, r.posts*events) }
	return result{name: d.name, figure: d.rate, vsBare: d.rate / best,
		rows: []row{{what: d.what, bridge: count(d.rate), baseline: count(best) + " events/s", ratio: ratioFor(d.rate/best, 0.80),
			target: "≥ 0.80 × bare", met: yesNo(d.rate >= 0.80*best)}},
		line: fmt.Sprintf("S1b: ratio %s — bridge drained %s msgs in %v (%.0f msg/s) in %s POSTs (%.1f events a POST), bare sequential loop of %d-event batches with the bridge's headers %.0f events/s (%.0f POST/s; before %.0f, after %.0f events/s); CPU per event: bridge %s (%.1f s while draining), bare loop %s before, %s after; bridge peak RSS %.0f MiB, %s, %d error log lines",
			ratioFor(d.rate/best, 0.80), count(float64(n)), d.took.Round(time.Millisecond), d.rate, count(float64(d.posts)), float64(n)/float64(max(d.posts, 1)),
			events, best, bare.best(), bare.before.rate*events, bare.after.rate*events,
			perMsg(d.cpu, n), d.cpu.Seconds(), perEvent(bare.before), perEvent(bare.after), mib(d.hwm), d.extras, d.errLines),
	}
}

// bareLoop is barePOSTs of 1 KiB messages as scenario name's baseline,
// logged as what, then with what it measured.
func (b *bench) bareLoop(ctx context.Context, name, what string, posts, workers int, w wire) (bareRun, error) {
	logf("%s: baseline %s", name, what)
	run, err := b.barePOSTs(ctx, posts, workers, kib, w)
	if err != nil {
		return run, fmt.Errorf("baseline: %w", err)
	}
	logf("%s: baseline %s", name, run)
	return run, nil
}

// drainRounds drains the backlog in rounds of bridge, then baseline, each
// round bracketed by the baseline runs on either side of it (before is the
// first); the figure is the round with the median ratio, so one quiet or busy
// spell of the machine does not make the figure.
func (b *bench) drainRounds(ctx context.Context, s stream, subject string, first uint64, v variant,
	before bareRun, after func() (bareRun, error)) ([]outcome, error) {
	var rounds []outcome
	for range b.sz.s1Rounds {
		var o outcome
		o.d, o.early = b.drainOnce(ctx, s, subject, first, v, nil)
		next, err := after()
		if err != nil {
			return nil, err
		}
		o.bare = baseline{before: before, after: next}
		before = next
		rounds = append(rounds, o)
		if o.early != nil || ctx.Err() != nil {
			break
		}
	}
	return rounds, nil
}

// outcome is one drain and the baseline runs either side of it; early is
// the scenario's result when the drain ended without a figure.
type outcome struct {
	d     drained
	early *result
	bare  baseline
}

func (o outcome) ratio() float64 { return o.d.rate / o.bare.best() }

// median is the round whose ratio is the median of all rounds, or the
// first that ended without a figure.
func median(rounds []outcome) outcome {
	for _, o := range rounds {
		if o.early != nil {
			return o
		}
	}
	sorted := slices.Clone(rounds)
	slices.SortFunc(sorted, func(a, b outcome) int { return cmp.Compare(a.ratio(), b.ratio()) })
	return sorted[len(sorted)/2]
}

// drainResult reports o, with every round's ratio when there were several;
// loop names the bare loop.
func drainResult(o outcome, rounds []outcome, n int, bodyOnly bareRun, loop string) result {
	if o.early != nil {
		return *o.early
	}
	d, best := o.d, o.bare.best()
	all := ""
	if len(rounds) > 1 {
		ratios := make([]string, len(rounds))
		for i, r := range rounds {
			ratios[i] = fmt.Sprintf("%s (%.0f msg/s against %.0f POST/s)", ratio(r.d.rate, r.bare.best()), r.d.rate, r.bare.best())
		}
		all = fmt.Sprintf("; median of %d rounds: %s", len(rounds), strings.Join(ratios, ", "))
	}
	return result{name: d.name, figure: d.rate, vsBare: d.rate / best,
		rows: []row{{what: d.what, bridge: count(d.rate), baseline: count(best) + " POST/s", ratio: ratioFor(d.rate/best, 0.80),
			target: "≥ 0.80 × bare", met: yesNo(d.rate >= 0.80*best)}},
		line: fmt.Sprintf("%s: ratio %s%s — bridge drained %s msgs in %v (%.0f msg/s), %s with the bridge's headers %s; with a Content-Type only %.0f POST/s (ratio %s); CPU per message: bridge %s (%.1f s while draining), bare loop %s; bridge peak RSS %.0f MiB, %s, %d error log lines",
			d.name, ratio(d.rate, best), all, count(float64(n)), d.took.Round(time.Millisecond), d.rate, loop, o.bare,
			bodyOnly.rate, ratio(d.rate, bodyOnly.rate),
			perMsg(d.cpu, n), d.cpu.Seconds(), o.bare.cpu(), mib(d.hwm), d.extras, d.errLines),
	}
}

// baseline is a raw limit measured before and after the bridge's figure.
// The ratio is taken against the better of the two, so a machine that was
// busier during one of them cannot flatter the bridge.
type baseline struct{ before, after bareRun }

func (b baseline) best() float64 { return max(b.before.rate, b.after.rate) }

func (b baseline) String() string {
	return fmt.Sprintf("%.0f POST/s (before %.0f, after %.0f)", b.best(), b.before.rate, b.after.rate)
}

// cpu is the baseline process's CPU per POST in each run.
func (b baseline) cpu() string {
	return fmt.Sprintf("%s before (%s), %s after (%s)",
		perMsg(b.before.cpu, b.before.posts), b.before.cpuTotal(), perMsg(b.after.cpu, b.after.posts), b.after.cpuTotal())
}

func (r bareRun) String() string {
	return fmt.Sprintf("%.0f POST/s, CPU %s per POST (%s)", r.rate, perMsg(r.cpu, r.posts), r.cpuTotal())
}

func (r bareRun) cpuTotal() string {
	return fmt.Sprintf("%.2f s for %s POSTs", r.cpu.Seconds(), count(float64(r.posts)))
}

// perMsg is CPU time per message, in microseconds. /proc counts CPU in
// ticks of 10 ms, so a short run reads coarse.
func perMsg(cpu time.Duration, n int) string {
	if n <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f µs", float64(cpu)/float64(n)/float64(time.Microsecond))
}

// drained is what one drain measured.
type drained struct {
	name, what string
	rate       float64
	took       time.Duration
	posts      int64
	cpu        time.Duration
	hwm        int64
	extras     string
	errLines   int
}

// drainOnce measures one registration draining the backlog from its first
// message, in a bridge of its own, as v's figure. early is the scenario's
// result when it ended without a figure (failed, or batch mode not
// implemented).
func (b *bench) drainOnce(ctx context.Context, s stream, subject string, first uint64, v variant, batch map[string]any) (d drained, early *result) {
	start := func(ctx context.Context) (*bridgeProc, error) {
		return b.startFresh(ctx, s, strings.ToLower(v.name), v.flags...)
	}
	return b.drainBy(ctx, start, subject, first, b.sz.s1Backlog, v, batch)
}

// drainBy is drainOnce of a backlog of n from first, in the bridge
// startBridge starts.
func (b *bench) drainBy(ctx context.Context, startBridge func(context.Context) (*bridgeProc, error),
	subject string, first uint64, n int, v variant, batch map[string]any) (d drained, early *result) {
	reg := registration{ID: "drain", Namespace: "outbox", Subject: subject, URL: b.sink.url + "/r/0", Start: "first", Batch: batch}
	if v.keyed != nil {
		order := v.keyed.order
		reg.Ordering = &order
	}
	return b.drainAs(ctx, startBridge, reg, first, n, v)
}

// drainAs is drainBy of the registration reg, which starts from the
// backlog's first message and delivers to registration 0 of the sink's run.
func (b *bench) drainAs(ctx context.Context, startBridge func(context.Context) (*bridgeProc, error),
	reg registration, first uint64, n int, v variant) (d drained, early *result) {
	d.name, d.what = v.name, v.what
	batch := reg.Batch
	fail := func(err error) (drained, *result) {
		r := v.failed(err)
		return d, &r
	}
	br, err := startBridge(ctx)
	if err != nil {
		return fail(err)
	}
	defer br.stop()

	r := newRun(1, n, first, false)
	b.sink.start(r)
	logf("%s: bridge draining", d.name)
	cpu0, _ := cpuTime(br.pid())
	start := time.Now()
	var answer struct {
		Ordering *ordering `json:"ordering"`
		Filter   string    `json:"filter"`
	}
	if code, err := br.api(ctx, "POST", "/v1/registrations", reg, &answer); err != nil {
		if batch != nil && code == 400 {
			na := notImplemented(d.name, d.what, "the registration API refuses batch: "+err.Error())
			return d, &na
		}
		if reg.Ordering != nil && code == 400 {
			na := notImplemented(d.name, d.what, "the registration API refuses ordering: "+err.Error())
			return d, &na
		}
		if reg.Filter != "" && code == 400 {
			na := notImplemented(d.name, d.what, "the registration API refuses filter: "+err.Error())
			return d, &na
		}
		return fail(err)
	}
	if answer.Filter != reg.Filter {
		// Likewise a plain drain under a filter's name.
		na := notImplemented(d.name, d.what, fmt.Sprintf("the registration API answers with filter %q, given %q", answer.Filter, reg.Filter))
		return d, &na
	}
	if reg.Ordering != nil && (answer.Ordering == nil || answer.Ordering.Key != reg.Ordering.Key) {
		// An API that drops the option would measure a strict drain
		// under a keyed name.
		na := notImplemented(d.name, d.what, "the registration API answers without the ordering it was given")
		return d, &na
	}
	if batch != nil {
		// The first POST tells whether the bridge batches at all; a bridge
		// that accepts the setting but sends one event per POST has no
		// batch figure to report.
		if err := waitFirst(ctx, r); err != nil {
			return fail(err)
		}
		if r.batches.Load() == 0 {
			na := notImplemented(d.name, d.what, "batch mode not implemented")
			return d, &na
		}
	}
	if err := waitRun(ctx, r, d.name+" drain"); err != nil {
		return fail(err)
	}
	d.took = time.Duration(r.last.Load() - start.UnixNano())
	d.rate = float64(n) / d.took.Seconds()
	mem, _ := memoryOf(br.pid())
	cpu1, _ := cpuTime(br.pid())
	d.cpu, d.hwm = cpu1-cpu0, mem.hwm
	d.posts = r.batches.Load() + r.singles.Load()
	d.extras, d.errLines = r.extras(), errorsLogged(br.logPath)
	return d, nil
}

func notImplemented(name, what, why string) result {
	return result{name: name,
		rows: []row{{what: what, bridge: "n/a (" + why + ")", baseline: "-", ratio: "-", target: "≥ 0.80 × bare", met: "n/a"}},
		line: fmt.Sprintf("%s: n/a (%s)", name, why)}
}

// waitFirst waits for the first POST of r.
func waitFirst(ctx context.Context, r *run) error {
	deadline := time.Now().Add(stallAfter)
	for r.batches.Load()+r.singles.Load() == 0 {
		if time.Now().After(deadline) {
			return fmt.Errorf("no delivery within %v", stallAfter)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}

// preload creates n registrations, the i-th made by row, in a bridge's
// store before the bridge opens it: a hundred thousand creates through
// the admin API would take the scenario's time. Rows are made a chunk at a
// time, so a million of them never sit in memory at once. Each is left
// caught up at its NextSeq (idle), as a store is at rest after a bridge
// delivered to every registration and stopped: a create makes a row due
// for its first turn, and a million first turns are not what an idle
// bridge does.
func preload(dataDir string, n int, row func(i int) cursor.Registration) error {
	db, err := cursor.Open(filepath.Join(dataDir, "bridge.db"))
	if err != nil {
		return err
	}
	const chunk = 10_000
	rows := make([]cursor.Registration, 0, min(n, chunk))
	for lo := 0; lo < n; lo += chunk {
		rows = rows[:0]
		for i := lo; i < min(lo+chunk, n); i++ {
			rows = append(rows, row(i))
		}
		if err := settleRows(db, rows); err != nil {
			_ = db.Close()
			return err
		}
	}
	return db.Close()
}

// settleRows creates rows and leaves each idle at its NextSeq.
func settleRows(db *cursor.DB, rows []cursor.Registration) error {
	ctx := context.Background()
	if err := db.CreateMany(ctx, rows); err != nil {
		return err
	}
	for _, r := range rows {
		if err := db.Advance(ctx, r.ID, cursor.Progress{NextSeq: r.NextSeq, Idle: true}); err != nil {
			return err
		}
	}
	return db.Flush(ctx)
}

// settle waits, after at least warm, until the bridge uses less than
// 0.05 CPU-s per second over two seconds, or until limit; it returns how
// long that took and whether it settled.
func settle(ctx context.Context, pid int, warm, limit time.Duration) (time.Duration, bool, error) {
	start := time.Now()
	select {
	case <-ctx.Done():
		return 0, false, ctx.Err()
	case <-time.After(warm):
	}
	const window = 2 * time.Second
	for {
		c0, err := cpuTime(pid)
		if err != nil {
			return 0, false, err
		}
		t0 := time.Now()
		select {
		case <-ctx.Done():
			return 0, false, ctx.Err()
		case <-time.After(window):
		}
		c1, err := cpuTime(pid)
		if err != nil {
			return 0, false, err
		}
		if (c1-c0).Seconds()/time.Since(t0).Seconds() < 0.05 {
			return time.Since(start), true, nil
		}
		if time.Since(start) > limit {
			return time.Since(start), false, nil
		}
	}
}

// fanOut is S2 (or S2d, S2o, S2f, as v says): many registrations on one
// subject, each message delivered to every one of them — or, with v's
// filters, to those whose filter passes it, v.filtered.spread times the
// messages published for as many deliveries.
func (b *bench) fanOut(ctx context.Context, v variant) result {
	regs, msgs := b.sz.s2Regs, b.sz.s2Msgs
	posts := regs * msgs // the deliveries, and the bare loop's POSTs
	f := v.filtered
	what := ""
	if f != nil {
		msgs *= f.spread
		what = ", " + f.label
	}
	logf("%s: fan-out, %s registrations × %s messages%s", v.name, count(float64(regs)), count(float64(msgs)), what)
	s, err := b.newStream(ctx, strings.ToLower(v.name), v.config)
	if err != nil {
		return v.failed(err)
	}
	defer b.deleteStream(s)
	payload := bytes.Repeat([]byte{'x'}, kib)
	payloadOf := func(int) []byte { return payload }
	if f != nil {
		payloadOf = orderJSON
	}

	subject := s.prefix + ".fan"
	runBare := func(when string) (bareRun, error) {
		// As many POSTs as the bridge makes, for as long a measurement
		// (see S1).
		n := posts
		logf("%s: baseline %s, %s bare POSTs with the bridge's headers from 16 goroutines in a process of their own", v.name, when, count(float64(n)))
		run, err := b.barePOSTs(ctx, n, 16, len(payload), wire{stream: s.name, subject: subject})
		if err != nil {
			return run, fmt.Errorf("baseline: %w", err)
		}
		logf("%s: baseline %s", v.name, run)
		return run, nil
	}
	var bare baseline
	if bare.before, err = runBare("before"); err != nil {
		return v.failed(err)
	}

	dir, err := b.newBridgeDir(strings.ToLower(v.name))
	if err != nil {
		return v.failed(err)
	}
	err = preload(dir, regs, func(i int) cursor.Registration {
		c := cursor.Config{
			ID: fmt.Sprintf("fan-%05d", i), Namespace: "outbox", Subject: subject,
			URL: fmt.Sprintf("%s/r/%d", b.sink.url, i),
		}
		if f != nil {
			c.DataContentType, c.Filter = jsonContentType, f.expr(i)
		}
		return cursor.Registration{NextSeq: 1, Config: c}
	})
	if err != nil {
		return v.failed(err)
	}
	br, err := b.startBridgeWithin(ctx, s, dir, 30*time.Second, v.flags...)
	if err != nil {
		return v.failed(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			br.stop()
		}
	}()
	// Preloaded rows are due at once; let the bridge find them caught up.
	if _, _, err := settle(ctx, br.pid(), time.Second, 30*time.Second); err != nil {
		return v.failed(err)
	}

	reqs0, haveReqs, err := br.metric(ctx, "bridge_journal_requests_total")
	if err != nil {
		return v.failed(err)
	}
	fetches0, _, _ := br.metric(ctx, "bridge_journal_fetches_total")
	fetched0, _, _ := br.metric(ctx, "bridge_journal_messages_fetched_total")
	filtered0, _, _ := br.metric(ctx, filteredSeries)
	filterErrs0, _, _ := br.metric(ctx, filterErrorsSeries)
	cpu0, _ := cpuTime(br.pid())

	last, err := b.lastSeq(ctx, s)
	if err != nil {
		return v.failed(err)
	}
	r := newRun(regs, msgs, last+1, false)
	if f != nil {
		r = newFilteredRun(regs, msgs, last+1, f.passes)
	}
	b.sink.start(r)
	start := time.Now()
	if _, err := b.publishEach(ctx, s, func(int) string { return subject }, msgs, payloadOf); err != nil {
		return v.failed(err)
	}
	if err := waitRun(ctx, r, v.name+" fan-out"); err != nil {
		return v.failed(err)
	}
	el := time.Duration(r.last.Load() - start.UnixNano())
	total := float64(r.want())
	rate := total / el.Seconds()
	cpu1, _ := cpuTime(br.pid())
	mem, _ := memoryOf(br.pid())
	readsLine := "journal reads: n/a (no bridge_journal_requests_total in /metrics)"
	readsWhat := v.name + " journal reads per message"
	readsRow := row{what: readsWhat, bridge: "n/a", baseline: "-", ratio: "-", target: "≤ 2", met: "n/a"}
	if haveReqs {
		reqs1, _, _ := br.metric(ctx, "bridge_journal_requests_total")
		fetches1, _, _ := br.metric(ctx, "bridge_journal_fetches_total")
		fetched1, _, _ := br.metric(ctx, "bridge_journal_messages_fetched_total")
		perMsg := (reqs1 - reqs0) / float64(msgs)
		readsRow = row{what: readsWhat, bridge: fmt.Sprintf("%.2f", perMsg),
			baseline: "-", ratio: "-", target: "≤ 2", met: yesNo(perMsg <= 2)}
		readsLine = fmt.Sprintf("journal requests %.0f (%.2f per message; page fetches %.0f), messages fetched %.0f (%.2f per message)",
			reqs1-reqs0, perMsg, fetches1-fetches0, fetched1-fetched0, (fetched1-fetched0)/float64(msgs))
	}
	if f != nil {
		readsLine = fmt.Sprintf("%s: %s messages, %s deliveries; %s; %s", f.label, count(float64(msgs)), count(total),
			passedOver(ctx, br, filtered0, filterErrs0, float64(regs*msgs)-total), readsLine)
	}
	errLines := errorsLogged(br.logPath)
	br.stop()
	stopped = true
	if bare.after, err = runBare("after"); err != nil {
		return v.failed(err)
	}
	best := bare.best()
	return result{name: v.name, figure: rate, vsBare: rate / best,
		rows: []row{
			{what: v.what, bridge: count(rate), baseline: count(best) + " POST/s", ratio: ratio(rate, best),
				target: "≥ 0.70 × bare", met: yesNo(rate >= 0.70*best)},
			readsRow,
		},
		line: fmt.Sprintf("%s: ratio %s — bridge %s deliveries in %v (%.0f/s), bare 16-goroutine POST loop %s; %s; CPU per delivery: bridge %s (%.1f s while delivering), bare loop %s; bridge peak RSS %.0f MiB, %s, %d error log lines",
			v.name, ratio(rate, best), count(total), el.Round(time.Millisecond), rate, bare, readsLine,
			perMsg(cpu1-cpu0, int(total)), (cpu1 - cpu0).Seconds(), bare.cpu(), mib(mem.hwm), r.extras(), errLines),
	}
}

// bareSamples publishes samples messages one at a time through a bare
// ordered consumer in a process of its own and returns their
// publish→arrival times.
func (b *bench) bareSamples(ctx context.Context, s stream, samples int) ([]time.Duration, error) {
	subject := s.prefix + ".bare"
	c, err := b.bareConsumer(ctx, s, subject)
	if err != nil {
		return nil, err
	}
	fail := func(err error) ([]time.Duration, error) {
		c.kill()
		return nil, err
	}
	first, err := b.lastSeq(ctx, s)
	if err != nil {
		return fail(err)
	}
	r := newRun(1, samples, first+1, true)
	b.sink.start(r)
	for i := range samples {
		if err := b.publishOne(ctx, subject); err != nil {
			return fail(err)
		}
		if err := waitCount(ctx, r, int64(i+1), 10*time.Second); err != nil {
			return fail(err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if _, err := c.finish(stallAfter); err != nil {
		return nil, err
	}
	return r.latencies(), nil
}

func (e *env) publishOne(ctx context.Context, subject string) error {
	_, err := e.js.Publish(ctx, subject, stamped(kib))
	return err
}

// waitCount waits until r has n distinct deliveries.
func waitCount(ctx context.Context, r *run, n int64, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for r.distinct.Load() < n {
		if time.Now().After(deadline) {
			return fmt.Errorf("delivery %d did not arrive within %v", n, limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
	return nil
}

func fmtDurations(ds []time.Duration) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = fmt.Sprintf("%.1f", float64(d)/float64(time.Millisecond))
	}
	return "[" + strings.Join(parts, " ") + "] ms"
}

// liveLatency is S4: a steady live stream to one registration.
func (b *bench) liveLatency(ctx context.Context) result {
	const what = "S4 live latency p50"
	n := int(int64(b.sz.s4Rate) * int64(b.sz.s4Dur) / int64(time.Second))
	logf("S4: live latency, %d messages/s for %v", b.sz.s4Rate, b.sz.s4Dur)
	s, err := b.newStream(ctx, "s4", allowDirect)
	if err != nil {
		return failed("S4", what, err)
	}
	defer b.deleteStream(s)

	// The baseline runs with no bridge running, before and after it, in a
	// process of its own.
	bareSubject := s.prefix + ".bare"
	type bareLive struct {
		lat
		cpu time.Duration
	}
	runBare := func(when string) (bareLive, error) {
		logf("S4: baseline %s, ordered consumer → sequential POST, in a process of its own", when)
		c, err := b.bareConsumer(ctx, s, bareSubject)
		if err != nil {
			return bareLive{}, fmt.Errorf("baseline: %w", err)
		}
		got, err := b.paced(ctx, s, bareSubject, n, "S4 baseline")
		if err != nil {
			c.kill()
			return bareLive{}, fmt.Errorf("baseline: %w", err)
		}
		rep, err := c.finish(stallAfter)
		if err != nil {
			return bareLive{}, fmt.Errorf("baseline: %w", err)
		}
		return bareLive{summarize(got), rep.CPU}, nil
	}
	before, err := runBare("before")
	if err != nil {
		return failed("S4", what, err)
	}

	br, err := b.startFresh(ctx, s, "s4")
	if err != nil {
		return failed("S4", what, err)
	}
	stopped := false
	defer func() {
		if !stopped {
			br.stop()
		}
	}()
	liveSubject := s.prefix + ".live"
	reg := registration{ID: "live", Namespace: "outbox", Subject: liveSubject, URL: b.sink.url + "/r/0", Start: "new"}
	if _, err := br.api(ctx, "POST", "/v1/registrations", reg, nil); err != nil {
		return failed("S4", what, err)
	}
	logf("S4: bridge")
	cpu0, _ := cpuTime(br.pid())
	got, err := b.paced(ctx, s, liveSubject, n, "S4 bridge")
	if err != nil {
		return failed("S4", what, err)
	}
	cpu1, _ := cpuTime(br.pid())
	errLines := errorsLogged(br.logPath)
	br.stop()
	stopped = true
	after, err := runBare("after")
	if err != nil {
		return failed("S4", what, err)
	}

	// Each baseline figure is the better of the two runs, so a machine
	// busier during one of them cannot flatter the bridge.
	br4, bare := summarize(got), lat{
		p50: min(before.p50, after.p50), p99: min(before.p99, after.p99), max: min(before.max, after.max),
	}
	r50, r99 := float64(br4.p50)/float64(bare.p50), float64(br4.p99)/float64(bare.p99)
	return result{name: "S4",
		rows: []row{
			{what: "S4 live latency p50", bridge: ms(br4.p50), baseline: ms(bare.p50), ratio: ratioAbove(r50, 1.5), target: "≤ 1.5 × bare", met: yesNo(r50 <= 1.5)},
			{what: "S4 live latency p99", bridge: ms(br4.p99), baseline: ms(bare.p99), ratio: ratioAbove(r99, 2), target: "≤ 2 × bare", met: yesNo(r99 <= 2)},
			{what: "S4 live latency max", bridge: ms(br4.max), baseline: ms(bare.max), ratio: ratio(float64(br4.max), float64(bare.max)), target: "-", met: "-"},
		},
		line: fmt.Sprintf("S4: ratio p50 %.2f, p99 %.2f — %d messages at %d/s: bridge %s; bare ordered consumer before %s, after %s; CPU per message: bridge %s, bare consumer %s before, %s after; %d error log lines",
			r50, r99, n, b.sz.s4Rate, br4, before.lat, after.lat,
			perMsg(cpu1-cpu0, n), perMsg(before.cpu, n), perMsg(after.cpu, n), errLines),
	}
}

// lat summarizes publish→arrival times.
type lat struct{ p50, p99, max time.Duration }

func summarize(ds []time.Duration) lat {
	return lat{p50: percentile(ds, 50), p99: percentile(ds, 99), max: slices.Max(ds)}
}

func (l lat) String() string {
	return fmt.Sprintf("p50 %s p99 %s max %s", ms(l.p50), ms(l.p99), ms(l.max))
}

// paced publishes n stamped messages on subject at the scenario's rate,
// each on its own schedule so a late one does not delay the next, and
// returns every publish→arrival time at the sink.
func (b *bench) paced(ctx context.Context, s stream, subject string, n int, what string) ([]time.Duration, error) {
	last, err := b.lastSeq(ctx, s)
	if err != nil {
		return nil, err
	}
	r := newRun(1, n, last+1, true)
	b.sink.start(r)
	interval := time.Second / time.Duration(b.sz.s4Rate)
	start := time.Now()
	for i := range n {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d)
		}
		if err := b.publishOne(ctx, subject); err != nil {
			return nil, err
		}
	}
	if err := waitRun(ctx, r, what); err != nil {
		return nil, err
	}
	return r.latencies(), nil
}

// percentile is the p-th percentile of ds (nearest rank).
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

// memory is MEM: the bridge's peak resident memory while it drains a large
// backlog.
func (b *bench) memory(ctx context.Context) result {
	const what = "MEM peak RSS draining (MiB)"
	n := b.sz.memBacklog
	logf("MEM: peak memory draining a %s × 1 KiB backlog", count(float64(n)))
	s, err := b.newStream(ctx, "mem", allowDirect)
	if err != nil {
		return failed("MEM", what, err)
	}
	defer b.deleteStream(s)
	subject := s.prefix + ".orders"
	first, err := b.publishBacklog(ctx, s, subject, n, bytes.Repeat([]byte{'x'}, kib))
	if err != nil {
		return failed("MEM", what, err)
	}
	br, err := b.startFresh(ctx, s, "mem")
	if err != nil {
		return failed("MEM", what, err)
	}
	defer br.stop()
	r := newRun(1, n, first, false)
	b.sink.start(r)
	start := time.Now()
	reg := registration{ID: "drain", Namespace: "outbox", Subject: subject, URL: b.sink.url + "/r/0", Start: "first"}
	if _, err := br.api(ctx, "POST", "/v1/registrations", reg, nil); err != nil {
		return failed("MEM", what, err)
	}
	if err := waitRun(ctx, r, "MEM drain"); err != nil {
		return failed("MEM", what, err)
	}
	el := time.Duration(r.last.Load() - start.UnixNano())
	mem, err := memoryOf(br.pid())
	if err != nil {
		return failed("MEM", what, err)
	}
	hwm := mib(mem.hwm)
	return result{name: "MEM",
		rows: []row{{what: what, bridge: fmt.Sprintf("%.0f", hwm), baseline: "-", ratio: "-", target: "≤ 200", met: yesNo(hwm <= 200)}},
		line: fmt.Sprintf("MEM: peak RSS %.0f MiB (RSS at the end %.0f MiB) draining %s × 1 KiB in %v (%.0f msg/s); %d error log lines",
			hwm, mib(mem.rss), count(float64(n)), el.Round(time.Millisecond), float64(n)/el.Seconds(), errorsLogged(br.logPath)),
	}
}

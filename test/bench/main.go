// Command bench measures what a user picks a webhook bridge for — how much
// it delivers, how soon, and at what cost — each figure beside the raw
// limit it sits on, measured in the same run on the same machine.
//
//	go run ./test/bench [-quick] [-only S1,S1b,S1d,S1o,S1k,S1h,S1m,S1s,S1f,S2,S2d,S2o,S2f,S3,S4,S5,MEM,MEMK,R1,R2,A1,C1,C2,C3,C4,C5] [-keep]
//
// It starts a nats-server with JetStream in this process, a loopback sink
// (HTTP/1.1, keep-alive, 204 at once) and the real bridge binary, built at
// start and run as its own process so its CPU and memory can be read from
// /proc. The baselines use the same server, the same sink and the same
// bytes, without the bridge: a bare http.Client POST loop, and a bare
// JetStream ordered consumer feeding one. The same bytes are the body and
// the headers the bridge sends with it (CloudEvents binary mode,
// webhook-id and -timestamp, its User-Agent), so a ratio is what the
// bridge adds; S1 also reports a loop sending a Content-Type only, to
// show what those headers cost. Each baseline runs before and
// after the bridge's figure (S3's once, after), and the ratio is taken
// against the better run, so a machine busier during one of them cannot
// flatter the bridge.
//
// The baselines run in a process of their own too: this binary, run again
// with a hidden first argument "baseline". Every POST of the bridge crosses
// from its process to the sink's, paying the wakeups and context switches
// between two Go runtimes; a loop in the sink's own runtime would not, and
// would measure a limit the bridge cannot sit on. The child reports its
// timing and its CPU (from /proc, as the bridge's) as JSON on stdout; the
// sink counts what it was sent, and measures every publish→arrival time,
// the bridge's and the baselines' alike.
//
// Scenarios (full size; -quick is a tenth):
//
//	S1   drain: a backlog of 100,000 × 1 KiB, one registration from the first
//	     message; against as many sequential bare POSTs of the same bytes.
//	     Three rounds (-quick: one), each between two baseline runs; the
//	     round with the median ratio is reported.
//	S1b  the same in CloudEvents batch mode (maxEvents 100), when the bridge
//	     delivers batches; against as many sequential bare POSTs of the
//	     same batches (100 events each, made by the bridge's projection),
//	     before and after, in events per second.
//	S1d  S1 on a stream as jetstream.StreamConfig leaves it (no
//	     allow_direct; the others run on the allow_direct stream the
//	     bridge would create), with baselines of its own; and its rate
//	     against S1's, when both run.
//	S1k  S1's backlog spread over 1,000 subjects, drained through a
//	     registration keyed by subject with 16 POSTs in flight (CONTRACT
//	     §12), in rounds as S1; against a bare POST loop with 16 in flight.
//	S1h, S1m, S1s  receiver options and span export, each S1 against S1
//	     without it, alternated on one backlog (a, b, a, b…: three rounds
//	     of each, -quick one), the ratio b ÷ a of the median round
//	     reported with every round's: S1h three headers and an OAuth 2.0
//	     grant from a token endpoint in this process, against a plain
//	     registration, with its raw limit: the bare POST loop with those
//	     headers and the token against the loop without; S1m (or S1t) a receiver demanding a client
//	     certificate, against one over TLS without, both HTTP/1.1 and
//	     trusting the run's own CA through tls.caCertificates; S1s a span
//	     per POST exported over OTLP/HTTP to a collector in this process
//	     that discards them, against none. The receivers count what each
//	     POST carried, so an option the bridge ignored shows.
//	S1f  S1 as S1h is, on a backlog of 1 KiB JSON orders (dataContentType
//	     application/json), a filter that reads data and passes every
//	     message (data.total >= 0) against no filter (CONTRACT §13).
//	S2   fan-out: 1,000 registrations on one subject, 1,000 messages; against
//	     as many bare POSTs from 16 goroutines; and journal reads per
//	     message.
//	S2d  S2 on a default stream, as S1d is S1.
//	S2f  S2 with a filter on each registration passing half the messages
//	     (data.n % 2 == 0 on the even ones, == 1 on the odd), on twice
//	     S2's messages, 1 KiB JSON orders: as many POSTs as S2 makes;
//	     its rate against S2's when both run (-quick: 200 messages).
//	S1o, S2o  S1 and S2 with --attempt-log=false, with baselines of their
//	     own; S1's and S2's rates against them are what the attempt log
//	     costs.
//	S3   idle scale: 100,000 registrations on distinct subjects, no traffic:
//	     CPU and memory at rest, then one message's latency.
//	S4   live latency: one registration, 1,000 messages/s for 10 s; against an
//	     ordered consumer feeding sequential POSTs.
//	S5   a slow receiver: one registration, a receiver answering after
//	     20 ms, 4,000 × 1 KiB over 200 subjects (-quick: 400): keyed by
//	     subject with 16 in flight, against a bare loop POSTing as many
//	     16 at a time to the same receiver (before and after), and against
//	     a strict registration (no ordering) draining the first 1,000 of
//	     them (-quick: 100) from it.
//	MEM  peak memory draining a backlog of 1,000,000 × 1 KiB.
//	MEMK 1,000 keyed registrations (-quick: 100) on one stream, each with
//	     its 4,096-sequence window full: the first message answered 503
//	     forever, the 4,095 after it acknowledged. Peak RSS, against a
//	     bridge holding the same registrations caught up, and again after
//	     a restart on the full windows' store; per registration.
//	R1   admin API creates per second: 20,000 registrations, each a fresh
//	     id on a subject of its own from new messages, from 16 clients at
//	     once; the store is counted after.
//	R2   registry scale: S3 with 1,000,000 registrations, the time from the
//	     bridge's start to its first delivery (/readyz turns 200 once NATS
//	     is connected, before the registrations are loaded, so a message is
//	     published every 50 ms from then on and the first arrival timed),
//	     and the time of a /metrics scrape.
//
//	A1   attempt log reads: the admin API's newest 100 attempts of one
//	     registration, and one ?seq= lookup, each in a log of 1,000,000
//	     attempts of 1,000 registrations written in the order hardest for
//	     it.
//
//	C1   S1 on the cluster, once: a bridge of --store kv against one of
//	     --store bolt on the same cluster, and against the sequential
//	     bare POSTs.
//	C2   S2 through three bridges of --store kv sharing the registrations,
//	     against 16-goroutine bare POSTs (-quick: 30 messages).
//	C3   48 registrations on a receiver answering after 20 ms, 300
//	     messages each (-quick: 60): deliveries/s with 1, 2 and 3 bridges,
//	     each timed once the ownership has settled.
//	C4   three bridges, 12 registrations, 50 messages/s to each: the
//	     bridge owning the most killed with SIGKILL five times (-quick:
//	     once), restarted between kills; the time from the kill to the
//	     first POST to one of its registrations, median and worst.
//	C5   cursor writes per second of the kv store (cursor/kvstore, in
//	     this process: 1,000 registrations advanced and flushed, 32 writes
//	     at once, 10 s; -quick 3 s), against a bare kv.Update loop on the
//	     same keys, bytes and concurrency before and after.
//
// The C scenarios run on three nats-servers in this process, clustered on
// loopback, every stream and bucket on three replicas, the bridges given
// all three client URLs and --lease-ttl 5s (cluster.go).
//
// S3 and R2 preload their registrations into the store before the bridge
// opens it; S3's summary line gives its start and scrape times too.
//
// Figures are what this machine did in this run; a shared or busy machine
// moves them, which is why each comes with its baseline.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"
)

// sizes are a run's dimensions.
type sizes struct {
	s1Backlog  int           // S1/S1b/S1d/S1h/S1m/S1s/S1f backlog
	s1Rounds   int           // S1/S1d rounds of bridge and baseline; S1h/S1m/S1s/S1f rounds of each side
	s2Regs     int           // S2/S2d/S2o/S2f registrations
	s2Msgs     int           // S2/S2d/S2o messages; S2f publishes twice as many
	s3Regs     int           // S3 idle registrations
	r2Regs     int           // R2 idle registrations
	idleStart  time.Duration // S3/R2 longest wait from the bridge's start to its first delivery
	idleWarm   time.Duration // S3/R2 least warm-up before the idle window
	idleSettle time.Duration // S3/R2 longest wait for the bridge to settle
	idleWindow time.Duration // S3/R2 idle window
	s4Rate     int           // S4 messages per second
	s4Dur      time.Duration // S4 duration of each phase
	memBacklog int           // MEM backlog
	s5Msgs     int           // S5 backlog
	s5Strict   int           // S5 messages the strict registration drains
	memkRegs   int           // MEMK registrations
	r1Creates  int           // R1 registrations created
	c1Backlog  int           // C1 backlog
	c2Regs     int           // C2 registrations
	c2Msgs     int           // C2 messages
	c3Msgs     int           // C3 messages, each to every registration
	c4Kills    int           // C4 kills
	c5Dur      time.Duration // C5 duration of each loop
	a1Attempts int           // A1 attempts in the log
}

var full = sizes{
	s1Backlog: 100_000, s1Rounds: 3,
	s2Regs: 1_000, s2Msgs: 1_000,
	s3Regs: 100_000, r2Regs: 1_000_000,
	idleStart: 3 * time.Minute, idleWarm: 10 * time.Second, idleSettle: 2 * time.Minute, idleWindow: 20 * time.Second,
	s4Rate: 1_000, s4Dur: 10 * time.Second,
	s5Msgs: 4_000, s5Strict: 1_000, memkRegs: 1_000,
	memBacklog: 1_000_000,
	r1Creates:  20_000,
	c1Backlog:  100_000,
	c2Regs:     1_000, c2Msgs: 1_000, c3Msgs: 300, c4Kills: 5, c5Dur: 10 * time.Second,
	a1Attempts: 1_000_000,
}

// quick is a tenth of every count. The durations shrink less: an idle
// window or a latency run much shorter than a few seconds measures little
// but noise.
var quick = sizes{
	s1Backlog: 10_000, s1Rounds: 1,
	s2Regs: 1_000, s2Msgs: 100,
	s3Regs: 10_000, r2Regs: 100_000,
	idleStart: time.Minute, idleWarm: 3 * time.Second, idleSettle: 30 * time.Second, idleWindow: 5 * time.Second,
	s4Rate: 1_000, s4Dur: 2 * time.Second,
	s5Msgs: 400, s5Strict: 100, memkRegs: 100,
	memBacklog: 100_000,
	r1Creates:  2_000,
	c1Backlog:  10_000,
	c2Regs:     1_000, c2Msgs: 30, c3Msgs: 60, c4Kills: 1, c5Dur: 3 * time.Second,
	a1Attempts: 100_000,
}

// scenarioNames in the order they run.
var scenarioNames = append([]string{"S1", "S1b", "S1d", "S1o", "S1k", "S1h", "S1m", "S1s", "S1f", "S2", "S2d", "S2o", "S2f", "S3", "S4", "S5", "MEM", "MEMK", "R1", "R2", "A1"}, clusterNames...)

func main() {
	if len(os.Args) > 1 && os.Args[1] == childArg {
		os.Exit(childMain(os.Args[2:]))
	}
	os.Exit(benchMain())
}

func benchMain() int {
	quickFlag := flag.Bool("quick", false, "run every scenario at a tenth of its size")
	only := flag.String("only", "", "comma-separated scenarios to run ("+strings.Join(scenarioNames, ",")+"); default all")
	keep := flag.Bool("keep", false, "keep the work directory (bridge logs, stores) after the run")
	flag.Parse()

	selected, err := parseOnly(*only)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 2
	}
	sz := full
	if *quickFlag {
		sz = quick
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	dir, err := os.MkdirTemp("", "bridge-bench-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	if *keep {
		defer fmt.Fprintln(os.Stderr, "work directory kept:", dir)
	} else {
		defer os.RemoveAll(dir)
	}

	e, err := newEnv(ctx, dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	defer e.close()

	b := &bench{env: e, sz: sz}
	var results []result
	if selected["S1"] || selected["S1b"] {
		results = append(results, b.drain(ctx, s1, selected["S1"], selected["S1b"])...)
	}
	for _, v := range []variant{s1d, s1o, s1k} {
		if selected[v.name] && ctx.Err() == nil {
			results = append(results, b.drain(ctx, v, true, false)...)
		}
	}
	results = append(results, runSelected(ctx, selected, []scenario{
		{"S1h", b.headersOAuth},
		{"S1m", b.mutualTLS},
		{"S1s", b.spanExport},
		{"S1f", b.filterAll},
		{"S2", func(ctx context.Context) result { return b.fanOut(ctx, s2) }},
		{"S2d", func(ctx context.Context) result { return b.fanOut(ctx, s2d) }},
		{"S2o", func(ctx context.Context) result { return b.fanOut(ctx, s2o) }},
		{"S2f", func(ctx context.Context) result { return b.fanOut(ctx, s2f) }},
		{"S3", b.idleScale},
		{"S4", b.liveLatency},
		{"S5", b.slowKeyed},
		{"MEM", b.memory},
		{"MEMK", b.heldWindows},
		{"R1", b.createRate},
		{"R2", b.registryScale},
		{"A1", b.attemptReads},
	})...)
	results = append(results, b.clusterScenarios(ctx, selected)...)
	results = sameRun(results, comparisons...)
	if ctx.Err() != nil {
		fmt.Fprintln(os.Stderr, "bench: interrupted")
	}

	mode := "full size"
	if *quickFlag {
		mode = "quick: a tenth of full size"
	}
	report(os.Stdout, mode, results)
	for _, r := range results {
		if r.err != nil {
			return 1
		}
	}
	return 0
}

// parseOnly turns -only into a set; empty selects every scenario.
func parseOnly(s string) (map[string]bool, error) {
	set := map[string]bool{}
	if strings.TrimSpace(s) == "" {
		for _, n := range scenarioNames {
			set[n] = true
		}
		return set, nil
	}
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		switch {
		case strings.EqualFold(part, "memory"):
			part = "MEM"
		case strings.EqualFold(part, "S1t"): // S1m's other side
			part = "S1m"
		}
		i := slices.IndexFunc(scenarioNames, func(n string) bool { return strings.EqualFold(n, part) })
		if i < 0 {
			return nil, fmt.Errorf("-only: unknown scenario %q (known: %s)", part, strings.Join(scenarioNames, ","))
		}
		set[scenarioNames[i]] = true
	}
	return set, nil
}

// logf reports progress on stderr; the results go to stdout.
func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, time.Now().Format("15:04:05 ")+format+"\n", args...)
}

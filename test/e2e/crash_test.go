package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetstream-bridge/bridge/internal/testutil"
)

// crashPlan is how hard the crash test pushes: the default run fits the
// suite's budget; BRIDGE_SOAK=1 runs the long version.
type crashPlan struct {
	kills      int           // SIGKILLs in all
	busyKills  int           // of those, how many land while publishing goes on
	messages   int           // journal messages published
	pace       time.Duration // pause between two publishes
	completed  int           // completed a2a registrations a purge deletes while the bridge is killed
	purgeEvery int           // a kill during a purge every so many kills; 0: once
	drain      time.Duration // how long the last run may take to deliver the rest
	failRate   float64       // share of POSTs the receiver answers 500
	maxDelay   time.Duration // the receiver's think time, 0 to maxDelay
}

func crashPlanFromEnv() crashPlan {
	if os.Getenv("BRIDGE_SOAK") != "" {
		return crashPlan{kills: 60, busyKills: 40, messages: 30000, pace: 2 * time.Millisecond,
			completed: 500, purgeEvery: 12, failRate: 0.003, maxDelay: 3 * time.Millisecond, drain: 15 * time.Minute}
	}
	return crashPlan{kills: 9, busyKills: 5, messages: 3000, pace: 4 * time.Millisecond,
		completed: 300, failRate: 0.003, maxDelay: 3 * time.Millisecond, drain: 3 * time.Minute}
}

// crashSeed is the seed of the kill schedule, the message mix and the
// receiver's behaviour: printed first so a failure can be replayed with
// BRIDGE_CRASH_SEED.
func crashSeed(t *testing.T) uint64 {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("BRIDGE_CRASH_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("BRIDGE_CRASH_SEED=%q: %v", s, err)
		}
		seed = v
	}
	t.Logf("seed %d (replay with BRIDGE_CRASH_SEED=%d)", seed, seed)
	return seed
}

// crashReg is a registration of the crash test and what it must receive.
type crashReg struct {
	body    map[string]any
	subject string // the filter it reads
	a2a     bool
	format  string // outbox: binary or structured
}

func (r crashReg) id() string { return r.body["id"].(string) }

func crashRegistrations(sink *chaosSink) []crashReg {
	outbox := func(id, subject, format string, extra map[string]any) crashReg {
		b := map[string]any{"id": id, "namespace": "outbox", "subject": subject, "url": sink.url(id),
			"start": "first", "format": format}
		for k, v := range extra {
			b[k] = v
		}
		return crashReg{body: b, subject: subject, format: format}
	}
	push := func(id, task string, extra map[string]any) crashReg {
		b := map[string]any{"id": id, "namespace": "a2a", "taskId": task, "url": sink.url(id)}
		for k, v := range extra {
			b[k] = v
		}
		return crashReg{body: b, subject: "journal.a2a." + task, a2a: true}
	}
	return []crashReg{
		outbox("everything", "journal.>", "binary", nil),
		outbox("orders", "journal.orders.>", "binary", map[string]any{"secret": secret}),
		outbox("orders-eu", "journal.orders.eu", "structured", map[string]any{"dataContentType": "application/json"}),
		outbox("orders-us", "journal.orders.us", "binary", nil),
		outbox("billing", "journal.billing.*", "binary", map[string]any{"authentication": map[string]any{"scheme": "Bearer", "credentials": "c"}}),
		push("push-1", "task-1", map[string]any{"token": "tok-1"}),
		push("push-1b", "task-1", nil),
		push("push-2", "task-2", map[string]any{"secret": secret}),
		push("push-3", "task-3", nil),
	}
}

// crashMessages is the publishing plan: a mix of outbox subjects and A2A
// tasks, some A2A messages carrying two events. No terminal status: the
// A2A registrations must stay active to the end.
func crashMessages(n int, rng *rand.Rand) []outMsg {
	out := make([]outMsg, n)
	for i := range out {
		switch r := rng.IntN(100); {
		case r < 25:
			out[i] = outMsg{"journal.orders.eu", fmt.Sprintf(`{"n":%d,"region":"eu"}`, i)}
		case r < 45:
			out[i] = outMsg{"journal.orders.us", fmt.Sprintf(`{"n":%d,"region":"us"}`, i)}
		case r < 60:
			out[i] = outMsg{"journal.billing.invoices", fmt.Sprintf(`{"n":%d,"invoice":true}`, i)}
		case r < 65:
			out[i] = outMsg{"journal.audit.x", fmt.Sprintf("audit %d", i)}
		default:
			task := fmt.Sprintf("task-%d", 1+rng.IntN(3))
			chunk := fmt.Sprintf(`{"artifactUpdate":{"taskId":%q,"contextId":"c","artifact":{"artifactId":"a-%d","parts":[{"text":"%d"}]}}}`, task, i, i)
			data := chunk
			if rng.IntN(3) == 0 {
				status := fmt.Sprintf(`{"statusUpdate":{"taskId":%q,"contextId":"c","status":{"state":"TASK_STATE_WORKING"}}}`, task)
				data = "[" + status + "," + chunk + "]"
			}
			out[i] = outMsg{"journal.a2a." + task, data}
		}
	}
	return out
}

type outMsg struct{ subject, data string }

// crashPublisher publishes the plan through every kill of the embedded
// server, retrying each message until JetStream acknowledges it. A retry
// after a lost acknowledgement may store a message twice; the check reads
// what the stream holds, so that is simply one more message to deliver.
type crashPublisher struct {
	published atomic.Int64
	acked     []string // payloads JetStream acknowledged
	err       error
	done      chan struct{}
}

func startCrashPublisher(ctx context.Context, t *testing.T, url string, msgs []outMsg, pace time.Duration) *crashPublisher {
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	p := &crashPublisher{done: make(chan struct{})}
	go func() {
		defer close(p.done)
		defer nc.Close()
		for _, m := range msgs {
			for {
				if ctx.Err() != nil {
					p.err = ctx.Err()
					return
				}
				pctx, cancel := context.WithTimeout(ctx, time.Second)
				_, err := js.Publish(pctx, m.subject, []byte(m.data))
				cancel()
				if err == nil {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			p.acked = append(p.acked, m.data)
			p.published.Add(1)
			time.Sleep(pace)
		}
	}()
	t.Cleanup(func() { <-p.done })
	return p
}

// The promise under SIGKILL: at least once, per registration in stream
// order, and a crash repeats only what was acknowledged after the last
// cursor flush. Nine registrations (overlapping outbox filters, both
// CloudEvents modes, A2A tasks with two registrations on one) follow a
// journal of thousands of messages while a slow receiver that sometimes
// fails answers them, and the bridge is killed with SIGKILL at random
// moments: while publishing goes on, with a POST held in flight, right
// after a start, and in the middle of a purge. After every kill the store
// must open (the next start) and list; after the last, every registration
// must get every message of its filter, first arrivals in stream order,
// with a bounded number of repeats.
func TestCrashKillNineLosesNothing(t *testing.T) {
	plan := crashPlanFromEnv()
	seed := crashSeed(t)
	rng := rand.New(rand.NewPCG(seed, 1))
	sink := newChaosSink(t, seed, 0, plan.maxDelay, plan.failRate)
	d := newChaosDaemon(t, "--a2a-allow-loopback")
	d.start()

	regs := crashRegistrations(sink)
	for _, r := range regs {
		d.create(r.body)
	}
	// Completed registrations for the purge kill: one terminal event they
	// all deliver first.
	pub := newPublisher(t, "nats://"+d.natsAddr)
	pub.publish(t, "journal.a2a.done", `{"statusUpdate":{"taskId":"done","contextId":"c","status":{"state":"TASK_STATE_COMPLETED"}}}`)
	pub.nc.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	msgs := crashMessages(plan.messages, rand.New(rand.NewPCG(seed, 2)))
	publisher := startCrashPublisher(ctx, t, "nats://"+d.natsAddr, msgs, plan.pace)

	schedule := killSchedule(plan, rng)
	created := 0 // completed registrations created so far, for fresh ids
	kinds := map[string]int{}
	for k, kind := range schedule {
		if k < plan.busyKills {
			mark := int64((k + 1) * plan.messages / (plan.busyKills + 1))
			waitFor(t, 120*time.Second, fmt.Sprintf("%d messages published", mark), func() bool {
				return publisher.published.Load() >= mark
			})
		}
		detail := ""
		switch kind {
		case "random":
			time.Sleep(time.Duration(rng.Int64N(int64(1500 * time.Millisecond))))
		case "POST in flight":
			if !sink.holdOne(2 * time.Second) {
				kind = "random"
				detail = " (no POST came to hold)"
			}
		case "during purge":
			created = topUpCompleted(t, d, sink, plan.completed, created)
			detail = " " + killDuringPurge(t, d, plan.completed)
		}
		if k < plan.busyKills && publisher.published.Load() < int64(plan.messages) {
			kind += ", publishing"
		}
		kinds[kind]++
		d.kill9()
		sink.releaseHeld()
		t.Logf("kill %d: %s%s (published %d)", k+1, kind, detail, publisher.published.Load())
		d.start()
		checkAfterKill(t, d, regs)
	}
	t.Logf("kills survived: %d %v", plan.kills, kinds)

	select {
	case <-publisher.done:
	case <-time.After(120 * time.Second):
		t.Fatalf("publishing did not finish: %d of %d", publisher.published.Load(), plan.messages)
	}
	if publisher.err != nil {
		t.Fatalf("publisher: %v", publisher.err)
	}

	// The ground truth is what the stream holds.
	nc, err := nats.Connect("nats://" + d.natsAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	stored := streamContents(t, js, "JOURNAL")
	inStream := make(map[string]bool, len(stored))
	for _, m := range stored {
		inStream[string(m.data)] = true
	}
	for _, p := range publisher.acked {
		if !inStream[p] {
			t.Fatalf("JetStream acknowledged %q but the stream does not hold it", p)
		}
	}
	want := expectedDeliveries(t, regs, stored)

	// Wait for the last run to catch up; a delivery that never comes is
	// then named by the check below rather than by a bare timeout.
	complete := func() bool {
		for _, r := range regs {
			if sink.uniqueIDs(r.id()) < len(want[r.id()]) {
				return false
			}
		}
		return true
	}
	for deadline := time.Now().Add(plan.drain); !complete() && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	if !complete() {
		t.Errorf("after %v, some registrations still miss deliveries", plan.drain)
	}
	checked, lost, dups, worst := 0, 0, 0, ""
	worstDups := -1
	failures := sink.failed()
	// A kill repeats what was acknowledged since the last flush (every
	// 20 ms) plus the POSTs in flight; a POST answered 500 repeats the
	// events of its journal message that went before it. 64 per kill per
	// registration is an order of magnitude above that, and far below
	// what a cursor that is not flushed would repeat.
	const perKill = 64
	bound := plan.kills*perKill + failures
	for _, r := range regs {
		acks := sink.acks(r.id())
		n := checkDeliveries(t, r, acks, want[r.id()])
		checked += n
		lost += len(want[r.id()]) - n
		extra := len(acks) - n
		dups += extra
		if extra > worstDups {
			worstDups, worst = extra, r.id()
		}
		if extra > bound {
			t.Errorf("%s: %d repeats for %d kills and %d failed POSTs (bound %d)", r.id(), extra, plan.kills, failures, bound)
		}
		if got := d.get(r.id()); got.State != "active" {
			t.Errorf("%s ended %s: %s", r.id(), got.State, got.LastError)
		}
	}
	t.Logf("messages checked: %d deliveries of %d journal messages to %d registrations; %d lost",
		checked+lost, len(stored), len(regs), lost)
	t.Logf("duplicates: %d in all (%.2f%% of deliveries), most %d for %s; bound per registration %d (%d kills × %d + %d failed POSTs)",
		dups, 100*float64(dups)/float64(max(checked, 1)), worstDups, worst, bound, plan.kills, perKill, failures)

	// What the interrupted purge left is purged now, and only that.
	out, code := d.cli("purge", "--completed-older-than", "0s")
	if code != 0 || !strings.Contains(out, "purged") {
		t.Fatalf("purge after the kills: exit %d\n%s", code, out)
	}
	left := 0
	for _, r := range d.registrations() {
		if r.State == "completed" {
			t.Errorf("completed registration %s left after a complete purge", r.ID)
		}
		left++
	}
	if left != len(regs) {
		t.Errorf("%d registrations left after the purge, want the %d active ones", left, len(regs))
	}
	if code := d.stop(); code != 0 {
		t.Fatalf("SIGTERM exit %d", code)
	}
}

// killSchedule says how each kill lands, shuffled by the seed: at least
// two with a POST held in flight, one right after a start, the purge
// kills, the rest at a random moment.
func killSchedule(plan crashPlan, rng *rand.Rand) []string {
	purges := 1
	if plan.purgeEvery > 0 {
		purges = plan.kills / plan.purgeEvery
	}
	inFlight, started := max(2, plan.kills/3), max(1, plan.kills/8)
	s := make([]string, 0, plan.kills)
	for range purges {
		s = append(s, "during purge")
	}
	for range inFlight {
		s = append(s, "POST in flight")
	}
	for range started {
		s = append(s, "just started")
	}
	for len(s) < plan.kills {
		s = append(s, "random")
	}
	rng.Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
	return s[:plan.kills]
}

// topUpCompleted brings the completed registrations back to n: it
// registers A2A registrations on the task whose terminal event is already
// in the journal and waits until they have delivered it and completed.
// created counts those made before, for fresh ids; the new count is
// returned.
func topUpCompleted(t *testing.T, d *chaosDaemon, sink *chaosSink, n, created int) int {
	t.Helper()
	for range n - countState(d, "completed") {
		d.create(map[string]any{"id": fmt.Sprintf("done-%05d", created), "namespace": "a2a", "taskId": "done", "url": sink.URL + "/done"})
		created++
	}
	waitFor(t, 60*time.Second, fmt.Sprintf("%d registrations to complete", n), func() bool {
		return countState(d, "completed") == n
	})
	return created
}

// countState counts the registrations in a state through the admin API.
func countState(d *chaosDaemon, state string) int {
	rs, ok := listState(d, state)
	if !ok {
		return -1
	}
	return len(rs)
}

// listState lists the registrations in a state ("" for all) through the
// admin API, page by page; false when a page is not answered 200.
func listState(d *chaosDaemon, state string) ([]apiRegistration, bool) {
	var all []apiRegistration
	after := ""
	for {
		var page struct {
			Registrations []apiRegistration `json:"registrations"`
			Next          string            `json:"next"`
		}
		if code := d.api("GET", "/v1/registrations?limit=1000&state="+state+"&after="+after, nil, &page); code != http.StatusOK {
			return nil, false
		}
		all = append(all, page.Registrations...)
		if page.Next == "" {
			return all, true
		}
		after = page.Next
	}
}

// killDuringPurge starts `bridge purge` one registration per batch and
// returns once it has visibly begun deleting, for the caller to kill the
// bridge mid-purge. The purge client then fails; after the restart the
// store must hold every active registration and some or none of the
// completed ones.
func killDuringPurge(t *testing.T, d *chaosDaemon, completed int) string {
	t.Helper()
	if countState(d, "completed") != completed {
		t.Fatalf("expected %d completed registrations before the purge", completed)
	}
	cmd := exec.Command(bin.bridge, "purge", "--admin-url", "http://"+d.admin, "--data-dir", d.dataDir,
		"--completed-older-than", "0s", "--batch-size", "1")
	cmd.Env = append(os.Environ(), "BRIDGE_ADMIN_TOKEN=")
	out := &testutil.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-done:
			done <- err
			return fmt.Sprintf("(the purge finished first: %v %s)", err, strings.TrimSpace(out.String()))
		default:
		}
		if n := countState(d, "completed"); n >= 0 && n < completed {
			return fmt.Sprintf("(%d of %d completed registrations deleted when killed)", completed-n, completed)
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("the purge deleted nothing within 30 s: %s", out.String())
	return ""
}

// checkAfterKill is what an operator does after a crash: the store opened
// (the start), `bridge list` reads it, and nothing was lost from it.
func checkAfterKill(t *testing.T, d *chaosDaemon, regs []crashReg) {
	t.Helper()
	listed := d.registrations()
	byID := make(map[string]apiRegistration, len(listed))
	for _, r := range listed {
		byID[r.ID] = r
		if strings.HasPrefix(r.ID, "done-") && r.State != "completed" {
			t.Errorf("after run %d: %s is %s, want completed", d.runs-1, r.ID, r.State)
		}
	}
	for _, r := range regs {
		got, ok := byID[r.id()]
		if !ok {
			t.Fatalf("after run %d: registration %s is gone", d.runs-1, r.id())
		}
		if got.State != "active" {
			t.Errorf("after run %d: %s is %s: %s", d.runs-1, r.id(), got.State, got.LastError)
		}
	}
}

// wantDelivery is one delivery a registration must receive.
type wantDelivery struct {
	id   string // webhook-id
	data []byte // the journal payload (outbox) or the A2A event
}

// expectedDeliveries derives, from what the stream holds, what each
// registration must receive, in stream order.
func expectedDeliveries(t *testing.T, regs []crashReg, stored []storedMsg) map[string][]wantDelivery {
	t.Helper()
	want := make(map[string][]wantDelivery, len(regs))
	for _, m := range stored {
		for _, r := range regs {
			if !subjectMatches(r.subject, m.subject) {
				continue
			}
			if !r.a2a {
				want[r.id()] = append(want[r.id()], wantDelivery{id: fmt.Sprintf("JOURNAL-%d", m.seq), data: m.data})
				continue
			}
			evs, err := a2aEvents(m.data)
			if err != nil {
				t.Fatalf("journal message %d: %v", m.seq, err)
			}
			for i, ev := range evs {
				want[r.id()] = append(want[r.id()], wantDelivery{id: fmt.Sprintf("JOURNAL-%d-%d", m.seq, i), data: ev})
			}
		}
	}
	return want
}

// checkDeliveries compares what one registration's receiver acknowledged
// with what it must get: every delivery present, first arrivals in stream
// order, nothing else, and every copy of a delivery (repeats included)
// carrying the right body. It returns the number of distinct deliveries.
func checkDeliveries(t *testing.T, r crashReg, acks []chaosAck, want []wantDelivery) int {
	t.Helper()
	index := make(map[string]int, len(want))
	for i, w := range want {
		index[w.id] = i
	}
	var first []string
	seen := make(map[string]bool, len(want))
	wrong := 0 // reported one by one up to a few, then counted
	report := func(format string, args ...any) {
		if wrong++; wrong <= 5 {
			t.Errorf(format, args...)
		}
	}
	defer func() {
		if wrong > 5 {
			t.Errorf("%s: %d wrong deliveries in all", r.id(), wrong)
		}
	}()
	for _, a := range acks {
		i, ok := index[a.id]
		if !ok {
			report("%s received %q, which is not a message of its filter %s", r.id(), a.id, r.subject)
			continue
		}
		if err := sameContent(r, a.body, want[i]); err != nil {
			report("%s, %s: %v", r.id(), a.id, err)
		}
		if !seen[a.id] {
			seen[a.id] = true
			first = append(first, a.id)
		}
	}
	ids := make([]string, len(want))
	for i, w := range want {
		ids[i] = w.id
	}
	if !slices.Equal(first, ids) {
		lost := 0
		for _, id := range ids {
			if !seen[id] {
				lost++
			}
		}
		at := 0
		for at < min(len(first), len(ids)) && first[at] == ids[at] {
			at++
		}
		t.Errorf("%s: %d of %d deliveries never arrived; first arrivals leave stream order at position %d (got %q, want %q)",
			r.id(), lost, len(ids), at, excerpt(first, at), excerpt(ids, at))
	}
	return len(seen)
}

func excerpt(s []string, i int) []string {
	return s[max(0, i-2):min(len(s), i+3)]
}

// sameContent checks a delivered body against the journal: byte for byte
// in binary mode, the data of the CloudEvent in structured mode, the event
// by value for A2A.
func sameContent(r crashReg, body string, w wantDelivery) error {
	switch {
	case r.a2a:
		if !jsonEqual([]byte(body), w.data) {
			return fmt.Errorf("body %s, want the event %s", body, w.data)
		}
	case r.format == "structured":
		var ev struct {
			ID   string          `json:"id"`
			Data json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal([]byte(body), &ev); err != nil {
			return fmt.Errorf("structured body %q: %v", body, err)
		}
		if ev.ID != w.id || !jsonEqual(ev.Data, w.data) {
			return fmt.Errorf("CloudEvent id %q data %s, want %q %s", ev.ID, ev.Data, w.id, w.data)
		}
	default:
		if body != string(w.data) {
			return fmt.Errorf("body %q, want %q", body, w.data)
		}
	}
	return nil
}

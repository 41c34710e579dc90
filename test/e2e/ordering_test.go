package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestOrderingKeys runs the scenarios of CONTRACT §12 on one bridge at
// once, each with its own registrations, subjects and receiver: POSTs
// in parallel with order kept per key (subject, tokens, header), a key
// that fails while the others go on, a 429 that holds every key, a 410
// that parks with messages acknowledged ahead, a slow POST that holds
// back no other key, and what the admin API refuses or keeps.
func TestOrderingKeys(t *testing.T) {
	d := newDaemon(t, "--a2a-allow-loopback")
	d.start()
	scenarios := []struct {
		name string
		run  func(*testing.T, *daemon)
	}{
		{"parallel-per-key", orderedPerKey},
		{"failing-key-and-429", failingKeyWaits},
		{"410-parks-and-unpark", goneParksKeepsAhead},
		{"slow-key-holds-no-other", slowKeyHoldsNoOther},
		{"admin-api", orderingThroughTheAPI},
	}
	// All at once, from goroutines as TestHostileReceivers does: the
	// registrations share the bridge at the same time.
	var wg sync.WaitGroup
	for _, sc := range scenarios {
		wg.Go(func() { t.Run(sc.name, func(t *testing.T) { sc.run(t, d) }) })
	}
	wg.Wait()
	if code := d.stop(); code != 0 {
		t.Fatalf("exit code %d, want 0", code)
	}
}

// orderedRegistration registers id on filter, POSTing to the sink, from
// the stream's first message, with the ordering given, and checks the
// answer echoes it with maxInFlight filled in.
func orderedRegistration(t *testing.T, d *daemon, sink *keyedSink, id, filter string, ordering map[string]any, maxInFlight int) map[string]any {
	t.Helper()
	reg := map[string]any{"id": id, "namespace": "outbox", "subject": filter, "url": sink.url(id), "start": "first", "ordering": ordering}
	enrol(t, d, reg)
	if s := snapshotOf(t, d, id); s.Ordering.Key != ordering["key"] || s.Ordering.MaxInFlight != maxInFlight {
		t.Errorf("%s: ordering echoed as %+v, want key %v and maxInFlight %d", id, s.Ordering, ordering["key"], maxInFlight)
	}
	return reg
}

// caughtUp waits until the registration has nothing in flight, nothing
// acknowledged ahead, and its cursor past last.
func caughtUp(t *testing.T, d *daemon, id string, last uint64) regSnapshot {
	t.Helper()
	return waitSnapshot(t, d, id, fmt.Sprintf("the cursor past %d, nothing ahead or in flight", last), func(s regSnapshot) bool {
		return s.NextSeq > last && s.Ahead == 0 && s.InFlight == 0 && s.Attempts == 0
	})
}

func lastSeq(seqs map[string]uint64) uint64 {
	var last uint64
	for _, s := range seqs {
		last = max(last, s)
	}
	return last
}

// 40 keys × 25 messages each for a key by subject, by two tokens of the
// subject (a key spans several subjects) and by a header (a key spans
// several subjects, a subject several keys; messages without the header
// are one more key), to a receiver answering after 0–25 ms: every
// message arrives, no message's first POST comes before the one ahead
// of it with its key was answered 2xx, and the receiver serves more than
// one POST of each registration at once, never more than its
// maxInFlight.
func orderedPerKey(t *testing.T, d *daemon) {
	seed := crashSeed(t)
	rng := rand.New(rand.NewPCG(seed, 1))
	sink := newKeyedSink(t, seed, 0, 25*time.Millisecond)
	pub := publisherOf(t, d)

	events := []string{"created", "paid", "shipped"}
	var customers []string
	for _, region := range []string{"eu", "us"} {
		for _, c := range keyNames("c", 20) {
			customers = append(customers, region+"."+c)
		}
	}
	byHeader := keyedPlan(rng, append(keyNames("t", 40), "none"), 0, 25, func(string, int) string {
		return "journal.kh." + []string{"a", "b", "c", "d", "e"}[rng.IntN(5)]
	})
	for i, m := range byHeader {
		if key, _, _ := splitKeyed(m.body); key != "none" {
			byHeader[i].header = nats.Header{"X-Tenant": {key}}
		}
	}
	cases := []struct {
		id, filter  string
		ordering    map[string]any
		maxInFlight int
		plan        []keyedMsg
	}{
		{"by-subject", "journal.ks.>", map[string]any{"key": "subject", "maxInFlight": 8}, 8,
			keyedPlan(rng, keyNames("s", 40), 0, 25, func(k string, _ int) string { return "journal.ks." + k })},
		// No maxInFlight: the default, 16.
		{"by-tokens", "journal.kt.>", map[string]any{"key": "tokens:3,4"}, 16,
			keyedPlan(rng, customers, 0, 25, func(k string, n int) string { return "journal.kt." + k + "." + events[n%3] })},
		{"by-header", "journal.kh.>", map[string]any{"key": "header:X-Tenant", "maxInFlight": 12}, 12, byHeader},
	}
	last := map[string]uint64{}
	for _, c := range cases {
		orderedRegistration(t, d, sink, c.id, c.filter, c.ordering, c.maxInFlight)
	}
	for _, c := range cases {
		last[c.id] = lastSeq(publishKeyed(t, pub, c.plan))
	}
	for _, c := range cases {
		sink.waitAcked(t, c.id, len(c.plan), time.Minute)
		repeats := sink.check(t, c.id, c.plan)
		peak := sink.seen(c.id).peak
		if peak < 2 || peak > c.maxInFlight {
			t.Errorf("%s: at most %d POSTs at once at the receiver, want 2 to maxInFlight %d", c.id, peak, c.maxInFlight)
		}
		caughtUp(t, d, c.id, last[c.id])
		t.Logf("%s (%v): %d messages, at most %d POSTs at once (maxInFlight %d), %d repeats",
			c.id, c.ordering["key"], len(c.plan), peak, c.maxInFlight, repeats)
	}
}

// One subject answered 503 without Retry-After for 3 s: the other nine
// are delivered meanwhile, the registration's answer holds its cursor at
// the failing message with the others acknowledged ahead of it, the
// failing message is retried on the §5 schedule and none behind it with
// its key is POSTed, and once the receiver recovers the subject's
// messages arrive in order. Then a 429 with Retry-After: 2 on one
// message holds every key: no POST of the registration comes for 2 s
// (asserted as at least 1.5 s) after it.
func failingKeyWaits(t *testing.T, d *daemon) {
	const id, failing, throttled = "fail-503", "s03", "s05#010"
	seed := crashSeed(t)
	rng := rand.New(rand.NewPCG(seed, 2))
	sink := newKeyedSink(t, seed, 0, 5*time.Millisecond)
	var (
		down      atomic.Bool
		throttle  atomic.Bool
		mu        sync.Mutex
		firstFail time.Time
	)
	down.Store(true)
	sink.answer(id, func(body string) (int, string) {
		if key, n, _ := splitKeyed(body); key == failing && n > 0 && down.Load() {
			mu.Lock()
			if firstFail.IsZero() {
				firstFail = time.Now()
			}
			mu.Unlock()
			return http.StatusServiceUnavailable, ""
		}
		if body == throttled && throttle.CompareAndSwap(false, true) {
			return http.StatusTooManyRequests, "2"
		}
		return http.StatusNoContent, ""
	})
	orderedRegistration(t, d, sink, id, "journal.kf.>", map[string]any{"key": "subject"}, 16)
	pub := publisherOf(t, d)
	keys := keyNames("s", 10)
	subject := func(k string, _ int) string { return "journal.kf." + k }

	// s03#000 goes through; s03#001, published next, fails.
	plan := firstOf(keyedPlan(rng, keys, 0, 10, subject), failing+"#000", failing+"#001")
	seqs := publishKeyed(t, pub, plan[:1])
	caughtUp(t, d, id, seqs[plan[0].body])
	for b, q := range publishKeyed(t, pub, plan[1:]) {
		seqs[b] = q
	}
	others := func(b string) bool { k, _, _ := splitKeyed(b); return k != failing }
	waitFor(t, 30*time.Second, "the other subjects' 90 messages while "+failing+" is answered 503", func() bool {
		return sink.acked(id, others) == 90
	})
	s := waitSnapshot(t, d, id, "the 90 acknowledged ahead of the failing message", func(s regSnapshot) bool { return s.Ahead >= 90 })
	if s.Ahead != 90 || s.NextSeq <= seqs[failing+"#000"] || s.NextSeq > seqs[failing+"#001"] ||
		s.State != "active" || s.Attempts < 1 || !strings.Contains(s.LastError, "503") {
		t.Errorf("while %s#001 (seq %d) fails: %+v; want active, nextSeq at it (past %d), ahead 90, attempts ≥ 1, lastError naming the 503",
			failing, seqs[failing+"#001"], s, seqs[failing+"#000"])
	}
	t.Logf("while %s#001 (seq %d) fails: nextSeq %d, ahead %d, attempts %d, lastError %q",
		failing, seqs[failing+"#001"], s.NextSeq, s.Ahead, s.Attempts, s.LastError)
	mu.Lock()
	since := firstFail
	mu.Unlock()
	time.Sleep(time.Until(since.Add(3 * time.Second)))
	down.Store(false)
	failed := time.Since(since)
	// §5: 1 s after the first failure, 1–2 s after the second, …: at
	// most one POST a second.
	if n := sink.seen(id).posted[failing+"#001"]; n > 1+int(failed/time.Second) {
		t.Errorf("%s#001 POSTed %d times in %v of failures: not backing off", failing, n, failed.Round(time.Millisecond))
	}
	sink.waitAcked(t, id, len(plan), 30*time.Second)
	sink.check(t, id, plan)
	caughtUp(t, d, id, lastSeq(seqs))

	// The 429: published alone, answered, counted; then the rest.
	round := firstOf(keyedPlan(rng, keys, 10, 5, subject), throttled)
	before := len(sink.seen(id).posts)
	seqs = publishKeyed(t, pub, round[:1])
	s = waitSnapshot(t, d, id, "the 429 counted", func(s regSnapshot) bool { return s.Attempts >= 1 })
	if !strings.Contains(s.LastError, "429") {
		t.Errorf("after the 429: lastError %q, want it named", s.LastError)
	}
	for b, q := range publishKeyed(t, pub, round[1:]) {
		seqs[b] = q
	}
	sink.waitAcked(t, id, len(plan)+len(round), 30*time.Second)
	sink.check(t, id, append(plan, round...))
	posts := sink.seen(id).posts[before:]
	if len(posts) < 2 || posts[0].body != throttled || posts[0].status != http.StatusTooManyRequests {
		t.Fatalf("the first POST after the 429 round was published is not the 429 of %s: %+v", throttled, posts[:min(2, len(posts))])
	}
	paused := posts[0].answered
	for _, p := range posts[1:] {
		if p.at.Before(paused.Add(1500 * time.Millisecond)) {
			t.Errorf("%s POSTed %v after the 429 with Retry-After: 2", p.body, p.at.Sub(paused).Round(time.Millisecond))
		}
	}
	t.Logf("after the 429 with Retry-After: 2, the next POST (%s) came %v later; %d POSTs of %d keys followed",
		posts[1].body, posts[1].at.Sub(paused).Round(time.Millisecond), len(posts)-1, len(keys))
	caughtUp(t, d, id, lastSeq(seqs))
}

// A 410 on one key's message parks the registration; the messages of
// other keys acknowledged meanwhile stay acknowledged ahead of the
// cursor, nothing is POSTed while parked, and unpark POSTs none of them
// again: every message is acknowledged exactly once.
func goneParksKeepsAhead(t *testing.T, d *daemon) {
	const id, gone, ahead = "gone-410", "g02#000", 20
	seed := crashSeed(t)
	rng := rand.New(rand.NewPCG(seed, 4))
	sink := newKeyedSink(t, seed, 0, 5*time.Millisecond)
	var answered atomic.Bool
	sink.answer(id, func(body string) (int, string) {
		if body != gone || !answered.CompareAndSwap(false, true) {
			return http.StatusNoContent, ""
		}
		// Held until other keys' messages were acknowledged, so some are
		// ahead of the cursor when the 410 parks.
		for deadline := time.Now().Add(10 * time.Second); sink.acked(id, nil) < ahead && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
		return http.StatusGone, ""
	})
	// Published before the registration exists, so its first turn has
	// them all (slowKeyHoldsNoOther is about messages that come later).
	pub := publisherOf(t, d)
	keys := keyNames("g", 8)
	subject := func(k string, _ int) string { return "journal.kg." + k }
	plan := firstOf(keyedPlan(rng, keys, 0, 10, subject), gone)
	seqs := publishKeyed(t, pub, plan)
	orderedRegistration(t, d, sink, id, "journal.kg.>", map[string]any{"key": "subject", "maxInFlight": 4}, 4)

	waitSnapshot(t, d, id, "parked by the 410", isParked)
	var s regSnapshot
	var acked int
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		s, acked = snapshotOf(t, d, id), sink.acked(id, nil)
		if s.InFlight == 0 && s.Ahead == acked {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("parked for 10 s: inFlight %d, ahead %d, and the receiver acknowledged %d messages", s.InFlight, s.Ahead, acked)
		}
	}
	if s.State != "parked" || s.NextSeq > seqs[gone] || acked < ahead || !strings.Contains(s.LastError, "410") {
		t.Errorf("parked: %+v; want nextSeq at %s (seq %d), %d or more acknowledged ahead, lastError naming the 410", s, gone, seqs[gone], ahead)
	}
	t.Logf("parked by the 410 of %s (seq %d): nextSeq %d, ahead %d, lastError %q", gone, seqs[gone], s.NextSeq, s.Ahead, s.LastError)

	// Parked, nothing is POSTed, though more comes.
	more := keyedPlan(rng, keys, 10, 1, subject)
	for b, q := range publishKeyed(t, pub, more) {
		seqs[b] = q
	}
	posts := len(sink.seen(id).posts)
	time.Sleep(time.Second)
	if n := len(sink.seen(id).posts); n != posts {
		t.Errorf("%d POSTs while parked", n-posts)
	}
	if code, body := callAdmin(t, d, "POST", "/v1/registrations/"+id+"/unpark", nil); code != http.StatusOK {
		t.Fatalf("unpark: %d %s", code, body)
	}
	all := append(plan, more...)
	sink.waitAcked(t, id, len(all), 30*time.Second)
	if repeats := sink.check(t, id, all); repeats != 0 {
		t.Errorf("%d repeats: unpark POSTed again what was acknowledged", repeats)
	}
	for b, n := range sink.seen(id).posted {
		if want := 1 + boolInt(b == gone); n != want {
			t.Errorf("%s POSTed %d times, want %d", b, n, want)
		}
	}
	caughtUp(t, d, id, lastSeq(seqs))
}

// One key's message answered slowly (held until the other keys' 20
// messages are acknowledged, 6 s at most) holds back no other key: the
// messages of other keys published while it is in flight, at once and
// 1.5 s later, are all acknowledged before it is answered.
func slowKeyHoldsNoOther(t *testing.T, d *daemon) {
	const id, slow = "slow-key", "h00#000"
	seed := crashSeed(t)
	rng := rand.New(rand.NewPCG(seed, 7))
	sink := newKeyedSink(t, seed, 0, 5*time.Millisecond)
	otherKey := func(b string) bool { k, _, _ := splitKeyed(b); return k != "h00" }
	var (
		mu       sync.Mutex
		heldFor  time.Duration
		whileSet bool
		while    map[string]int // acknowledged per key while the slow POST was held
	)
	sink.answer(id, func(body string) (int, string) {
		if body != slow {
			return http.StatusNoContent, ""
		}
		start := time.Now()
		for deadline := start.Add(6 * time.Second); sink.acked(id, otherKey) < 20 && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
		seen := sink.seen(id)
		mu.Lock()
		defer mu.Unlock()
		if !whileSet {
			heldFor, whileSet, while = time.Since(start), true, map[string]int{}
			for b := range seen.acks {
				k, _, _ := splitKeyed(b)
				while[k]++
			}
		}
		return http.StatusNoContent, ""
	})
	orderedRegistration(t, d, sink, id, "journal.kw.>", map[string]any{"key": "subject", "maxInFlight": 4}, 4)
	pub := publisherOf(t, d)
	subject := func(k string, _ int) string { return "journal.kw." + k }
	now := firstOf(keyedPlan(rng, []string{"h00", "h01", "h02"}, 0, 5, subject), slow)
	later := keyedPlan(rng, []string{"h03", "h04"}, 0, 5, subject)
	seqs := publishKeyed(t, pub, now[:1])
	waitFor(t, 10*time.Second, slow+" in flight", func() bool { return sink.seen(id).posted[slow] > 0 })
	for b, q := range publishKeyed(t, pub, now[1:]) {
		seqs[b] = q
	}
	time.Sleep(1500 * time.Millisecond)
	for b, q := range publishKeyed(t, pub, later) {
		seqs[b] = q
	}
	s := snapshotOf(t, d, id)
	t.Logf("1.5 s after %s came: nextSeq %d, inFlight %d, ahead %d, %d of the other keys' messages acknowledged",
		slow, s.NextSeq, s.InFlight, s.Ahead, sink.acked(id, otherKey))
	all := append(now, later...)
	sink.waitAcked(t, id, len(all), 30*time.Second)
	sink.check(t, id, all)
	mu.Lock()
	defer mu.Unlock()
	if n := while["h01"] + while["h02"] + while["h03"] + while["h04"]; n != 20 {
		t.Errorf("while %s was in flight (%v), %d of the other keys' 20 messages were acknowledged: %d of the 10 published at once, %d of the 10 published 1.5 s later",
			slow, heldFor.Round(time.Millisecond), n, while["h01"]+while["h02"], while["h03"]+while["h04"])
	}
	t.Logf("%s held %v; meanwhile acknowledged per key: %v", slow, heldFor.Round(time.Millisecond), while)
	caughtUp(t, d, id, lastSeq(seqs))
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// The admin API refuses, with 400 naming the field, an ordering beside
// batch, on an a2a registration, with an unknown key form or a
// maxInFlight outside 1–256, on create and on PUT; a PUT that changes
// the ordering keeps the cursor and what is acknowledged ahead of it,
// and POSTs none of that again; the CLI registers an ordering.
func orderingThroughTheAPI(t *testing.T, d *daemon) {
	sink := newKeyedSink(t, 1, 0, 2*time.Millisecond)
	outbox := func(id string, ordering map[string]any) map[string]any {
		return map[string]any{"id": id, "namespace": "outbox", "subject": "journal.kv.>", "url": sink.url(id), "ordering": ordering}
	}
	keyed := map[string]any{"key": "subject"}
	withBatch := outbox("v-batch", keyed)
	withBatch["batch"] = map[string]any{"maxEvents": 10}
	refused := []struct {
		name      string
		body      map[string]any
		fragments []string
	}{
		{"with batch", withBatch, []string{"ordering", "batch"}},
		{"on a2a", map[string]any{"id": "v-a2a", "namespace": "a2a", "taskId": "task-v", "url": sink.url("v-a2a"), "ordering": keyed}, []string{"ordering"}},
		{"tokens:0", outbox("v-tokens0", map[string]any{"key": "tokens:0"}), []string{"ordering", "key"}},
		{"tokens:", outbox("v-tokens", map[string]any{"key": "tokens:"}), []string{"ordering", "key"}},
		{"bogus", outbox("v-bogus", map[string]any{"key": "bogus"}), []string{"ordering", "key"}},
		{"header:", outbox("v-header", map[string]any{"key": "header:"}), []string{"ordering", "key"}},
		{"maxInFlight 0", outbox("v-zero", map[string]any{"key": "subject", "maxInFlight": 0}), []string{"ordering", "maxInFlight"}},
		{"maxInFlight 257", outbox("v-257", map[string]any{"key": "subject", "maxInFlight": 257}), []string{"ordering", "maxInFlight"}},
	}
	for _, c := range refused {
		t.Run(c.name, func(t *testing.T) {
			code, body := callAdmin(t, d, "POST", "/v1/registrations", mustJSON(t, c.body))
			wantRefusal(t, code, body, http.StatusBadRequest, c.fragments...)
			if code, _ := callAdmin(t, d, "GET", "/v1/registrations/"+c.body["id"].(string), nil); code != http.StatusNotFound {
				t.Errorf("GET after the refusal: %d, want 404", code)
			}
		})
	}

	t.Run("PUT keeps the cursor and ahead", func(t *testing.T) {
		const id, held = "v-put", "v00"
		var down atomic.Bool
		down.Store(true)
		sink.answer(id, func(body string) (int, string) {
			if k, _, _ := splitKeyed(body); k == held && down.Load() {
				return http.StatusInternalServerError, ""
			}
			return http.StatusNoContent, ""
		})
		reg := orderedRegistration(t, d, sink, id, "journal.kv.>", map[string]any{"key": "subject", "maxInFlight": 8}, 8)
		rng := rand.New(rand.NewPCG(crashSeed(t), 5))
		plan := firstOf(keyedPlan(rng, keyNames("v", 5), 0, 6, func(k string, _ int) string { return "journal.kv." + k }), held+"#000")
		seqs := publishKeyed(t, publisherOf(t, d), plan)
		before := waitSnapshot(t, d, id, "24 messages acknowledged ahead of "+held+"#000", func(s regSnapshot) bool { return s.Ahead == 24 && s.InFlight == 0 })
		if before.NextSeq > seqs[held+"#000"] {
			t.Errorf("nextSeq %d past %s#000 (seq %d), which was never acknowledged", before.NextSeq, held, seqs[held+"#000"])
		}

		reg["ordering"] = map[string]any{"key": "subject", "maxInFlight": 257}
		code, body := callAdmin(t, d, "PUT", "/v1/registrations/"+id, mustJSON(t, reg))
		wantRefusal(t, code, body, http.StatusBadRequest, "ordering", "maxInFlight")
		reg["ordering"] = map[string]any{"key": "tokens:3", "maxInFlight": 4}
		code, body = callAdmin(t, d, "PUT", "/v1/registrations/"+id, mustJSON(t, reg))
		if code != http.StatusOK {
			t.Fatalf("PUT changing the ordering: %d %s", code, body)
		}
		var put regSnapshot
		if err := json.Unmarshal(body, &put); err != nil {
			t.Fatal(err)
		}
		for what, s := range map[string]regSnapshot{"PUT's answer": put, "GET after the PUT": snapshotOf(t, d, id)} {
			if s.NextSeq != before.NextSeq || s.Ahead != before.Ahead || s.Ordering.Key != "tokens:3" || s.Ordering.MaxInFlight != 4 {
				t.Errorf("%s: nextSeq %d, ahead %d, ordering %+v; want nextSeq %d and ahead %d kept, ordering tokens:3 × 4",
					what, s.NextSeq, s.Ahead, s.Ordering, before.NextSeq, before.Ahead)
			}
		}
		down.Store(false)
		sink.waitAcked(t, id, len(plan), 30*time.Second)
		if repeats := sink.check(t, id, plan); repeats != 0 {
			t.Errorf("%d repeats after the PUT", repeats)
		}
		for b, n := range sink.seen(id).posted {
			if k, _, _ := splitKeyed(b); k != held && n != 1 {
				t.Errorf("%s, acknowledged before the PUT, POSTed %d times", b, n)
			}
		}
		caughtUp(t, d, id, lastSeq(seqs))
	})

	t.Run("CLI", func(t *testing.T) {
		out, code := runBridge(t, []string{"BRIDGE_ADMIN_TOKEN="}, "register", "--admin-url", "http://"+d.admin, "--data-dir", d.dataDir,
			"--id", "v-cli", "--namespace", "outbox", "--subject", "journal.kcli.>", "--url", sink.url("v-cli"),
			"--order-key", "tokens:2", "--order-max-in-flight", "5")
		if code != 0 {
			t.Fatalf("register --order-key tokens:2 --order-max-in-flight 5: exit %d\n%s", code, out)
		}
		t.Cleanup(func() { _, _, _ = tryAdmin(d, "DELETE", "/v1/registrations/v-cli", nil) })
		if s := snapshotOf(t, d, "v-cli"); s.Ordering.Key != "tokens:2" || s.Ordering.MaxInFlight != 5 {
			t.Errorf("registered through the CLI: ordering %+v, want tokens:2 × 5", s.Ordering)
		}
	})
}

func publisherOf(t *testing.T, d *daemon) *publisher { return newPublisher(t, "nats://"+d.natsAddr) }

// stopMidStream registers id with the subject as its key and maxInFlight
// limit, publishes 50 subjects × 40 messages on journal.<family>.*, stops
// the bridge with stop once a third are acknowledged, starts it again
// and waits for everything. It returns the plan, when it stopped the
// bridge and how many messages were acknowledged then.
func stopMidStream(t *testing.T, d *chaosDaemon, sink *keyedSink, rng *rand.Rand, id, family string, limit int, stop func()) ([]keyedMsg, time.Time, int) {
	t.Helper()
	orderedRegistration(t, d.daemon, sink, id, "journal."+family+".>", map[string]any{"key": "subject", "maxInFlight": limit}, limit)
	plan := keyedPlan(rng, keyNames("k", 50), 0, 40, func(k string, _ int) string { return "journal." + family + "." + k })
	last := lastSeq(publishKeyed(t, publisherOf(t, d.daemon), plan))
	sink.waitAcked(t, id, len(plan)/3, time.Minute)
	at := time.Now()
	stop()
	n := sink.acked(id, nil)
	if n >= len(plan) {
		t.Fatalf("all %d messages were acknowledged before the bridge stopped: not mid-stream", n)
	}
	d.start()
	sink.waitAcked(t, id, len(plan), 2*time.Minute)
	caughtUp(t, d.daemon, id, last)
	return plan, at, n
}

// kill -9 mid-stream of a registration keyed by subject, 2,000 messages
// over 50 subjects and 16 POSTs in flight: after the restart everything
// arrives, no first POST overtakes the one ahead with its key, and the
// repeats are at most what was in flight or acknowledged within
// --flush-interval. SIGTERM mid-stream of another: no repeat at all.
func TestOrderingKillNineAndSIGTERM(t *testing.T) {
	const limit, flush, minDelay = 16, 20 * time.Millisecond, 5 * time.Millisecond
	seed := crashSeed(t)
	rng := rand.New(rand.NewPCG(seed, 3))
	d := newChaosDaemon(t, "--flush-interval", flush.String())
	d.start()
	sink := newKeyedSink(t, seed, minDelay, 25*time.Millisecond)

	plan, at, killedAt := stopMidStream(t, d, sink, rng, "killed", "kc", limit, d.kill9)
	repeats := sink.check(t, "killed", plan)
	acked, open := sink.ackedAround("killed", at, flush)
	bound := repeatBound(limit, flush, minDelay)
	if repeats > bound {
		t.Errorf("kill -9: %d repeats, more than the %d POSTs in flight and acknowledged within %v that CONTRACT §12 allows", repeats, bound, flush)
	}
	again, oldest := sink.repeatedAge("killed", at)
	t.Logf("kill -9 with %d of %d messages acknowledged: %d repeats (bound %d); at the kill the receiver had %d POSTs unanswered and had acknowledged %d in the last %v; %d acknowledged before the kill were POSTed again, the oldest acknowledged %v before it",
		killedAt, len(plan), repeats, bound, open, acked, flush, again, oldest.Round(time.Millisecond))

	plan, _, stoppedAt := stopMidStream(t, d, sink, rng, "stopped", "kd", limit, func() {
		if code := d.stop(); code != 0 {
			t.Fatalf("SIGTERM: exit %d", code)
		}
	})
	if repeats := sink.check(t, "stopped", plan); repeats != 0 {
		t.Errorf("SIGTERM mid-stream: %d repeats, want none", repeats)
	}
	t.Logf("SIGTERM with %d of %d messages acknowledged: no repeat", stoppedAt, len(plan))
	if code := d.stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// publishInBackground publishes the plan through a cluster, each message
// once (its body is its Nats-Msg-Id), and yields the outcome once done.
func publishInBackground(t *testing.T, js jetstream.JetStream, plan []keyedMsg) <-chan error {
	out := make(chan error, 1)
	quit, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		for _, m := range plan {
			select {
			case <-quit:
				out <- errors.New("stopped")
				return
			default:
			}
			if err := publishOnce(js, m.subject, m.body); err != nil {
				out <- err
				return
			}
		}
		out <- nil
	}()
	t.Cleanup(func() { close(quit); <-finished })
	return out
}

// A keyed registration on three bridges over a three-node NATS cluster
// (--store kv): kill -9 of its owner while messages stream in. Another
// bridge takes it over; nothing is lost, no first POST overtakes the one
// ahead with its key, and the repeats are at most what §6 and §12 allow:
// what was in flight or acknowledged within the last --flush-interval.
func TestOrderingClusterKillNineOfOwner(t *testing.T) {
	const id, limit, flush, minDelay = "keyed", 16, 20 * time.Millisecond, 5 * time.Millisecond
	seed := crashSeed(t)
	rng := rand.New(rand.NewPCG(seed, 6))
	c := newBridgeCluster(t, 3)
	sink := newKeyedSink(t, seed, minDelay, 25*time.Millisecond)
	c.bridges[0].create(map[string]any{"id": id, "namespace": "outbox", "subject": "journal.kk.>", "url": sink.url(id),
		"start": "first", "ordering": map[string]any{"key": "subject", "maxInFlight": limit}})
	victim := ownerOf(t, c.bridges, id)
	plan := keyedPlan(rng, keyNames("k", 50), 0, 30, func(k string, _ int) string { return "journal.kk." + k })
	published := publishInBackground(t, c.js, plan)

	sink.waitAcked(t, id, 400, time.Minute)
	at := time.Now()
	c.bridges[victim].kill9()
	killedAt := sink.acked(id, nil)
	c.waitOwned(c.live(victim), 2*clusterTTL, c.namesBut(3, victim))
	select {
	case err := <-published:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("publishing did not finish within 2 minutes")
	}
	sink.waitAcked(t, id, len(plan), 2*time.Minute)
	repeats := sink.check(t, id, plan)
	acked, open := sink.ackedAround(id, at, flush)
	bound := repeatBound(limit, flush, minDelay)
	if repeats > bound {
		t.Errorf("kill -9 of the owner: %d repeats, more than the %d POSTs in flight and acknowledged within %v that CONTRACT §6 and §12 allow", repeats, bound, flush)
	}
	again, oldest := sink.repeatedAge(id, at)
	t.Logf("kill -9 of %s, the owner, with %d of %d messages acknowledged: %d repeats (bound %d); at the kill the receiver had %d POSTs unanswered and had acknowledged %d in the last %v; %d acknowledged before the kill were POSTed again, the oldest acknowledged %v before it",
		c.name(victim), killedAt, len(plan), repeats, bound, open, acked, flush, again, oldest.Round(time.Millisecond))
	s := waitSnapshot(t, c.live(victim), id, "nothing ahead or in flight", func(s regSnapshot) bool { return s.Ahead == 0 && s.InFlight == 0 })
	if s.State != "active" || s.Attempts != 0 {
		t.Errorf("after the takeover: %+v, want active with no attempts", s)
	}
}

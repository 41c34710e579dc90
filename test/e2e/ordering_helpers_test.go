package e2e

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// Ordering keys (CONTRACT §12) seen from the receiver's side. A journal
// message of these tests carries "<key>#<n>" as its payload: its
// ordering key as the test means it and its place among that key's
// messages, published in that order. Binary CloudEvents carry the
// payload as the body, so the receiver reads both from each POST.

// keyedBody is the payload of message n of key.
func keyedBody(key string, n int) string { return fmt.Sprintf("%s#%03d", key, n) }

// splitKeyed reads a payload keyedBody wrote.
func splitKeyed(body string) (key string, n int, ok bool) {
	i := strings.LastIndexByte(body, '#')
	if i < 0 {
		return "", 0, false
	}
	n, err := strconv.Atoi(body[i+1:])
	return body[:i], n, err == nil
}

// keyedMsg is one journal message of a plan.
type keyedMsg struct {
	subject string
	body    string
	header  nats.Header
}

// keyedPlan is per messages of each key, numbered from, in an order
// shuffled by rng that keeps each key's own messages in order.
func keyedPlan(rng *rand.Rand, keys []string, from, per int, subject func(key string, n int) string) []keyedMsg {
	turns := make([]string, 0, len(keys)*per)
	for _, k := range keys {
		for range per {
			turns = append(turns, k)
		}
	}
	rng.Shuffle(len(turns), func(i, j int) { turns[i], turns[j] = turns[j], turns[i] })
	next := make(map[string]int, len(keys))
	out := make([]keyedMsg, len(turns))
	for i, k := range turns {
		n := from + next[k]
		next[k]++
		out[i] = keyedMsg{subject: subject(k, n), body: keyedBody(k, n)}
	}
	return out
}

// keyNames are prefix00, prefix01, … (n of them).
func keyNames(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%02d", prefix, i)
	}
	return out
}

// firstOf moves the plan's messages with these bodies to its front, in
// the order given; each must come before the rest of its key's there,
// so every key's order is kept.
func firstOf(plan []keyedMsg, bodies ...string) []keyedMsg {
	out := make([]keyedMsg, len(bodies), len(plan))
	for _, m := range plan {
		if i := slices.Index(bodies, m.body); i >= 0 {
			out[i] = m
		} else {
			out = append(out, m)
		}
	}
	for i, b := range bodies {
		if out[i].body != b {
			panic("no message " + b + " in the plan")
		}
	}
	return out
}

// publishKeyed publishes the plan in its order, headers included, and
// returns each message's stream sequence by its body.
func publishKeyed(t *testing.T, p *publisher, plan []keyedMsg) map[string]uint64 {
	t.Helper()
	seqs := make(map[string]uint64, len(plan))
	for _, m := range plan {
		seqs[m.body] = publishMsg(t, p, &nats.Msg{Subject: m.subject, Header: m.header, Data: []byte(m.body)})
	}
	return seqs
}

// keyedSink is a receiver for registrations with ordering keys, each
// POSTing to /r/<id>. It answers after a think time drawn between
// minDelay and maxDelay, with 204 or what the registration's rule says,
// and keeps, per registration, every POST with the moments it came and
// was answered. It counts the POSTs of each registration it is serving
// at once, and notes every first POST of a message that came before the
// message ahead of it with its key had been answered 2xx.
type keyedSink struct {
	*httptest.Server
	minDelay, maxDelay time.Duration

	mu   sync.Mutex
	rng  *rand.Rand
	regs map[string]*keyedReg
}

// keyedRule decides the answer to one POST of a registration: a status
// and a Retry-After ("" for none). It may take its time: it runs outside
// the sink's lock, before the think time.
type keyedRule func(body string) (status int, retryAfter string)

// keyedReg is what a keyedSink saw of one registration.
type keyedReg struct {
	rule      keyedRule
	posts     []keyedPost
	posted    map[string]int // body → POSTs that came
	acks      map[string]int // body → POSTs answered 2xx
	inFlight  int
	peak      int      // most POSTs served at once
	overtakes []string // first POSTs that came before the one ahead with the key was acknowledged
}

// keyedPost is one POST a keyedSink got.
type keyedPost struct {
	body     string
	at       time.Time // when it came
	answered time.Time // when its answer was written; zero if the bridge went away first
	status   int       // the answer; 0 if the bridge went away first
}

func newKeyedSink(t *testing.T, seed uint64, minDelay, maxDelay time.Duration) *keyedSink {
	s := &keyedSink{minDelay: minDelay, maxDelay: maxDelay, rng: rand.New(rand.NewPCG(seed, 0x0bde)), regs: map[string]*keyedReg{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *keyedSink) url(id string) string { return s.URL + "/r/" + id }

// reg is the record of registration id; the caller holds s.mu.
func (s *keyedSink) reg(id string) *keyedReg {
	r, ok := s.regs[id]
	if !ok {
		r = &keyedReg{posted: map[string]int{}, acks: map[string]int{}}
		s.regs[id] = r
	}
	return r
}

// answer sets the rule of registration id; set it before registering.
func (s *keyedSink) answer(id string, rule keyedRule) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reg(id).rule = rule
}

func (s *keyedSink) serve(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		return // the bridge went away mid-request
	}
	body := string(raw)
	s.mu.Lock()
	reg := s.reg(strings.TrimPrefix(r.URL.Path, "/r/"))
	if reg.posted[body] == 0 {
		if key, n, ok := splitKeyed(body); ok && n > 0 && reg.acks[keyedBody(key, n-1)] == 0 {
			reg.overtakes = append(reg.overtakes, fmt.Sprintf("%s came before %s was answered 2xx", body, keyedBody(key, n-1)))
		}
	}
	reg.posted[body]++
	reg.inFlight++
	reg.peak = max(reg.peak, reg.inFlight)
	i := len(reg.posts)
	reg.posts = append(reg.posts, keyedPost{body: body, at: time.Now()})
	delay := s.minDelay + time.Duration(s.rng.Int64N(int64(s.maxDelay-s.minDelay)+1))
	rule := reg.rule
	s.mu.Unlock()

	status, retryAfter := http.StatusNoContent, ""
	if rule != nil {
		status, retryAfter = rule(body)
	}
	select {
	case <-time.After(delay):
	case <-r.Context().Done():
	}
	// Counted out before the answer is written, so the bridge cannot
	// have read it and sent the next POST while this one still counts.
	s.mu.Lock()
	reg.inFlight--
	if r.Context().Err() == nil {
		reg.posts[i].answered, reg.posts[i].status = time.Now(), status
		if status/100 == 2 {
			reg.acks[body]++
		}
	}
	s.mu.Unlock()
	if retryAfter != "" {
		w.Header().Set("Retry-After", retryAfter)
	}
	w.WriteHeader(status)
}

// seen is a copy of what the sink saw of registration id.
func (s *keyedSink) seen(id string) keyedReg {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.reg(id)
	c := *r
	c.posts = append([]keyedPost(nil), r.posts...)
	c.overtakes = append([]string(nil), r.overtakes...)
	c.posted, c.acks = make(map[string]int, len(r.posted)), make(map[string]int, len(r.acks))
	for b, n := range r.posted {
		c.posted[b] = n
	}
	for b, n := range r.acks {
		c.acks[b] = n
	}
	return c
}

// acked counts the distinct messages of registration id answered 2xx,
// those whose body satisfies keep when keep is not nil.
func (s *keyedSink) acked(id string, keep func(body string) bool) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for b := range s.reg(id).acks {
		if keep == nil || keep(b) {
			n++
		}
	}
	return n
}

// waitAcked waits until n distinct messages of registration id were
// answered 2xx.
func (s *keyedSink) waitAcked(t *testing.T, id string, n int, within time.Duration) {
	t.Helper()
	waitFor(t, within, fmt.Sprintf("%d messages of %s acknowledged (%d so far)", n, id, s.acked(id, nil)),
		func() bool { return s.acked(id, nil) >= n })
}

// check compares what registration id's receiver acknowledged with the
// plan: every message at least once, nothing else, and no first POST of
// a message before the one ahead of it with its key was answered 2xx
// (which also keeps first arrivals in order per key). It returns the
// repeats: acknowledgements beyond each message's first.
func (s *keyedSink) check(t *testing.T, id string, plan []keyedMsg) int {
	t.Helper()
	r := s.seen(id)
	want := make(map[string]bool, len(plan))
	missing := 0
	for _, m := range plan {
		want[m.body] = true
		if r.acks[m.body] == 0 {
			if missing++; missing <= 5 {
				t.Errorf("%s: %s never acknowledged (%d POSTs of it)", id, m.body, r.posted[m.body])
			}
		}
	}
	if missing > 0 {
		t.Errorf("%s: %d of %d messages never acknowledged", id, missing, len(plan))
	}
	acks := 0
	for b, n := range r.acks {
		acks += n
		if !want[b] {
			t.Errorf("%s: acknowledged %q, which it was not to get", id, b)
		}
	}
	for i, o := range r.overtakes {
		if i == 5 {
			t.Errorf("%s: %d messages overtook the one ahead of them with their key", id, len(r.overtakes))
			break
		}
		t.Errorf("%s: out of order per key: %s", id, o)
	}
	return acks - (len(plan) - missing)
}

// ackedAround counts registration id's acknowledgements answered in the
// window before at, and its POSTs that came before at and were not
// answered before it: what a kill at that moment can repeat.
func (s *keyedSink) ackedAround(id string, at time.Time, window time.Duration) (acked, open int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.reg(id).posts {
		switch {
		case p.at.After(at):
		case p.answered.IsZero() || p.answered.After(at):
			open++
		case p.status/100 == 2 && p.answered.After(at.Add(-window)):
			acked++
		}
	}
	return acked, open
}

// repeatBound is what CONTRACT §12 lets a crash or a takeover repeat of
// a registration answered by a keyedSink: what was in flight at the
// kill, and what the bridge acknowledged within the flush interval
// before it. The sink answers no POST sooner than minDelay after it
// came, so in any interval it answers at most maxInFlight ×
// (interval/minDelay + 1); the bridge may also read, within the
// interval, answers written just before it began, at most one per POST
// in flight. Each term counts at most maxInFlight POSTs at once.
func repeatBound(maxInFlight int, flush, minDelay time.Duration) int {
	return 2*maxInFlight + maxInFlight*(int(flush/minDelay)+1)
}

// repeatedAge is, of registration id's messages acknowledged before at
// and POSTed again after it, how many there are and how long before at
// the oldest of them was first acknowledged: how far back a kill at that
// moment reached.
func (s *keyedSink) repeatedAge(id string, at time.Time) (n int, oldest time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	firstAck := map[string]time.Time{}
	for _, p := range s.reg(id).posts {
		if p.status/100 == 2 && p.answered.Before(at) {
			if _, ok := firstAck[p.body]; !ok {
				firstAck[p.body] = p.answered
			}
		}
	}
	again := map[string]bool{}
	for _, p := range s.reg(id).posts {
		if a, ok := firstAck[p.body]; ok && p.at.After(at) && !again[p.body] {
			again[p.body] = true
			n++
			oldest = max(oldest, at.Sub(a))
		}
	}
	return n, oldest
}

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// The receivers here misbehave in every way a webhook endpoint can. Each is
// registered beside a healthy receiver on the same subject; each must end
// in the outcome CONTRACT §5 promises, and the healthy one must keep
// receiving while it does.

// hostileMaxAttempts is low so that every retrying receiver reaches its
// final state within seconds: retried 1 s after the first failure, 1–2 s
// after the second, parked by the third.
const hostileMaxAttempts = 3

// hostileTimeout is the bridge's --request-timeout in these tests.
const hostileTimeout = time.Second

// regSnapshot is a registration as GET /v1/registrations/{id} shows it,
// reduced to the fields the delivery promises speak of.
type regSnapshot struct {
	ID            string     `json:"id"`
	State         string     `json:"state"`
	NextSeq       uint64     `json:"nextSeq"`
	Attempts      int        `json:"attempts"`
	NextAttemptAt *time.Time `json:"nextAttemptAt"`
	LastError     string     `json:"lastError"`
	Delivered     uint64     `json:"delivered"`
	// With ordering keys (CONTRACT §12): the ordering as echoed, the
	// POSTs in flight and the messages acknowledged past nextSeq.
	Ordering struct {
		Key         string `json:"key"`
		MaxInFlight int    `json:"maxInFlight"`
	} `json:"ordering"`
	InFlight int `json:"inFlight"`
	Ahead    int `json:"ahead"`
}

// adminError is the error answer of the admin API.
type adminError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// callAdmin sends one admin API request with the daemon's token. Unlike
// daemon.api it reports failures on the caller's t and sends the body
// bytes as they are, so a test can send what no encoder would produce.
func callAdmin(t *testing.T, d *daemon, method, path string, body []byte) (int, []byte) {
	t.Helper()
	code, data, err := tryAdmin(d, method, path, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return code, data
}

// tryAdmin is callAdmin for goroutines that may not fail a test, such as
// a receiver's handler.
func tryAdmin(d *daemon, method, path string, body []byte) (int, []byte, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://"+d.admin+path, r)
	if err != nil {
		return 0, nil, err
	}
	tok, err := os.ReadFile(d.dataDir + "/admin-token")
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp.StatusCode, data, err
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// enrol creates a registration and requires a 201.
func enrol(t *testing.T, d *daemon, reg map[string]any) {
	t.Helper()
	code, body := callAdmin(t, d, "POST", "/v1/registrations", mustJSON(t, reg))
	if code != http.StatusCreated {
		t.Fatalf("registering %v: %d %s", reg, code, body)
	}
	// Gone with the test's receivers, so nothing retries against a closed
	// port afterwards. Cleanups run last-in first-out: this one before the
	// receivers registered earlier are closed.
	t.Cleanup(func() { _, _, _ = tryAdmin(d, "DELETE", "/v1/registrations/"+fmt.Sprint(reg["id"]), nil) })
}

func trySnapshot(d *daemon, id string) (regSnapshot, error) {
	var s regSnapshot
	code, body, err := tryAdmin(d, "GET", "/v1/registrations/"+id, nil)
	if err != nil {
		return s, err
	}
	if code != http.StatusOK {
		return s, fmt.Errorf("GET registration %s: %d %s", id, code, body)
	}
	return s, json.Unmarshal(body, &s)
}

func snapshotOf(t *testing.T, d *daemon, id string) regSnapshot {
	t.Helper()
	s, err := trySnapshot(d, id)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// waitSnapshot polls a registration until ok holds and returns the
// snapshot that satisfied it.
func waitSnapshot(t *testing.T, d *daemon, id, what string, ok func(regSnapshot) bool) regSnapshot {
	t.Helper()
	var last regSnapshot
	waitFor(t, 30*time.Second, id+": "+what, func() bool {
		last = snapshotOf(t, d, id)
		return ok(last)
	})
	return last
}

func isParked(s regSnapshot) bool { return s.State == "parked" }

// bridgeAlive fails t unless the bridge process is still running and answers
// /healthz and /readyz with 200.
func bridgeAlive(t *testing.T, d *daemon) {
	t.Helper()
	// Signal 0 delivers nothing; it fails once the process is gone.
	if err := d.cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("the bridge is not running: %v\n%s", err, d.logs.String())
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get("http://" + d.admin + p)
		if err != nil {
			t.Fatalf("GET %s: %v", p, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d", p, resp.StatusCode)
		}
	}
}

// noLeaks fails t when goroutines started during it outlive it: every
// receiver, connection and client a test opens must be closed by its end.
// Call it first, so its check runs after every other cleanup.
func noLeaks(t *testing.T) {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() {
		http.DefaultClient.CloseIdleConnections()
		goleak.VerifyNone(t, ignore)
	})
}

// hostileBench is one bridge serving every hostile receiver at once.
type hostileBench struct {
	d   *daemon
	pub *publisher
}

// hostilePair is a subject with one healthy receiver and one or more
// hostile ones.
type hostilePair struct {
	b       *hostileBench
	name    string
	subject string
	bad     string // id of the hostile registration
	good    string // id of the healthy registration

	// busy counts the hostile receivers' open requests, so the healthy
	// receiver can tell whether it was served while one was in progress.
	busy atomic.Int32

	// pubMu makes each publish and its place in sent one step, so sent
	// is in stream order even when a handler publishes too.
	pubMu sync.Mutex

	mu       sync.Mutex
	sent     []string // bodies published on subject, in order
	received []string // bodies the healthy receiver acknowledged
	during   []string // of those, the ones received while busy > 0
	attempts []hostileAttempt
}

// hostileAttempt is one request a hostile receiver got, with the
// registration as the admin API showed it when the request arrived: the
// state the bridge left after the previous attempt.
type hostileAttempt struct {
	arrival time.Time
	before  regSnapshot
	err     error
}

// newPair registers the healthy receiver "ok-<name>" on
// journal.hostile.<name>; the hostile one, "bad-<name>", is registered by
// hostile or enrolBad.
func (b *hostileBench) newPair(t *testing.T, name string) *hostilePair {
	t.Helper()
	p := &hostilePair{b: b, name: name, subject: "journal.hostile." + name, bad: "bad-" + name, good: "ok-" + name}
	healthy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		p.mu.Lock()
		p.received = append(p.received, string(body))
		if p.busy.Load() > 0 {
			p.during = append(p.during, string(body))
		}
		p.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(healthy.Close)
	enrol(t, b.d, map[string]any{"id": p.good, "namespace": "outbox", "subject": p.subject, "url": healthy.URL + "/ok"})
	return p
}

// server starts a hostile receiver, over TLS with httptest's self-signed
// certificate when tls is set.
func (p *hostilePair) server(t *testing.T, h http.Handler, tls bool) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(p.counted(h))
	// A hostile receiver's connections end in errors by design; they are
	// not the test's news.
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	if tls {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv
}

// hostile starts a plain-HTTP hostile receiver and registers p.bad to it.
func (p *hostilePair) hostile(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := p.server(t, h, false)
	p.enrolBad(t, p.bad, srv.URL+"/bad")
	return srv
}

// enrolBad registers one more hostile registration on the pair's subject;
// extra adds fields to the body, in key, value pairs.
func (p *hostilePair) enrolBad(t *testing.T, id, url string, extra ...any) {
	t.Helper()
	reg := map[string]any{"id": id, "namespace": "outbox", "subject": p.subject, "url": url}
	for i := 0; i+1 < len(extra); i += 2 {
		reg[extra[i].(string)] = extra[i+1]
	}
	enrol(t, p.b.d, reg)
}

// counted keeps busy up to date around every hostile request.
func (p *hostilePair) counted(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.busy.Add(1)
		defer p.busy.Add(-1)
		h.ServeHTTP(w, r)
	})
}

// observe records an arriving hostile request and the registration as it
// stands, and returns the attempt's number, from 1.
func (p *hostilePair) observe(id string) int {
	a := hostileAttempt{arrival: time.Now()}
	a.before, a.err = trySnapshot(p.b.d, id)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.attempts = append(p.attempts, a)
	return len(p.attempts)
}

func (p *hostilePair) seen() []hostileAttempt {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.attempts)
}

// publish sends one message on the pair's subject and returns when the
// stream stored it.
func (p *hostilePair) publish(t *testing.T, body string) {
	t.Helper()
	p.pubMu.Lock()
	defer p.pubMu.Unlock()
	p.b.pub.publish(t, p.subject, body)
	p.mu.Lock()
	p.sent = append(p.sent, body)
	p.mu.Unlock()
}

// publishFromHandler is publish for a receiver's handler, which may not
// fail the test: a failed publish is left out of sent. (A publish that
// timed out yet was stored would then show as an unexpected delivery.)
func (p *hostilePair) publishFromHandler(body string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p.pubMu.Lock()
	defer p.pubMu.Unlock()
	if _, err := p.b.pub.js.Publish(ctx, p.subject, []byte(body)); err == nil {
		p.mu.Lock()
		p.sent = append(p.sent, body)
		p.mu.Unlock()
	}
}

// healthyKeptUp publishes a few more messages and requires the healthy
// receiver to have acknowledged every message of the subject, each once
// and in order, with a clean registration.
func (p *hostilePair) healthyKeptUp(t *testing.T) {
	t.Helper()
	for i := range 3 {
		p.publish(t, fmt.Sprintf("%s-probe-%d", p.name, i))
	}
	p.mu.Lock()
	want := slices.Clone(p.sent)
	p.mu.Unlock()
	waitFor(t, 30*time.Second, p.good+" to receive every message", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(firstArrivals(p.received)) >= len(want)
	})
	p.mu.Lock()
	got := firstArrivals(p.received)
	p.mu.Unlock()
	if !slices.Equal(got[:len(want)], want) {
		t.Fatalf("%s received %q, want %q", p.good, got, want)
	}
	s := snapshotOf(t, p.b.d, p.good)
	if s.State != "active" || s.Attempts != 0 || s.LastError != "" {
		t.Fatalf("the healthy registration beside %s is %+v, want active with no failure", p.bad, s)
	}
}

// overlapped requires that some message published while a hostile request
// was open reached the healthy receiver before that request ended: the
// bridge serves one registration while another's receiver holds it.
func (p *hostilePair) overlapped(t *testing.T, prefix string) {
	t.Helper()
	waitFor(t, 30*time.Second, "a delivery to "+p.good+" while "+p.bad+" held a request open", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return slices.ContainsFunc(p.during, func(b string) bool { return strings.HasPrefix(b, prefix) })
	})
}

// TestHostileReceivers runs every hostile receiver against one bridge at
// once, with --request-timeout 1s and --max-attempts 3.
func TestHostileReceivers(t *testing.T) {
	noLeaks(t)
	d := newDaemon(t, "--request-timeout", hostileTimeout.String(), "--max-attempts", strconv.Itoa(hostileMaxAttempts))
	d.start()
	b := &hostileBench{d: d, pub: newPublisher(t, "nats://"+d.natsAddr)}

	scenarios := []struct {
		name string
		run  func(*testing.T)
	}{
		{"redirect", b.redirect},
		{"4xx", b.clientErrors},
		{"410", b.gone},
		{"429", b.tooManyRequests},
		{"5xx", b.serverErrors},
		{"hang", b.hang},
		{"trickle", b.trickle},
		{"1GiB", b.hugeBody},
		{"reset", b.reset},
		{"garbage", b.garbage},
		{"self-signed-tls", b.selfSignedTLS},
	}
	// All at once, from goroutines rather than t.Parallel, which -parallel
	// (GOMAXPROCS by default) would ration: the point is that they share
	// one bridge at the same time.
	var wg sync.WaitGroup
	for _, sc := range scenarios {
		wg.Go(func() { t.Run(sc.name, sc.run) })
	}
	wg.Wait()

	bridgeAlive(t, d)
	if code := d.stop(); code != 0 {
		t.Fatalf("exit code %d after the hostile receivers, want 0", code)
	}
}

// parkedAfterRetries waits for the registration to park on its last
// permitted attempt and checks that its lastError contains every fragment.
func parkedAfterRetries(t *testing.T, d *daemon, id string, fragments ...string) regSnapshot {
	t.Helper()
	s := waitSnapshot(t, d, id, "parked after its retries", isParked)
	if s.Attempts != hostileMaxAttempts {
		t.Errorf("%s parked with attempts %d, want %d (the --max-attempts-th consecutive failure parks)", id, s.Attempts, hostileMaxAttempts)
	}
	for _, f := range fragments {
		if !strings.Contains(s.LastError, f) {
			t.Errorf("%s lastError %q does not contain %q", id, s.LastError, f)
		}
	}
	return s
}

// A redirect is an answer like any other: never followed, so a receiver
// cannot point the bridge at an internal address; the registration
// retries and parks.
func (b *hostileBench) redirect(t *testing.T) {
	var internalHits atomic.Int32
	// The internal target fails too, so a followed redirect would still
	// park the registration and the count below, not a timeout, says so.
	internal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		internalHits.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(internal.Close)
	codes := []int{http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect}
	p := b.newPair(t, "redirect")
	p.hostile(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := p.observe(p.bad)
		w.Header().Set("Location", internal.URL+"/admin/delete-everything")
		w.WriteHeader(codes[min(n, len(codes))-1])
	}))
	p.publish(t, "redirect-0")
	parkedAfterRetries(t, b.d, p.bad, "308", "redirects are not followed")
	if n := internalHits.Load(); n != 0 {
		t.Errorf("the internal redirect target got %d requests, want none", n)
	}
	p.checkCounting(t)
	p.healthyKeptUp(t)
}

// Any 4xx but 410 is retried, and its body excerpt reaches lastError —
// without the credentials a receiver echoes back to get them shown by the
// admin API.
func (b *hostileBench) clientErrors(t *testing.T) {
	const credentials = "credential-the-admin-api-must-never-show"
	codes := []int{http.StatusBadRequest, http.StatusNotFound, http.StatusUnprocessableEntity}
	p := b.newPair(t, "4xx")
	srv := p.hostile(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/echo" {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, "you sent %s and %s", r.Header.Get("Authorization"), r.Header.Get("Webhook-Signature"))
			return
		}
		n := p.observe(p.bad)
		w.WriteHeader(codes[min(n, len(codes))-1])
		fmt.Fprintf(w, "refused by the receiver, attempt %d", n)
	}))
	p.enrolBad(t, "bad-4xx-echo", srv.URL+"/echo",
		"secret", secret, "authentication", map[string]string{"scheme": "Bearer", "credentials": credentials})
	p.publish(t, "4xx-0")
	parkedAfterRetries(t, b.d, p.bad, "receiver answered 422", "attempt 3")
	p.checkCounting(t)
	echo := parkedAfterRetries(t, b.d, "bad-4xx-echo", "receiver answered 401", "[redacted]")
	if strings.Contains(echo.LastError, credentials) {
		t.Errorf("lastError shows the credentials a receiver echoed: %q", echo.LastError)
	}
	p.healthyKeptUp(t)
}

// checkCounting checks what each retry saw of the previous failure:
// attempts counted up by one, and the retry came no earlier than the
// nextAttemptAt the failure set.
func (p *hostilePair) checkCounting(t *testing.T) {
	t.Helper()
	seen := p.seen()
	if len(seen) != hostileMaxAttempts {
		t.Fatalf("%s got %d requests, want %d", p.bad, len(seen), hostileMaxAttempts)
	}
	for i, a := range seen {
		if a.err != nil {
			t.Fatalf("reading %s at attempt %d: %v", p.bad, i+1, a.err)
		}
		if a.before.Attempts != i || a.before.State != "active" {
			t.Errorf("at attempt %d %s showed %+v, want active with attempts %d", i+1, p.bad, a.before, i)
		}
		if i == 0 {
			continue
		}
		if a.before.NextAttemptAt == nil {
			t.Fatalf("at attempt %d %s showed no nextAttemptAt", i+1, p.bad)
		}
		if a.arrival.Before(a.before.NextAttemptAt.Add(-10 * time.Millisecond)) {
			t.Errorf("attempt %d arrived at %v, before its nextAttemptAt %v", i+1, a.arrival, a.before.NextAttemptAt)
		}
	}
}

// 410 parks at once, keeps the cursor, and unpark resumes there with
// nothing dropped while parked.
func (b *hostileBench) gone(t *testing.T) {
	var goneForGood atomic.Bool
	goneForGood.Store(true)
	p := b.newPair(t, "410")
	p.hostile(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.observe(p.bad)
		if goneForGood.Load() {
			http.Error(w, "this hook was deleted", http.StatusGone)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	p.publish(t, "410-0")
	s := waitSnapshot(t, b.d, p.bad, "parked by 410", isParked)
	if s.Attempts != 1 || !strings.Contains(s.LastError, "410") {
		t.Errorf("parked as %+v, want attempts 1 and a lastError naming 410", s)
	}
	p.publish(t, "410-1") // while parked
	// A retry would come 1 s after the failure; give it the time to show.
	time.Sleep(2 * time.Second)
	if n := len(p.seen()); n != 1 {
		t.Fatalf("a 410 receiver got %d requests, want exactly 1", n)
	}
	goneForGood.Store(false)
	if code, body := callAdmin(t, b.d, "POST", "/v1/registrations/"+p.bad+"/unpark", nil); code != http.StatusOK {
		t.Fatalf("unpark: %d %s", code, body)
	}
	s = waitSnapshot(t, b.d, p.bad, "both messages acknowledged after unpark", func(s regSnapshot) bool { return s.Delivered == 2 })
	if s.State != "active" || s.Attempts != 0 {
		t.Errorf("after unpark: %+v", s)
	}
	p.healthyKeptUp(t)
}

// 429 with Retry-After in both forms: nextAttemptAt follows the advice,
// and the retry waits for it. A hostile delay is clamped to an hour.
func (b *hostileBench) tooManyRequests(t *testing.T) {
	const delta = 5 * time.Second
	var (
		mu    sync.Mutex
		dates []time.Time
	)
	before := time.Now()
	p := b.newPair(t, "429")
	srv := p.hostile(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/clamp" {
			w.Header().Set("Retry-After", "99999999999999999999999") // overflows int64 seconds
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		n := p.observe(p.bad)
		if n%2 == 1 {
			w.Header().Set("Retry-After", strconv.Itoa(int(delta/time.Second)))
		} else {
			date := time.Now().Add(6 * time.Second).UTC().Truncate(time.Second)
			mu.Lock()
			dates = append(dates, date)
			mu.Unlock()
			w.Header().Set("Retry-After", date.Format(http.TimeFormat))
		}
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	p.enrolBad(t, "bad-429-clamp", srv.URL+"/clamp")
	p.publish(t, "429-0")
	parkedAfterRetries(t, b.d, p.bad, "429", "Retry-After")
	p.checkCounting(t)
	seen := p.seen()
	// After attempt 1 (delta-seconds), as attempt 2 found it: counted from
	// the failed turn, which began after the registration was created and
	// before the request arrived.
	next := seen[1].before.NextAttemptAt
	if next.Before(before.Add(delta)) || next.After(seen[0].arrival.Add(delta+time.Second)) {
		t.Errorf("after Retry-After: %d, nextAttemptAt %v; want %v after the attempt at %v",
			int(delta/time.Second), next, delta, seen[0].arrival)
	}
	// After attempt 2 (HTTP-date), as attempt 3 found it: the date itself,
	// less the moments between the bridge taking the turn and sending.
	mu.Lock()
	date := dates[0]
	mu.Unlock()
	next = seen[2].before.NextAttemptAt
	if next.Before(date.Add(-2*time.Second)) || next.After(date) {
		t.Errorf("after Retry-After: %s, nextAttemptAt %v; want that date", date.Format(http.TimeFormat), next)
	}

	// A receiver asking for aeons waits an hour, and stays active.
	clamp := waitSnapshot(t, b.d, "bad-429-clamp", "a failure with Retry-After", func(s regSnapshot) bool { return s.Attempts == 1 })
	if clamp.State != "active" || clamp.NextAttemptAt == nil ||
		clamp.NextAttemptAt.Before(before.Add(time.Hour)) || clamp.NextAttemptAt.After(time.Now().Add(time.Hour)) {
		t.Errorf("Retry-After: 99999999999999999999999 gave %+v; want active and retried in an hour", clamp)
	}
	p.healthyKeptUp(t)
}

// 5xx is retried with backoff, attempts counting up; the ceiling parks;
// unpark after the receiver recovers delivers everything, in order,
// including what was published while parked.
func (b *hostileBench) serverErrors(t *testing.T) {
	var (
		recovered atomic.Bool
		mu        sync.Mutex
		bodies    []string
	)
	before := time.Now()
	p := b.newPair(t, "5xx")
	p.hostile(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if recovered.Load() {
			body, _ := io.ReadAll(r.Body)
			mu.Lock()
			bodies = append(bodies, string(body))
			mu.Unlock()
			w.WriteHeader(http.StatusOK)
			return
		}
		p.observe(p.bad)
		http.Error(w, "upstream database is down", http.StatusServiceUnavailable)
	}))
	p.publish(t, "5xx-0")
	parkedAfterRetries(t, b.d, p.bad, "receiver answered 503 Service Unavailable", "upstream database is down")
	p.checkCounting(t)
	seen := p.seen()
	// Backoff windows: 1 s after the first failure, 1–2 s after the
	// second, each counted from the turn that failed, which began after
	// the previous nextAttemptAt (or the creation) and before the request
	// arrived.
	first, second := seen[1].before.NextAttemptAt, seen[2].before.NextAttemptAt
	if first.Before(before.Add(time.Second)) || first.After(seen[0].arrival.Add(time.Second)) {
		t.Errorf("nextAttemptAt after the first failure %v; want 1 s after the attempt at %v", first, seen[0].arrival)
	}
	if second.Before(first.Add(time.Second)) || second.After(seen[1].arrival.Add(2*time.Second)) {
		t.Errorf("nextAttemptAt after the second failure %v; want 1–2 s after the attempt at %v", second, seen[1].arrival)
	}

	p.publish(t, "5xx-1") // while parked
	recovered.Store(true)
	if code, body := callAdmin(t, b.d, "POST", "/v1/registrations/"+p.bad+"/unpark", nil); code != http.StatusOK {
		t.Fatalf("unpark: %d %s", code, body)
	}
	waitSnapshot(t, b.d, p.bad, "two deliveries after unpark", func(s regSnapshot) bool { return s.Delivered == 2 })
	mu.Lock()
	got := slices.Clone(bodies)
	mu.Unlock()
	if !slices.Equal(got, []string{"5xx-0", "5xx-1"}) {
		t.Errorf("after unpark the receiver got %q, want the parked message then the one published while parked", got)
	}
	p.healthyKeptUp(t)
}

// A receiver that never answers is given up on at the request timeout and
// retried; while it holds a request, the healthy receiver is served.
func (b *hostileBench) hang(t *testing.T) {
	quit := make(chan struct{})
	var ended atomic.Int32
	p := b.newPair(t, "hang")
	p.hostile(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := p.observe(p.bad)
		// Read the request to its end: only then does the server notice
		// the bridge hanging up and end r.Context().
		_, _ = io.Copy(io.Discard, r.Body)
		p.publishFromHandler(fmt.Sprintf("hang-during-%d", n))
		select {
		case <-r.Context().Done(): // the bridge gave up and closed the connection
			ended.Add(1)
		case <-quit:
		}
	}))
	t.Cleanup(func() { close(quit) }) // before the server's Close, which waits for handlers
	p.publish(t, "hang-0")
	p.overlapped(t, "hang-during-")
	parkedAfterRetries(t, b.d, p.bad, "no answer within "+hostileTimeout.String())
	waitFor(t, 10*time.Second, "every hung request to be closed by the bridge", func() bool { return ended.Load() == hostileMaxAttempts })
	p.checkCounting(t)
	p.healthyKeptUp(t)
}

// A receiver that trickles its status line a byte a second ends at the
// timeout, like a hang. One that answers 200 at once and then trickles the
// body has acknowledged: the delivery counts, and the slow body holds the
// bridge no longer than the timeout.
func (b *hostileBench) trickle(t *testing.T) {
	const answer = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
	quit := make(chan struct{})
	var statusCut, bodyCut atomic.Int32
	// oneByte waits a second and writes b; false once the peer is gone,
	// which each handler learns by reading its side of the connection to
	// the end, so it never counts as busy a request the bridge gave up.
	oneByte := func(w io.Writer, gone <-chan struct{}, b []byte) bool {
		select {
		case <-quit:
			return false
		case <-gone:
			return false
		case <-time.After(time.Second):
		}
		_, err := w.Write(b)
		return err == nil
	}
	p := b.newPair(t, "trickle")
	srv := p.hostile(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/body" {
			_, _ = io.Copy(io.Discard, r.Body) // so r.Context() ends when the bridge hangs up
			w.Header().Set("Content-Length", "60")
			w.WriteHeader(http.StatusOK)
			rc := http.NewResponseController(w)
			_ = rc.Flush()
			for range 60 {
				if !oneByte(w, r.Context().Done(), []byte("x")) || rc.Flush() != nil {
					bodyCut.Add(1)
					return
				}
			}
			return
		}
		n := p.observe(p.bad)
		p.publishFromHandler(fmt.Sprintf("trickle-during-%d", n))
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		gone := make(chan struct{})
		go func() {
			_, _ = io.Copy(io.Discard, buf) // the request, then EOF when the bridge hangs up
			close(gone)
		}()
		for i := range len(answer) {
			if !oneByte(conn, gone, []byte{answer[i]}) {
				statusCut.Add(1)
				return
			}
		}
	}))
	t.Cleanup(func() { close(quit) }) // before the server's Close, which waits for handlers
	p.enrolBad(t, "bad-trickle-body", srv.URL+"/body")
	p.publish(t, "trickle-0")
	p.overlapped(t, "trickle-during-")
	parkedAfterRetries(t, b.d, p.bad, "no answer within "+hostileTimeout.String())
	waitFor(t, 20*time.Second, "the bridge to hang up on every trickled status line", func() bool { return statusCut.Load() == hostileMaxAttempts })
	p.checkCounting(t)

	s := waitSnapshot(t, b.d, "bad-trickle-body", "the 200 with a trickled body to count as delivered", func(s regSnapshot) bool { return s.Delivered >= 1 })
	if s.State != "active" || s.Attempts != 0 {
		t.Errorf("a 200 with a slow body: %+v, want active with no failure", s)
	}
	waitFor(t, 20*time.Second, "the bridge to hang up on the trickled body", func() bool { return bodyCut.Load() >= 1 })
	p.healthyKeptUp(t)
}

// vmKiB reads a field such as VmHWM of /proc/<pid>/status, in KiB.
func vmKiB(t *testing.T, pid int, field string) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc status for the bridge: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("%s: %v", field, err)
			}
			return n
		}
	}
	t.Skipf("/proc/%d/status has no %s", pid, field)
	return 0
}

// A receiver answering with a 1 GiB body: the bridge reads a bounded
// prefix and hangs up, so its memory stays flat; a 2xx still acknowledges,
// and a 5xx's body reaches lastError only as a short excerpt.
func (b *hostileBench) hugeBody(t *testing.T) {
	const size = 1 << 30
	chunk := bytes.Repeat([]byte("x"), 1<<20)
	var (
		mu      sync.Mutex
		written []int64 // per request, the bytes the receiver managed to write
	)
	stream := func(w http.ResponseWriter, status int) {
		w.Header().Set("Content-Length", strconv.Itoa(size))
		w.WriteHeader(status)
		var n int64
		for n < size {
			m, err := w.Write(chunk)
			n += int64(m)
			if err != nil {
				break
			}
		}
		mu.Lock()
		written = append(written, n)
		mu.Unlock()
	}
	p := b.newPair(t, "huge")
	srv := p.hostile(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/error" {
			stream(w, http.StatusInternalServerError)
			return
		}
		stream(w, http.StatusOK)
	}))
	p.enrolBad(t, "bad-huge-error", srv.URL+"/error")
	pid := b.d.cmd.Process.Pid
	hwmBefore, rssBefore := vmKiB(t, pid, "VmHWM"), vmKiB(t, pid, "VmRSS")

	p.publish(t, "huge-0")
	s := waitSnapshot(t, b.d, p.bad, "the 200 with a 1 GiB body to count as delivered", func(s regSnapshot) bool { return s.Delivered == 1 })
	if s.State != "active" || s.Attempts != 0 {
		t.Errorf("a 200 with a 1 GiB body: %+v, want active and acknowledged", s)
	}
	e := parkedAfterRetries(t, b.d, "bad-huge-error", "receiver answered 500")
	if len(e.LastError) > 1024 {
		t.Errorf("lastError of a 1 GiB error answer is %d bytes; want a short excerpt", len(e.LastError))
	}
	waitFor(t, 20*time.Second, "the four 1 GiB answers to end", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(written) == 1+hostileMaxAttempts
	})
	hwmAfter, rssAfter := vmKiB(t, pid, "VmHWM"), vmKiB(t, pid, "VmRSS")
	mu.Lock()
	ws := slices.Clone(written)
	mu.Unlock()
	t.Logf("bridge VmHWM %d → %d KiB, VmRSS %d → %d KiB; bytes written of each 1 GiB answer before the bridge hung up: %v",
		hwmBefore, hwmAfter, rssBefore, rssAfter, ws)
	if grown := hwmAfter - hwmBefore; grown > 100<<10 {
		t.Errorf("the bridge's peak RSS grew by %d KiB answering 1 GiB bodies; want under 100 MiB", grown)
	}
	// The bridge reads a bounded prefix and hangs up; what a receiver gets
	// written beyond that sits in socket buffers, a few MiB at most.
	for _, n := range ws {
		if n > 64<<20 {
			t.Errorf("a receiver wrote %d bytes of its 1 GiB body before the bridge hung up; want a bounded prefix", n)
		}
	}
	p.healthyKeptUp(t)
}

// A receiver that resets the connection without answering is a transport
// failure: retried, then parked.
func (b *hostileBench) reset(t *testing.T) {
	p := b.newPair(t, "reset")
	p.hostile(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.observe(p.bad)
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // close sends RST, not FIN
		}
		conn.Close()
	}))
	p.publish(t, "reset-0")
	parkedAfterRetries(t, b.d, p.bad, "POST failed")
	p.checkCounting(t)
	p.healthyKeptUp(t)
}

// Answers that are not HTTP, a status outside every class, and a 200
// whose headers never end within the bridge's limit: none acknowledges,
// each is retried, and the last parks.
func (b *hostileBench) garbage(t *testing.T) {
	answers := []string{
		"SSH-2.0-OpenSSH_9.6\r\n",
		"HTTP/1.1 999 Nonsense\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nX-Padding: " + strings.Repeat("x", 1<<20) + "\r\nContent-Length: 0\r\n\r\n",
	}
	p := b.newPair(t, "garbage")
	p.hostile(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := p.observe(p.bad)
		_, _ = io.Copy(io.Discard, r.Body)
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = buf.WriteString(answers[min(n, len(answers))-1])
		_ = buf.Flush()
	}))
	p.publish(t, "garbage-0")
	parkedAfterRetries(t, b.d, p.bad, "POST failed", "65536")
	p.checkCounting(t)
	seen := p.seen()
	if e := seen[1].before.LastError; !strings.Contains(e, "POST failed") || !strings.Contains(e, "malformed HTTP") {
		t.Errorf("after an answer that is not HTTP, lastError %q", e)
	}
	if e := seen[2].before.LastError; !strings.Contains(e, "receiver answered 999") {
		t.Errorf("after status 999, lastError %q", e)
	}
	p.healthyKeptUp(t)
}

// A TLS receiver whose certificate no root vouches for is a transport
// failure: no request reaches it, and it is retried, then parked.
func (b *hostileBench) selfSignedTLS(t *testing.T) {
	var hits atomic.Int32
	p := b.newPair(t, "tls")
	srv := p.server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusOK)
	}), true)
	p.enrolBad(t, p.bad, srv.URL+"/hook")
	p.publish(t, "tls-0")
	parkedAfterRetries(t, b.d, p.bad, "POST failed", "certificate")
	if n := hits.Load(); n != 0 {
		t.Errorf("the self-signed receiver got %d requests, want none", n)
	}
	p.healthyKeptUp(t)
}

package webhook

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetstream-bridge/bridge/netguard"
	"github.com/jetstream-bridge/bridge/projection"
)

const (
	testClientID     = "bridge-client"
	testClientSecret = "s3cret-distinctive-4711"
)

// tokenServer is a loopback OAuth 2.0 token endpoint that counts what it
// is asked and issues "tok-<n>" tokens living expiresIn seconds.
type tokenServer struct {
	*httptest.Server
	requests  atomic.Int32
	basic     atomic.Int32 // requests authenticated by HTTP Basic
	form      atomic.Int32 // requests authenticated by form parameters
	issued    atomic.Int32
	expiresIn int
	// refuseBasic answers 401 to HTTP Basic, as some endpoints do.
	refuseBasic bool
	// fail, when it returns a status, answers it with body instead of a token.
	fail  func() (int, string)
	delay time.Duration

	mu   sync.Mutex
	seen []http.Request // form parsed
}

func newTokenServer(t *testing.T, configure func(*tokenServer)) *tokenServer {
	t.Helper()
	ts := &tokenServer{expiresIn: 3600}
	if configure != nil {
		configure(ts)
	}
	ts.Server = httptest.NewServer(http.HandlerFunc(ts.serve))
	t.Cleanup(ts.Close)
	return ts
}

func (ts *tokenServer) serve(w http.ResponseWriter, r *http.Request) {
	ts.requests.Add(1)
	_ = r.ParseForm()
	ts.mu.Lock()
	ts.seen = append(ts.seen, *r)
	ts.mu.Unlock()
	time.Sleep(ts.delay)
	if ts.fail != nil {
		if code, body := ts.fail(); code != 0 {
			w.WriteHeader(code)
			fmt.Fprint(w, body)
			return
		}
	}
	id, secret, basic := r.BasicAuth()
	if basic {
		ts.basic.Add(1)
		if ts.refuseBasic {
			http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
			return
		}
	} else {
		ts.form.Add(1)
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	if id != testClientID || secret != testClientSecret || r.PostForm.Get("grant_type") != "client_credentials" {
		http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"access_token":"tok-%d","token_type":"Bearer","expires_in":%d}`, ts.issued.Add(1), ts.expiresIn)
}

func (ts *tokenServer) last() http.Request {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.seen[len(ts.seen)-1]
}

func grant(ts *tokenServer) OAuth2 {
	return OAuth2{TokenURL: ts.URL + "/token", ClientID: testClientID, ClientSecret: testClientSecret}
}

func oauth2Request(url string, o OAuth2) Request {
	return Request{Namespace: projection.Outbox, URL: url + "/hook", Message: message("JOURNAL-1"), OAuth2: o}
}

func TestOAuth2TokenSentAndReused(t *testing.T) {
	ts := newTokenServer(t, nil)
	srv, hits := receiver(t, status(http.StatusNoContent, ""))
	s := newSender(t)
	o := grant(ts)
	o.Scopes, o.Audience = []string{"events:write", "events:read"}, "https://hooks.example"

	for i := range 5 {
		if out := s.Send(t.Context(), oauth2Request(srv.URL, o)); !out.OK() {
			t.Fatalf("send %d: %s", i, out.Error())
		}
		if got := next(t, hits).header.Get("Authorization"); got != "Bearer tok-1" {
			t.Fatalf("send %d: Authorization %q, want the first token", i, got)
		}
	}
	if n := ts.requests.Load(); n != 1 {
		t.Fatalf("token requests: %d, want 1 for five POSTs", n)
	}
	r := ts.last()
	if ts.basic.Load() != 1 || r.PostForm.Get("client_secret") != "" {
		t.Errorf("client authentication: basic %d, form secret %q; want HTTP Basic only", ts.basic.Load(), r.PostForm.Get("client_secret"))
	}
	if r.PostForm.Get("scope") != "events:write events:read" || r.PostForm.Get("audience") != "https://hooks.example" {
		t.Errorf("form %v: want the scopes and the audience", r.PostForm)
	}
}

func TestOAuth2SameSettingsShareOneToken(t *testing.T) {
	ts := newTokenServer(t, func(ts *tokenServer) { ts.delay = 50 * time.Millisecond })
	srv, _ := receiver(t, status(http.StatusNoContent, ""))
	s := newSender(t)

	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if out := s.Send(t.Context(), oauth2Request(srv.URL, grant(ts))); !out.OK() {
				t.Errorf("send: %s", out.Error())
			}
		})
	}
	wg.Wait()
	if n := ts.requests.Load(); n != 1 {
		t.Fatalf("token requests: %d, want 1 for 20 concurrent POSTs with the same settings", n)
	}
	other := grant(ts)
	other.Scopes = []string{"other"}
	if out := s.Send(t.Context(), oauth2Request(srv.URL, other)); !out.OK() {
		t.Fatal(out.Error())
	}
	if n := ts.requests.Load(); n != 2 {
		t.Fatalf("token requests: %d, want a second one for other scopes", n)
	}
}

func TestOAuth2ReuseDeadline(t *testing.T) {
	got := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		life, margin time.Duration
	}{
		{2 * time.Second, 500 * time.Millisecond},
		{20 * time.Second, 5 * time.Second},
		{40 * time.Second, 10 * time.Second},
		{time.Hour, 10 * time.Second},
	} {
		if until := reuseUntil(got, got.Add(c.life)); until != got.Add(c.life-c.margin) {
			t.Errorf("a %s token is reused until %s after receipt, want %s", c.life, until.Sub(got), c.life-c.margin)
		}
	}
	if until := reuseUntil(got, time.Time{}); !until.IsZero() {
		t.Errorf("a token without expires_in is reused until %s, want until a 401", until)
	}
	if until := reuseUntil(got, got.Add(-time.Second)); !until.Equal(got) {
		t.Errorf("an expired token is reused until %s, want not at all", until)
	}
}

func TestOAuth2ShortTokensRefetched(t *testing.T) {
	ts := newTokenServer(t, func(ts *tokenServer) { ts.expiresIn = 2 })
	srv, hits := receiver(t, status(http.StatusNoContent, ""))
	s := newSender(t)
	send := func() string {
		t.Helper()
		if out := s.Send(t.Context(), oauth2Request(srv.URL, grant(ts))); !out.OK() {
			t.Fatal(out.Error())
		}
		return next(t, hits).header.Get("Authorization")
	}
	// A 2 s token is reused for 1.5 s: oauth2's own 10 s margin would
	// fetch one per POST.
	first, again := send(), send()
	time.Sleep(1600 * time.Millisecond)
	later := send()
	if first != "Bearer tok-1" || again != first || later != "Bearer tok-2" {
		t.Fatalf("tokens sent %q, %q, then after 1.6 s %q; want tok-1, tok-1, tok-2", first, again, later)
	}
}

func TestOAuth2NewTokenAfter401(t *testing.T) {
	ts := newTokenServer(t, nil)
	srv, hits := receiver(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "Bearer tok-1" {
			status(http.StatusUnauthorized, "expired: "+r.Header.Get("Authorization"))(w, r)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	s := newSender(t)
	var paced atomic.Int32
	r := oauth2Request(srv.URL, grant(ts))
	r.Pace = func(context.Context) error { paced.Add(1); return nil }
	out := s.Send(t.Context(), r)
	if !out.OK() || !out.Reauthorized || paced.Load() != 1 {
		t.Fatalf("outcome %+v after %d waits for the pace, want a 2xx after a new token and one wait", out, paced.Load())
	}
	if a, b := next(t, hits).header.Get("Authorization"), next(t, hits).header.Get("Authorization"); a != "Bearer tok-1" || b != "Bearer tok-2" {
		t.Fatalf("POSTs carried %q then %q", a, b)
	}
	if n := ts.requests.Load(); n != 2 {
		t.Fatalf("token requests: %d, want 2", n)
	}
	if out := s.Send(t.Context(), r); !out.OK() || out.Reauthorized || ts.requests.Load() != 2 || paced.Load() != 1 {
		t.Fatalf("next send %+v after %d token requests and %d waits, want the new token reused and no wait", out, ts.requests.Load(), paced.Load())
	}
}

func TestOAuth2PaceEndsTheSecondPOST(t *testing.T) {
	ts := newTokenServer(t, nil)
	srv, hits := receiver(t, status(http.StatusUnauthorized, ""))
	r := oauth2Request(srv.URL, grant(ts))
	r.Pace = func(context.Context) error { return context.Canceled }
	out := newSender(t).Send(t.Context(), r)
	if out.Class != ClassTransport || !errors.Is(out.Err, context.Canceled) {
		t.Fatalf("outcome %+v, want the pace's error", out)
	}
	next(t, hits)
	noHit(t, hits, "the pace refused the second POST")
}

func TestOAuth2Second401IsAFailedAttempt(t *testing.T) {
	ts := newTokenServer(t, nil)
	srv, hits := receiver(t, func(w http.ResponseWriter, r *http.Request) {
		status(http.StatusUnauthorized, "no: "+r.Header.Get("Authorization"))(w, r)
	})
	s := newSender(t)
	out := s.Send(t.Context(), oauth2Request(srv.URL, grant(ts)))
	if out.OK() || out.Status != 401 || out.Class != Class4xx || out.Permanent || !out.Reauthorized {
		t.Fatalf("outcome %+v, want a transient 401", out)
	}
	next(t, hits)
	next(t, hits)
	noHit(t, hits, "two 401s end the send")
	if n := ts.requests.Load(); n != 2 {
		t.Fatalf("token requests: %d, want 2", n)
	}
	msg := out.Error()
	if msg != "receiver answered 401 Unauthorized to a new OAuth 2.0 token after a 401: no: Bearer [redacted]" {
		t.Errorf("Error() = %q", msg)
	}
}

func TestOAuth2TokenEndpointFailure(t *testing.T) {
	var down atomic.Bool
	down.Store(true)
	ts := newTokenServer(t, func(ts *tokenServer) {
		ts.fail = func() (int, string) {
			if down.Load() {
				return http.StatusServiceUnavailable, "maintenance until 06:00, client " + testClientSecret
			}
			return 0, ""
		}
	})
	srv, hits := receiver(t, status(http.StatusNoContent, ""))
	s := newSender(t)
	o := grant(ts)
	o.TokenURL += "?tenant=query-distinctive"

	out := s.Send(t.Context(), oauth2Request(srv.URL, o))
	host := strings.TrimPrefix(ts.URL, "http://")
	want := "POST not sent: token endpoint " + host + "/token answered 503 Service Unavailable: maintenance until 06:00, client [redacted]"
	if out.Class != ClassTransport || out.Permanent || out.Status != 0 || out.Error() != want {
		t.Fatalf("outcome %+v\nError() %q\nwant a transient failure %q", out, out.Error(), want)
	}
	noHit(t, hits, "no token, no POST")

	down.Store(false)
	if out := s.Send(t.Context(), oauth2Request(srv.URL, o)); !out.OK() {
		t.Fatalf("after the endpoint came back: %s", out.Error())
	}
	if got := next(t, hits).header.Get("Authorization"); got != "Bearer tok-1" {
		t.Fatalf("Authorization %q", got)
	}

	ts.Close()
	fresh := grant(ts)
	fresh.Scopes = []string{"fresh"}
	out = s.Send(t.Context(), oauth2Request(srv.URL, fresh))
	if out.Class != ClassTransport || !strings.HasPrefix(out.Error(), "POST not sent: token endpoint "+host+"/token: ") ||
		!strings.Contains(out.Error(), "connection refused") {
		t.Fatalf("endpoint gone: %q, want the transport error naming the endpoint", out.Error())
	}
}

func TestOAuth2FallsBackToFormParameters(t *testing.T) {
	ts := newTokenServer(t, func(ts *tokenServer) { ts.refuseBasic = true })
	var calls atomic.Int32
	srv, _ := receiver(t, func(w http.ResponseWriter, _ *http.Request) {
		if calls.Add(1) == 2 {
			w.WriteHeader(http.StatusUnauthorized) // drops the token: a second fetch
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	s := newSender(t)
	for range 2 {
		if out := s.Send(t.Context(), oauth2Request(srv.URL, grant(ts))); !out.OK() {
			t.Fatal(out.Error())
		}
	}
	// Basic, refused; form, accepted; then form straight away.
	if b, f := ts.basic.Load(), ts.form.Load(); b != 1 || f != 2 {
		t.Fatalf("token requests by Basic %d, by form %d; want 1 and 2", b, f)
	}
}

func TestOAuth2TokenEndpointRedirectNotFollowed(t *testing.T) {
	target := newTokenServer(t, nil)
	redirect := httptest.NewServer(http.RedirectHandler(target.URL+"/token", http.StatusTemporaryRedirect))
	t.Cleanup(redirect.Close)
	srv, hits := receiver(t, status(http.StatusNoContent, ""))
	s := newSender(t)
	o := grant(target)
	o.TokenURL = redirect.URL + "/token"
	out := s.Send(t.Context(), oauth2Request(srv.URL, o))
	if !strings.Contains(out.Error(), "answered 307 Temporary Redirect") || target.requests.Load() != 0 {
		t.Fatalf("outcome %q, redirect target asked %d times; want the 307 as the failure", out.Error(), target.requests.Load())
	}
	noHit(t, hits, "no token")
}

func TestOAuth2TokenURLGuarded(t *testing.T) {
	ts := newTokenServer(t, nil)
	srv, hits := receiver(t, status(http.StatusNoContent, ""))
	a2a := func(s *Sender, tokenURL string) Outcome {
		o := grant(ts)
		o.TokenURL = tokenURL
		r := oauth2Request(srv.URL, o)
		r.Namespace = projection.A2A
		return s.Send(t.Context(), r)
	}
	strict := newSender(t)
	if out := a2a(strict, ts.URL+"/token"); out.Class != ClassRefused || !out.Permanent ||
		!strings.Contains(out.Error(), "oauth2 tokenUrl must use https") {
		t.Fatalf("a2a token URL over http: %+v (%s)", out, out.Error())
	}
	if out := a2a(strict, "https://127.0.0.1:1/token"); out.Class != ClassRefused || !strings.Contains(out.Error(), "oauth2 tokenUrl host is a private address") {
		t.Fatalf("a2a token URL on loopback: %s", out.Error())
	}
	// A name passes the static rules; the dial guard judges what it
	// resolves to, as it does for a POST.
	rebound := newSender(t, WithPolicy(netguard.NewPolicy(netguard.WithResolver(privateDNS{}))))
	if out := a2a(rebound, "https://hooks.test/token"); out.Class != ClassTransport || out.Permanent ||
		!strings.Contains(out.Error(), "POST not sent: token endpoint hooks.test/token: ") ||
		!strings.Contains(out.Error(), "private address 10.0.0.7") {
		t.Fatalf("a2a token URL resolving to a private address: %+v (%s)", out, out.Error())
	}
	noHit(t, hits, "no token")
	if ts.requests.Load() != 0 {
		t.Fatalf("the token endpoint was asked %d times", ts.requests.Load())
	}
}

func TestOAuth2WithAuthenticationRefused(t *testing.T) {
	ts := newTokenServer(t, nil)
	srv, hits := receiver(t, status(http.StatusNoContent, ""))
	r := oauth2Request(srv.URL, grant(ts))
	r.AuthScheme, r.AuthCredentials = "Basic", "x"
	if out := newSender(t).Send(t.Context(), r); out.Class != ClassRefused || !out.Permanent {
		t.Fatalf("oauth2 with authentication: %+v", out)
	}
	noHit(t, hits, "refused")
}

func TestOAuth2IdleSettingsEvicted(t *testing.T) {
	ts := newTokenServer(t, nil)
	s := newSender(t)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s.tokens.now = func() time.Time { return now }
	o := grant(ts)
	for i := range 3 {
		o.Scopes = []string{fmt.Sprint("scope-", i)}
		if _, err := s.tokens.source(projection.Outbox, &o); err != nil {
			t.Fatal(err)
		}
	}
	kept := o
	now = now.Add(tokenIdle - time.Minute)
	if _, err := s.tokens.source(projection.Outbox, &kept); err != nil {
		t.Fatal(err)
	}
	// Sweeps run every half tokenIdle: the first sweep past the idle
	// ones' tokenIdle drops them.
	now = now.Add(tokenIdle/2 + time.Minute)
	o.Scopes = []string{"new"}
	if _, err := s.tokens.source(projection.Outbox, &o); err != nil {
		t.Fatal(err)
	}
	s.tokens.mu.Lock()
	n := len(s.tokens.sources)
	s.tokens.mu.Unlock()
	if n != 2 {
		t.Fatalf("%d grants cached, want 2: the one used since and the new one", n)
	}
}

func TestOAuth2WaiterLeavesWithItsContext(t *testing.T) {
	release := make(chan struct{})
	ts := newTokenServer(t, func(ts *tokenServer) {
		ts.fail = func() (int, string) { <-release; return 0, "" }
	})
	srv, _ := receiver(t, status(http.StatusNoContent, ""))
	s := newSender(t)
	first := make(chan Outcome, 1)
	go func() { first <- s.Send(context.Background(), oauth2Request(srv.URL, grant(ts))) }()
	waitUntil(t, func() bool { return ts.requests.Load() == 1 })
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if out := s.Send(ctx, oauth2Request(srv.URL, grant(ts))); out.OK() || out.Class != ClassTransport {
		t.Fatalf("waiter with an expired context: %+v", out)
	}
	close(release)
	if out := <-first; !out.OK() {
		t.Fatalf("the fetching send: %s", out.Error())
	}
}

// privateDNS resolves every name to a private address.
type privateDNS struct{}

func (privateDNS) LookupIPAddr(context.Context, string) ([]net.IPAddr, error) {
	return []net.IPAddr{{IP: net.ParseIP("10.0.0.7")}}, nil
}

func waitUntil(t *testing.T, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if ok() {
			return
		}
	}
	t.Fatal("timed out")
}

func TestOAuth2SecretsRedactedFromAnswers(t *testing.T) {
	ts := newTokenServer(t, nil)
	srv, _ := receiver(t, func(w http.ResponseWriter, r *http.Request) {
		status(http.StatusInternalServerError, "got "+r.Header.Get("Authorization")+" for "+testClientSecret)(w, r)
	})
	out := newSender(t, WithResponseBody(1024)).Send(t.Context(), oauth2Request(srv.URL, grant(ts)))
	if want := "got Bearer [redacted] for [redacted]"; out.Excerpt != want || string(out.Response) != want {
		t.Fatalf("excerpt %q, response %q; want %q", out.Excerpt, out.Response, want)
	}
}

// BenchmarkSendOAuth2 is BenchmarkSend1KiB with a cached OAuth 2.0 token:
// what a grant adds to each POST once its token is fetched.
func BenchmarkSendOAuth2(b *testing.B) {
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"access_token":"bench-token","token_type":"Bearer","expires_in":3600}`)
	}))
	b.Cleanup(tokens.Close)
	srv := benchServer(b)
	s := NewSender()
	b.Cleanup(s.Close)
	msg := projection.Message{ID: "JOURNAL-1", Header: http.Header{"Content-Type": {"application/json"}}, Body: benchBody()}
	req := Request{Namespace: projection.Outbox, URL: srv.URL + "/hook", Message: msg, Secrets: []string{testSecret(1, 32)}, At: time.Now(),
		OAuth2: OAuth2{TokenURL: tokens.URL + "/token", ClientID: testClientID, ClientSecret: testClientSecret, Scopes: []string{"a", "b"}}}
	b.SetBytes(int64(len(msg.Body)))
	b.ReportAllocs()
	for b.Loop() {
		if o := s.Send(context.Background(), req); !o.OK() {
			b.Fatal(o.Error())
		}
	}
}

// BenchmarkOAuth2CachedToken is the token lookup alone, as every POST of
// a grant makes it once the token is fetched.
func BenchmarkOAuth2CachedToken(b *testing.B) {
	s := NewSender()
	b.Cleanup(s.Close)
	o := OAuth2{TokenURL: "https://auth.example/token", ClientID: testClientID, ClientSecret: testClientSecret, Scopes: []string{"a", "b"}}
	src, err := s.tokens.source(projection.Outbox, &o)
	if err != nil {
		b.Fatal(err)
	}
	src.token = "bench-token"
	b.ReportAllocs()
	for b.Loop() {
		src, err := s.tokens.source(projection.Outbox, &o)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := src.get(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

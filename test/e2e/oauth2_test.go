package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const (
	e2eClientID     = "bridge-e2e"
	e2eClientSecret = "client-secret-e2e-7f3a91"
	e2eTokenPrefix  = "access-e2e-"
)

// authServer is an OAuth 2.0 token endpoint and a receiver that accepts
// only its unexpired tokens, both on loopback.
type authServer struct {
	token, hook *httptest.Server
	lifetime    int // expires_in, seconds
	requests    atomic.Int32
	basic       atomic.Int32
	// down, while set, answers token requests 503 with a body.
	down atomic.Bool
	// refuseFirst makes the receiver answer 401 to the first token.
	refuseFirst bool

	mu       sync.Mutex
	expiries map[string]time.Time
	bodies   []string
	refused  []string    // Authorization values answered 401
	arrivals []time.Time // of every POST
}

func newAuthServer(t *testing.T, lifetime int) *authServer {
	a := &authServer{lifetime: lifetime, expiries: map[string]time.Time{}}
	a.token = httptest.NewServer(http.HandlerFunc(a.serveToken))
	a.hook = httptest.NewServer(http.HandlerFunc(a.serveHook))
	t.Cleanup(a.token.Close)
	t.Cleanup(a.hook.Close)
	return a
}

func (a *authServer) serveToken(w http.ResponseWriter, r *http.Request) {
	a.requests.Add(1)
	if a.down.Load() {
		http.Error(w, "authorization server down for maintenance", http.StatusServiceUnavailable)
		return
	}
	id, secret, ok := r.BasicAuth()
	if ok {
		a.basic.Add(1)
	}
	if !ok || id != e2eClientID || secret != e2eClientSecret || r.FormValue("grant_type") != "client_credentials" ||
		r.FormValue("scope") != "events:write" {
		http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
		return
	}
	a.mu.Lock()
	tok := fmt.Sprintf("%s%d", e2eTokenPrefix, len(a.expiries)+1)
	a.expiries[tok] = time.Now().Add(time.Duration(a.lifetime) * time.Second)
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"access_token":%q,"token_type":"Bearer","expires_in":%d}`, tok, a.lifetime)
}

func (a *authServer) serveHook(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	auth := r.Header.Get("Authorization")
	tok, _ := strings.CutPrefix(auth, "Bearer ")
	a.mu.Lock()
	defer a.mu.Unlock()
	a.arrivals = append(a.arrivals, time.Now())
	exp, known := a.expiries[tok]
	if !known || time.Now().After(exp) || a.refuseFirst && tok == e2eTokenPrefix+"1" {
		a.refused = append(a.refused, auth)
		http.Error(w, "token refused", http.StatusUnauthorized)
		return
	}
	a.bodies = append(a.bodies, string(body))
	w.WriteHeader(http.StatusNoContent)
}

func (a *authServer) delivered() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.bodies...)
}

func (a *authServer) refusals() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.refused...)
}

// registerOAuth2 registers an outbox registration for journal.<id>.> at a's
// receiver, authorized by a's token endpoint, with the members of more.
func registerOAuth2(t *testing.T, d *daemon, id string, a *authServer, more map[string]any) {
	t.Helper()
	body := map[string]any{"id": id, "namespace": "outbox", "subject": "journal." + id + ".>", "url": a.hook.URL + "/hook",
		"oauth2": map[string]any{"tokenUrl": a.token.URL + "/oauth/token?tenant=e2e", "clientId": e2eClientID,
			"clientSecret": e2eClientSecret, "scopes": []string{"events:write"}}}
	maps.Copy(body, more)
	var got map[string]any
	if code := d.api("POST", "/v1/registrations", body, &got); code != 201 {
		t.Fatalf("create %s: %d %v", id, code, got)
	}
	want := map[string]any{"tokenUrl": a.token.URL + "/oauth/token?tenant=e2e", "clientId": e2eClientID, "scopes": []any{"events:write"}}
	if o, _ := got["oauth2"].(map[string]any); fmt.Sprint(o) != fmt.Sprint(want) {
		t.Fatalf("answer shows oauth2 %v, want %v", got["oauth2"], want)
	}
}

// noSecretShown greps every answer about id and the bridge's logs for the
// client secret and the tokens.
func noSecretShown(t *testing.T, d *daemon, id string) {
	t.Helper()
	var shown []string
	for _, path := range []string{"/v1/registrations/" + id, "/v1/registrations", "/v1/registrations/" + id + "/attempts"} {
		var v any
		if code := d.api("GET", path, nil, &v); code != 200 {
			t.Fatalf("GET %s: %d", path, code)
		}
		b, _ := json.Marshal(v)
		shown = append(shown, string(b))
	}
	shown = append(shown, d.logs.String())
	for _, s := range shown {
		if strings.Contains(s, e2eClientSecret) || strings.Contains(s, e2eTokenPrefix) {
			t.Fatalf("the client secret or a token is shown:\n%s", s)
		}
	}
}

// TestOAuth2TokensReusedAcrossDeliveries spreads 20 deliveries over 5 s
// with 2 s tokens: a token is reused for 1.5 s, so a handful of tokens
// serve them all, and the receiver never sees an expired one.
func TestOAuth2TokensReusedAcrossDeliveries(t *testing.T) {
	d := newDaemon(t)
	d.start()
	a := newAuthServer(t, 2)
	registerOAuth2(t, d, "billing", a, nil)
	pub := newPublisher(t, "nats://"+d.natsAddr)

	const n = 20
	for i := range n {
		pub.publish(t, "journal.billing.1", fmt.Sprintf(`{"n":%d}`, i))
		time.Sleep(250 * time.Millisecond)
	}
	waitFor(t, 20*time.Second, "20 deliveries", func() bool { return len(a.delivered()) >= n })
	if r := a.refusals(); len(r) != 0 {
		t.Fatalf("the receiver refused %d POSTs (%v): the bridge sent an expired or unknown token", len(r), r)
	}
	t.Logf("%d token requests for %d deliveries", a.requests.Load(), n)
	if got := a.requests.Load(); got < 2 || got > 8 {
		t.Fatalf("%d token requests for %d deliveries over 5 s with 2 s tokens, want 2 to 8", got, n)
	}
	if a.basic.Load() != a.requests.Load() {
		t.Errorf("%d of %d token requests used HTTP Basic, want all", a.basic.Load(), a.requests.Load())
	}
	// The row counts a delivery after the receiver has answered.
	waitFor(t, 10*time.Second, "the row to count the deliveries", func() bool {
		got, _ := d.registration("billing")["delivered"].(float64)
		return got >= n
	})
	reg := d.registration("billing")
	if reg["delivered"] != float64(n) || reg["attempts"] != float64(0) {
		t.Fatalf("registration after the deliveries: %v", reg)
	}
	noSecretShown(t, d, "billing")
}

// TestOAuth2NewTokenAfter401 has the receiver refuse the first token: the
// bridge fetches one new token and POSTs again with it, within the same
// attempt and within the rate limit, and the attempt log records the POST
// that was acknowledged.
func TestOAuth2NewTokenAfter401(t *testing.T) {
	d := newDaemon(t)
	d.start()
	a := newAuthServer(t, 3600)
	a.refuseFirst = true
	// The POST after the 401 counts against the rate limit like any:
	// with one POST a second, it waits for its turn.
	registerOAuth2(t, d, "orders", a, map[string]any{"rateLimit": map[string]any{"perSecond": 1, "burst": 1}})
	pub := newPublisher(t, "nats://"+d.natsAddr)

	pub.publish(t, "journal.orders.1", `{"n":1}`)
	waitFor(t, 10*time.Second, "the delivery", func() bool { return len(a.delivered()) == 1 })
	if got := a.requests.Load(); got != 2 {
		t.Fatalf("%d token requests, want 2: the first, and one after the 401", got)
	}
	if r := a.refusals(); len(r) != 1 {
		t.Fatalf("the receiver refused %d POSTs, want 1", len(r))
	}
	a.mu.Lock()
	gap := a.arrivals[1].Sub(a.arrivals[0])
	a.mu.Unlock()
	if gap < 900*time.Millisecond {
		t.Fatalf("the POST after the 401 came %s after it; a limit of one a second wants it to wait", gap)
	}
	pub.publish(t, "journal.orders.1", `{"n":2}`)
	waitFor(t, 10*time.Second, "the second delivery", func() bool { return len(a.delivered()) == 2 })
	if got := a.requests.Load(); got != 2 {
		t.Fatalf("%d token requests after a second delivery, want the new token reused", got)
	}
	// The row counts a delivery after the receiver has answered.
	waitFor(t, 10*time.Second, "the row to count both deliveries", func() bool { return d.registration("orders")["delivered"] == float64(2) })
	reg := d.registration("orders")
	if reg["attempts"] != float64(0) || reg["lastError"] != "" || reg["delivered"] != float64(2) {
		t.Fatalf("registration: %v", reg)
	}
	var page struct {
		Attempts []struct {
			Outcome string `json:"outcome"`
			Status  int    `json:"status"`
		} `json:"attempts"`
	}
	waitFor(t, 5*time.Second, "two attempts in the log", func() bool {
		d.api("GET", "/v1/registrations/orders/attempts", nil, &page)
		return len(page.Attempts) == 2
	})
	for _, at := range page.Attempts {
		if at.Outcome != "2xx" || at.Status != 204 {
			t.Fatalf("attempts %+v, want each recorded as the acknowledged POST", page.Attempts)
		}
	}
	noSecretShown(t, d, "orders")
}

// TestOAuth2TokenEndpointDown keeps the token endpoint answering 503: the
// delivery is retried, never POSTed without a token, with the endpoint's
// status and answer in lastError, and goes through once it is back.
func TestOAuth2TokenEndpointDown(t *testing.T) {
	d := newDaemon(t)
	d.start()
	a := newAuthServer(t, 3600)
	a.down.Store(true)
	registerOAuth2(t, d, "ledger", a, nil)
	pub := newPublisher(t, "nats://"+d.natsAddr)

	pub.publish(t, "journal.ledger.1", `{"n":1}`)
	want := "POST not sent: token endpoint " + strings.TrimPrefix(a.token.URL, "http://") +
		"/oauth/token answered 503 Service Unavailable: authorization server down for maintenance"
	var reg map[string]any
	waitFor(t, 15*time.Second, "two failed attempts", func() bool {
		reg = d.registration("ledger")
		n, _ := reg["attempts"].(float64)
		return n >= 2
	})
	if reg["lastError"] != want || reg["state"] != "active" {
		t.Fatalf("lastError %q in state %v, want %q in active", reg["lastError"], reg["state"], want)
	}
	if r, got := a.refusals(), a.delivered(); len(r)+len(got) != 0 {
		t.Fatalf("the receiver got %d POSTs while the token endpoint was down", len(r)+len(got))
	}
	a.down.Store(false)
	waitFor(t, 15*time.Second, "the delivery once the endpoint is back", func() bool { return len(a.delivered()) == 1 })
	waitFor(t, 5*time.Second, "the registration to recover", func() bool {
		reg = d.registration("ledger")
		return reg["attempts"] == float64(0)
	})
	var page struct {
		Attempts []struct {
			Outcome string `json:"outcome"`
			Error   string `json:"error"`
		} `json:"attempts"`
	}
	// The log is written asynchronously: the 2xx may follow the
	// registration's recovery by a few milliseconds.
	waitFor(t, 5*time.Second, "the 2xx in the attempt log", func() bool {
		d.api("GET", "/v1/registrations/ledger/attempts", nil, &page)
		return len(page.Attempts) >= 3 && page.Attempts[0].Outcome == "2xx"
	})
	if len(page.Attempts) < 3 || page.Attempts[0].Outcome != "2xx" || page.Attempts[len(page.Attempts)-1].Error != want {
		t.Fatalf("attempts %+v, want the failures with the endpoint's answer, then the 2xx", page.Attempts)
	}
	noSecretShown(t, d, "ledger")
}

package webhook

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetstream-bridge/bridge/netguard"
	"github.com/jetstream-bridge/bridge/projection"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// hit is one request a test receiver got.
type hit struct {
	header http.Header
	body   []byte
	proto  int
}

// receiver starts a loopback server whose handler records every request
// and then answers with answer.
func receiver(t *testing.T, answer http.HandlerFunc) (*httptest.Server, <-chan hit) {
	t.Helper()
	hits := make(chan hit, 64)
	srv := httptest.NewServer(recording(hits, answer))
	t.Cleanup(srv.Close)
	return srv, hits
}

func recording(hits chan<- hit, answer http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		hits <- hit{header: r.Header.Clone(), body: body, proto: r.ProtoMajor}
		if answer != nil {
			answer(w, r)
		}
	}
}

func status(code int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(code)
		_, _ = io.WriteString(w, body)
	}
}

func newSender(t *testing.T, opts ...Option) *Sender {
	t.Helper()
	s := NewSender(opts...)
	t.Cleanup(s.Close)
	return s
}

func loopbackPolicy(opts ...netguard.Option) *netguard.Policy {
	return netguard.NewPolicy(append([]netguard.Option{netguard.WithAllowLoopbackHTTP(true)}, opts...)...)
}

func message(id string) projection.Message {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Ce-Id", id)
	return projection.Message{ID: id, Header: h, Body: []byte(`{"order":42,"note":"ünïcode"}`)}
}

func next(t *testing.T, hits <-chan hit) hit {
	t.Helper()
	select {
	case h := <-hits:
		return h
	case <-time.After(10 * time.Second):
		t.Fatal("the receiver got no request")
		return hit{}
	}
}

func noHit(t *testing.T, hits <-chan hit, why string) {
	t.Helper()
	select {
	case h := <-hits:
		t.Fatalf("%s, yet the receiver got a request: %v", why, h.header)
	default:
	}
}

func TestSendRetryResendsIdenticalBytes(t *testing.T) {
	var calls atomic.Int32
	srv, hits := receiver(t, func(w http.ResponseWriter, _ *http.Request) {
		if calls.Add(1) == 1 {
			status(http.StatusInternalServerError, "database is down")(w, nil)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	secret := testSecret(11, 32)
	s := newSender(t, WithVersion("1.2.3"))
	msg := message("JOURNAL-17")
	first, second := time.Now(), time.Now().Add(2*time.Second)

	o1 := s.Send(context.Background(), Request{Namespace: projection.Outbox, URL: srv.URL + "/hook", Message: msg, Secrets: []string{secret}, At: first})
	if o1.OK() || o1.Class != Class5xx || o1.Status != 500 || o1.Permanent || o1.Excerpt != "database is down" {
		t.Fatalf("first send = %+v, want a transient 5xx with the body's excerpt", o1)
	}
	if got := o1.Error(); got != "receiver answered 500 Internal Server Error: database is down" {
		t.Errorf("Error() = %q", got)
	}
	o2 := s.Send(context.Background(), Request{Namespace: projection.Outbox, URL: srv.URL + "/hook", Message: msg, Secrets: []string{secret}, At: second})
	if !o2.OK() || o2.Status != 204 || o2.Err != nil || o2.Duration <= 0 {
		t.Fatalf("retry = %+v, want 204", o2)
	}

	h1, h2 := next(t, hits), next(t, hits)
	if string(h1.body) != string(msg.Body) || string(h2.body) != string(msg.Body) {
		t.Errorf("bodies %q / %q, want the message bytes %q", h1.body, h2.body, msg.Body)
	}
	for i, h := range []hit{h1, h2} {
		at := []time.Time{first, second}[i]
		if h.header.Get(HeaderID) != "JOURNAL-17" || h.header.Get(HeaderTimestamp) != strconv.FormatInt(at.Unix(), 10) {
			t.Errorf("attempt %d: webhook-id %q, webhook-timestamp %q", i+1, h.header.Get(HeaderID), h.header.Get(HeaderTimestamp))
		}
		if h.header.Get("Content-Type") != "application/json" || h.header.Get("Ce-Id") != "JOURNAL-17" {
			t.Errorf("attempt %d lost the message's headers: %v", i+1, h.header)
		}
		if ua := h.header.Get("User-Agent"); ua != "jetstream-bridge/1.2.3" {
			t.Errorf("User-Agent = %q", ua)
		}
		if h.header.Get("Accept-Encoding") != "" {
			t.Errorf("unasked Accept-Encoding %q", h.header.Get("Accept-Encoding"))
		}
		wh, _ := standardwebhooks.NewWebhook(secret)
		if err := wh.Verify(h.body, h.header); err != nil {
			t.Errorf("attempt %d: standard-webhooks does not verify: %v", i+1, err)
		}
	}
}

func TestSendSignsWithBothSecretsDuringRotation(t *testing.T) {
	srv, hits := receiver(t, status(http.StatusOK, "ok"))
	current, previous := testSecret(1, 32), testSecret(100, 24)
	s := newSender(t)
	o := s.Send(context.Background(), Request{Namespace: projection.Outbox, URL: srv.URL, Message: message("m-1"), Secrets: []string{current, previous}, At: time.Now()})
	if !o.OK() {
		t.Fatalf("send = %v", o.Error())
	}
	h := next(t, hits)
	if n := len(strings.Fields(h.header.Get(HeaderSignature))); n != 2 {
		t.Fatalf("webhook-signature has %d signatures, want 2: %q", n, h.header.Get(HeaderSignature))
	}
	for _, secret := range []string{current, previous} {
		wh, _ := standardwebhooks.NewWebhook(secret)
		if err := wh.Verify(h.body, h.header); err != nil {
			t.Errorf("a receiver holding one of the rotating secrets cannot verify: %v", err)
		}
	}
	other, _ := standardwebhooks.NewWebhook(testSecret(200, 32))
	if err := other.Verify(h.body, h.header); err == nil {
		t.Error("a foreign secret verifies")
	}
}

func TestSendWithoutSecretHasNoSignature(t *testing.T) {
	srv, hits := receiver(t, nil)
	o := newSender(t).Send(context.Background(), Request{Namespace: projection.Outbox, URL: srv.URL, Message: message("m")})
	if !o.OK() {
		t.Fatal(o.Error())
	}
	h := next(t, hits)
	if h.header.Get(HeaderSignature) != "" || h.header.Get(HeaderID) != "m" || h.header.Get(HeaderTimestamp) == "" {
		t.Errorf("headers %v: want id and timestamp, no signature", h.header)
	}
}

func TestSendA2AAuthenticationAndToken(t *testing.T) {
	srv, hits := receiver(t, nil)
	s := newSender(t, WithPolicy(loopbackPolicy()))
	msg := message("JOURNAL-3-0")
	msg.Header.Set("Authorization", "Forged by-projection") // the sender's own wins
	o := s.Send(context.Background(), Request{
		Namespace: projection.A2A, URL: srv.URL + "/a2a", Message: msg,
		Token: "task-token-123", AuthScheme: "Bearer", AuthCredentials: "cred-xyz",
	})
	if !o.OK() {
		t.Fatal(o.Error())
	}
	h := next(t, hits)
	for k, want := range map[string]string{
		"Authorization":            "Bearer cred-xyz",
		"A2A-Notification-Token":   "task-token-123",
		"X-A2A-Notification-Token": "task-token-123",
		HeaderID:                   "JOURNAL-3-0",
	} {
		if got := h.header.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
}

func TestSendClassifiesAnswers(t *testing.T) {
	at := time.Now().Truncate(time.Second)
	for _, c := range []struct {
		name       string
		code       int
		retryAfter string
		class      string
		permanent  bool
		wantAfter  time.Duration
	}{
		{"gone parks", 410, "", Class4xx, true, 0},
		{"not found retries", 404, "", Class4xx, false, 0},
		{"server error retries", 500, "", Class5xx, false, 0},
		{"429 delta-seconds", 429, "30", Class4xx, false, 30 * time.Second},
		{"503 http-date", 503, at.Add(2 * time.Minute).UTC().Format(http.TimeFormat), Class5xx, false, 2 * time.Minute},
		{"429 zero is one second", 429, "0", Class4xx, false, time.Second},
		{"past date is one second", 503, at.Add(-time.Hour).UTC().Format(http.TimeFormat), Class5xx, false, time.Second},
		{"unreadable Retry-After ignored", 429, "later", Class4xx, false, 0},
		{"huge Retry-After unclamped", 503, "86400", Class5xx, false, 24 * time.Hour},
		{"accepted", 202, "", Class2xx, false, 0},
		{"odd status", 999, "", Class5xx, false, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv, _ := receiver(t, func(w http.ResponseWriter, _ *http.Request) {
				if c.retryAfter != "" {
					w.Header().Set("Retry-After", c.retryAfter)
				}
				w.WriteHeader(c.code)
			})
			o := newSender(t).Send(context.Background(), Request{Namespace: projection.Outbox, URL: srv.URL, Message: message("m"), At: at})
			if o.Status != c.code || o.Class != c.class || o.Permanent != c.permanent || o.RetryAfter != c.wantAfter || o.Err != nil {
				t.Errorf("outcome %+v, want status %d class %s permanent %t retryAfter %s", o, c.code, c.class, c.permanent, c.wantAfter)
			}
		})
	}
}

func TestSendNeverFollowsRedirects(t *testing.T) {
	internal, internalHits := receiver(t, nil)
	for _, c := range []struct {
		ns     projection.Namespace
		policy *netguard.Policy
	}{{projection.Outbox, netguard.NewPolicy()}, {projection.A2A, loopbackPolicy()}} {
		t.Run(string(c.ns), func(t *testing.T) {
			front, hits := receiver(t, func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, internal.URL+"/admin/delete-everything", http.StatusTemporaryRedirect)
			})
			o := newSender(t, WithPolicy(c.policy)).Send(context.Background(), Request{Namespace: c.ns, URL: front.URL, Message: message("m")})
			if o.Class != Class3xx || o.Status != 307 || o.Permanent {
				t.Fatalf("outcome %+v, want a transient 3xx", o)
			}
			if !strings.HasPrefix(o.Error(), "receiver answered 307 Temporary Redirect; redirects are not followed") {
				t.Errorf("Error() = %q", o.Error())
			}
			next(t, hits)
			noHit(t, internalHits, "the redirect was not to be followed")
		})
	}
}

func TestSendTimesOut(t *testing.T) {
	srv, hits := receiver(t, func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	s := newSender(t, WithTimeout(150*time.Millisecond))
	o := s.Send(context.Background(), Request{Namespace: projection.Outbox, URL: srv.URL, Message: message("m")})
	next(t, hits)
	if o.Class != ClassTransport || o.Status != 0 || o.Permanent || !errors.Is(o.Err, context.DeadlineExceeded) {
		t.Fatalf("outcome %+v, want a transient transport error", o)
	}
	if !strings.Contains(o.Error(), "POST failed: no answer within 150ms") {
		t.Errorf("Error() = %q", o.Error())
	}
}

func TestSendCallerCancelIsNotATimeout(t *testing.T) {
	srv, hits := receiver(t, func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	ctx, cancel := context.WithCancel(context.Background())
	go func() { next(t, hits); cancel() }()
	o := newSender(t).Send(ctx, Request{Namespace: projection.Outbox, URL: srv.URL, Message: message("m")})
	if o.Class != ClassTransport || !errors.Is(o.Err, context.Canceled) {
		t.Fatalf("outcome %+v, want transport with context.Canceled", o)
	}
}

// A receiver streaming 100 MiB cannot make the bridge read it: the read
// stops at the cap and the connection is closed under the writer.
func TestSendCapsHugeBodies(t *testing.T) {
	const huge = 100 << 20
	for _, code := range []int{http.StatusOK, http.StatusBadGateway} {
		t.Run(strconv.Itoa(code), func(t *testing.T) {
			written := make(chan int, 1)
			srv, _ := receiver(t, func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Length", strconv.Itoa(huge))
				w.WriteHeader(code)
				chunk := []byte(strings.Repeat("x", 32<<10))
				n := 0
				for n < huge {
					m, err := w.Write(chunk)
					n += m
					if err != nil {
						break
					}
				}
				written <- n
			})
			o := newSender(t).Send(context.Background(), Request{Namespace: projection.Outbox, URL: srv.URL, Message: message("m")})
			if o.Status != code {
				t.Fatalf("outcome %+v", o)
			}
			if len(o.Excerpt) > DefaultExcerptLen+len("…") {
				t.Errorf("excerpt is %d bytes", len(o.Excerpt))
			}
			if n := <-written; n >= huge {
				t.Errorf("the receiver wrote all %d bytes: the read was not capped", n)
			}
		})
	}
}

func TestSendReusesConnections(t *testing.T) {
	var newConns atomic.Int32
	hits := make(chan hit, 64)
	answers := []http.HandlerFunc{status(http.StatusOK, strings.Repeat("y", DefaultMaxBodyRead)), status(http.StatusServiceUnavailable, "busy"), status(http.StatusNoContent, "")}
	var n atomic.Int32
	srv := httptest.NewUnstartedServer(recording(hits, func(w http.ResponseWriter, r *http.Request) {
		answers[int(n.Add(1))%len(answers)](w, r)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			newConns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)

	s := newSender(t)
	for i := range 30 {
		o := s.Send(context.Background(), Request{Namespace: projection.Outbox, URL: srv.URL, Message: message("m" + strconv.Itoa(i))})
		if o.Status == 0 {
			t.Fatalf("send %d: %v", i, o.Error())
		}
		next(t, hits)
	}
	if got := newConns.Load(); got != 1 {
		t.Errorf("30 sequential sends opened %d connections, want 1", got)
	}
}

func TestSendA2AGuardRefusesAtDial(t *testing.T) {
	srv, hits := receiver(t, nil)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	dns := resolverFunc(func(string) []net.IPAddr { return []net.IPAddr{{IP: net.ParseIP("127.0.0.1")}} })

	// A public-looking name that resolves to loopback at send time.
	guarded := newSender(t, WithPolicy(netguard.NewPolicy(netguard.WithResolver(dns))))
	o := guarded.Send(context.Background(), Request{Namespace: projection.A2A, URL: "https://hook.test:" + port + "/", Message: message("m")})
	if o.Class != ClassRefused || o.Permanent || !strings.Contains(o.Error(), `resolves to a private address 127.0.0.1 (loopback)`) {
		t.Errorf("rebound name: outcome %+v (%s), want a transient refusal", o, o.Error())
	}
	// A literal loopback URL is refused for good before any dial.
	o = guarded.Send(context.Background(), Request{Namespace: projection.A2A, URL: srv.URL, Message: message("m")})
	if o.Class != ClassRefused || !o.Permanent || !strings.Contains(o.Error(), "POST refused: url must use https for a2a registrations") {
		t.Errorf("literal loopback: outcome %+v (%s), want a permanent refusal", o, o.Error())
	}
	noHit(t, hits, "every a2a send was refused")

	// The same receiver is reachable once loopback is allowed, by literal
	// and by name.
	allowed := newSender(t, WithPolicy(loopbackPolicy(netguard.WithResolver(dns))))
	for _, u := range []string{srv.URL, "http://localhost:" + port} {
		if o := allowed.Send(context.Background(), Request{Namespace: projection.A2A, URL: u, Message: message("m")}); !o.OK() {
			t.Errorf("loopback allowed, %s: %s", u, o.Error())
		}
		next(t, hits)
	}
	// Outbox dials anything, whatever the a2a policy says.
	if o := guarded.Send(context.Background(), Request{Namespace: projection.Outbox, URL: srv.URL, Message: message("m")}); !o.OK() {
		t.Errorf("outbox to loopback: %s", o.Error())
	}
	next(t, hits)
}

// The sender remembers the guard's verdict on a URL per namespace: a URL
// outbox accepted is still judged by the a2a rules, and a rebound name the
// dial guard refused is refused again on the next send.
func TestSendRemembersNoVerdictAcrossNamespacesOrDials(t *testing.T) {
	srv, hits := receiver(t, nil)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	dns := resolverFunc(func(string) []net.IPAddr { return []net.IPAddr{{IP: net.ParseIP("127.0.0.1")}} })
	s := newSender(t, WithPolicy(netguard.NewPolicy(netguard.WithResolver(dns))))
	for range 2 {
		if o := s.Send(context.Background(), Request{Namespace: projection.Outbox, URL: srv.URL, Message: message("m")}); !o.OK() {
			t.Fatalf("outbox to loopback: %s", o.Error())
		}
		next(t, hits)
		o := s.Send(context.Background(), Request{Namespace: projection.A2A, URL: srv.URL, Message: message("m")})
		if o.Class != ClassRefused || !o.Permanent || !strings.Contains(o.Error(), "url must use https for a2a registrations") {
			t.Errorf("a2a to the URL outbox just used: outcome %+v (%s), want the a2a URL rules' permanent refusal", o, o.Error())
		}
		o = s.Send(context.Background(), Request{Namespace: projection.A2A, URL: "https://hook.test:" + port + "/", Message: message("m")})
		if o.Class != ClassRefused || !strings.Contains(o.Error(), "resolves to a private address") {
			t.Errorf("a2a to a name resolving to loopback: outcome %+v (%s), want a refusal at dial", o, o.Error())
		}
	}
	noHit(t, hits, "every a2a send was refused")
}

func TestSendGrantsAreRecheckedForEverySend(t *testing.T) {
	srv, hits := receiver(t, nil)
	s := newSender(t, WithPolicy(loopbackPolicy(netguard.WithAllowHosts("hooks.example"))))
	o := s.Send(context.Background(), Request{Namespace: projection.A2A, URL: srv.URL, Message: message("m")})
	if o.Class != ClassRefused || !o.Permanent || !strings.Contains(o.Error(), "is not granted for a2a registrations") {
		t.Errorf("outcome %+v (%s), want a permanent refusal", o, o.Error())
	}
	noHit(t, hits, "the host is not granted")
}

func TestSendTLS(t *testing.T) {
	hits := make(chan hit, 4)
	srv := httptest.NewUnstartedServer(recording(hits, nil))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)

	o := newSender(t).Send(context.Background(), Request{Namespace: projection.Outbox, URL: srv.URL, Message: message("m")})
	if o.Class != ClassTransport || o.Permanent || !strings.Contains(o.Error(), "certificate") {
		t.Errorf("self-signed server: outcome %+v (%s), want a transport error about the certificate", o, o.Error())
	}
	noHit(t, hits, "the TLS handshake failed")

	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	trusting := newSender(t, WithTLSConfig(&tls.Config{RootCAs: roots}), WithPolicy(loopbackPolicy()))
	for _, ns := range []projection.Namespace{projection.Outbox, projection.A2A} {
		if o := trusting.Send(context.Background(), Request{Namespace: ns, URL: srv.URL, Message: message("m")}); !o.OK() {
			t.Fatalf("%s with the server's root trusted: %s", ns, o.Error())
		}
		if h := next(t, hits); h.proto != 2 {
			t.Errorf("%s over TLS used HTTP/%d, want HTTP/2", ns, h.proto)
		}
	}
}

func TestSendConnectionRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	o := newSender(t).Send(context.Background(), Request{Namespace: projection.Outbox, URL: "http://" + addr + "/hook?token=" + "qs-secret-1", Message: message("m")})
	if o.Class != ClassTransport || o.Permanent || !strings.Contains(o.Error(), "POST failed: dial tcp "+addr) || !strings.Contains(o.Error(), "connection refused") {
		t.Errorf("outcome %+v (%s), want a dial error", o, o.Error())
	}
	if strings.Contains(o.Error(), "qs-secret-1") || strings.Contains(o.Err.Error(), "qs-secret-1") {
		t.Errorf("the error repeats the URL's query: %q", o.Error())
	}
}

func TestSendRefusesWhatCanNeverBeSent(t *testing.T) {
	srv, hits := receiver(t, nil)
	const cred = "cred-very-secret"
	for _, c := range []struct {
		name string
		req  Request
		want string
	}{
		{"short secret", Request{Secrets: []string{testSecret(1, 32), "whsec_c2hvcnQ="}}, "signing secret 2: secret decodes to 5 bytes"},
		{"unprefixed secret", Request{Secrets: []string{"c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0"}}, `signing secret 1: secret must start with "whsec_"`},
		{"bad scheme", Request{AuthScheme: "Bea rer", AuthCredentials: cred}, "authentication scheme is not an RFC 9110 token"},
		{"header break", Request{AuthScheme: "Bearer", AuthCredentials: cred + "\r\nX-Evil: 1"}, "authentication credentials are empty or contain control characters"},
		{"credentials alone", Request{AuthCredentials: cred}, "credentials are set without a scheme"},
		{"token break", Request{Token: cred + "\n"}, "notification token contains control characters"},
		{"no id", Request{Message: projection.Message{Body: []byte("x")}}, "message id is empty"},
		{"userinfo", Request{URL: "http://user:" + cred + "@" + srv.Listener.Addr().String()}, "must not contain userinfo"},
		{"scheme", Request{URL: "ftp://" + srv.Listener.Addr().String()}, `scheme "ftp" is not allowed`},
		{"namespace", Request{Namespace: "inbox"}, `namespace "inbox" is neither outbox nor a2a`},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := c.req
			if r.Namespace == "" {
				r.Namespace = projection.Outbox
			}
			if r.URL == "" {
				r.URL = srv.URL
			}
			if r.Message.ID == "" && r.Message.Body == nil {
				r.Message = message("m")
			}
			o := newSender(t).Send(context.Background(), r)
			if o.Class != ClassRefused || !o.Permanent || !strings.Contains(o.Error(), c.want) {
				t.Errorf("outcome %+v (%s), want a permanent refusal saying %q", o, o.Error(), c.want)
			}
			if strings.Contains(o.Error(), cred) || strings.Contains(o.Error(), "c2VjcmV0") {
				t.Errorf("refusal repeats a secret: %q", o.Error())
			}
		})
	}
	noHit(t, hits, "every request was refused")
}

// A receiver that echoes the whole request back in its error page must
// not get any secret of it into lastError.
func TestOutcomeNeverCarriesSecrets(t *testing.T) {
	srv, _ := receiver(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, "no route for POST "+r.URL.RequestURI()+"\n")
		_ = r.Header.Write(w)
	})
	secret := testSecret(77, 32)
	const (
		token     = "tok-5f2a9c"
		cred      = "dXNlcjpwYXNzd29yZA=="
		pathToken = "T0000000B00000000XXXXXXXXXXXXXXXX"
		queryKey  = "qk-881f"
	)
	s := newSender(t, WithPolicy(loopbackPolicy()), WithExcerptLen(4096))
	o := s.Send(context.Background(), Request{
		Namespace: projection.A2A, URL: srv.URL + "/services/" + pathToken + "?key=" + queryKey,
		Message: message("m"), Secrets: []string{secret}, Token: token, AuthScheme: "Basic", AuthCredentials: cred,
	})
	if o.Status != http.StatusUnauthorized || !strings.Contains(o.Excerpt, "[redacted]") || !strings.Contains(o.Excerpt, "Webhook-Id: m") {
		t.Fatalf("outcome %+v: want a 401 with a redacted echo", o)
	}
	for _, leak := range []string{secret, strings.TrimPrefix(secret, SecretPrefix), token, cred, pathToken, queryKey} {
		if strings.Contains(o.Error(), leak) || strings.Contains(o.Excerpt, leak) {
			t.Errorf("outcome text contains %q: %s", leak, o.Error())
		}
	}
}

type resolverFunc func(host string) []net.IPAddr

func (f resolverFunc) LookupIPAddr(_ context.Context, host string) ([]net.IPAddr, error) {
	return f(host), nil
}

package webhook

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jetstream-bridge/bridge/internal/testutil"
	"github.com/jetstream-bridge/bridge/projection"
)

// mtlsReceiver starts a loopback HTTPS receiver that presents a
// certificate for hosts and refuses a client without a certificate from
// pki. It records the client certificate's common name in the hit's
// header as X-Peer.
func mtlsReceiver(t *testing.T, pki *testutil.PKI, hosts ...string) (*httptest.Server, <-chan hit) {
	t.Helper()
	hits := make(chan hit, 16)
	srv := httptest.NewUnstartedServer(recording(hits, nil))
	srv.Config.Handler = peerNamed(srv.Config.Handler)
	srv.TLS = pki.ServerTLS(pki.Server(t, hosts...))
	// The handshakes the tests fail on purpose are not worth a log line.
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, hits
}

func peerNamed(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
			r.Header.Set("X-Peer", r.TLS.PeerCertificates[0].Subject.CommonName)
		}
		next.ServeHTTP(w, r)
	})
}

func sendTLS(s *Sender, ns projection.Namespace, url string, t *TLS) Outcome {
	return s.Send(context.Background(), Request{Namespace: ns, URL: url, Message: message("m"), TLS: t})
}

func TestSendMutualTLS(t *testing.T) {
	pki := testutil.NewPKI(t, "receivers CA")
	srv, hits := mtlsReceiver(t, pki, "127.0.0.1")
	client := pki.Client(t, "bridge-billing")
	s := newSender(t, WithPolicy(loopbackPolicy()))

	full := &TLS{CACertificates: pki.CAPEM, ClientCertificate: client.CertPEM, ClientKey: client.KeyPEM}
	for _, ns := range []projection.Namespace{projection.Outbox, projection.A2A} {
		if o := sendTLS(s, ns, srv.URL, full); !o.OK() {
			t.Fatalf("%s with the CA and a client certificate: %s", ns, o.Error())
		}
		if h := next(t, hits); h.header.Get("X-Peer") != "bridge-billing" {
			t.Errorf("%s: receiver saw client certificate %q, want bridge-billing", ns, h.header.Get("X-Peer"))
		}
	}

	o := sendTLS(s, projection.Outbox, srv.URL, &TLS{CACertificates: pki.CAPEM})
	if o.OK() || o.Class != ClassTransport || o.Permanent || !strings.Contains(o.Error(), "tls: certificate required") {
		t.Errorf("without a client certificate: %+v (%s), want a transient transport error naming the alert", o, o.Error())
	}
	o = sendTLS(s, projection.Outbox, srv.URL, nil)
	if o.OK() || o.Permanent || !strings.Contains(o.Error(), "certificate signed by unknown authority") {
		t.Errorf("without the registration's CA: %+v (%s), want an unknown authority", o, o.Error())
	}
	other := testutil.NewPKI(t, "another CA").Client(t, "stranger")
	o = sendTLS(s, projection.Outbox, srv.URL, &TLS{CACertificates: pki.CAPEM, ClientCertificate: other.CertPEM, ClientKey: other.KeyPEM})
	if o.OK() || o.Permanent || !strings.Contains(o.Error(), "tls") {
		t.Errorf("a client certificate of another CA: %+v (%s), want a transient tls error", o, o.Error())
	}
	for _, secret := range []string{client.KeyPEM, other.KeyPEM, "PRIVATE KEY"} {
		if strings.Contains(o.Error(), secret) {
			t.Errorf("outcome %q carries key material", o.Error())
		}
	}
}

// serverName is both the name verified and the SNI sent: a receiver on
// 127.0.0.1 with a certificate for another name is reached through it.
func TestSendServerName(t *testing.T) {
	pki := testutil.NewPKI(t, "receivers CA")
	client := pki.Client(t, "bridge")
	srv, hits := mtlsReceiver(t, pki, "hooks.internal")
	var sni string
	srv.TLS.GetConfigForClient = func(h *tls.ClientHelloInfo) (*tls.Config, error) { sni = h.ServerName; return nil, nil }
	s := newSender(t, WithPolicy(loopbackPolicy()))
	base := TLS{CACertificates: pki.CAPEM, ClientCertificate: client.CertPEM, ClientKey: client.KeyPEM}

	if o := sendTLS(s, projection.Outbox, srv.URL, &base); o.OK() || !strings.Contains(o.Error(), "certificate") {
		t.Errorf("a certificate for hooks.internal at 127.0.0.1: %+v (%s), want a certificate error", o, o.Error())
	}
	named := base
	named.ServerName = "hooks.internal"
	if o := sendTLS(s, projection.Outbox, srv.URL, &named); !o.OK() {
		t.Fatalf("serverName hooks.internal: %s", o.Error())
	}
	next(t, hits)
	if sni != "hooks.internal" {
		t.Errorf("SNI %q, want hooks.internal", sni)
	}
}

// Transports are pooled per distinct setting: registrations sharing one
// share its connections, and the SSRF guard still judges every dial.
func TestSendPoolsTransportsPerTLSSetting(t *testing.T) {
	pki := testutil.NewPKI(t, "receivers CA")
	srv, hits := mtlsReceiver(t, pki, "127.0.0.1")
	a, b := pki.Client(t, "a"), pki.Client(t, "b")
	s := newSender(t, WithPolicy(loopbackPolicy()))
	for range 3 {
		for _, c := range []testutil.Leaf{a, b} {
			if o := sendTLS(s, projection.Outbox, srv.URL, &TLS{CACertificates: pki.CAPEM, ClientCertificate: c.CertPEM, ClientKey: c.KeyPEM}); !o.OK() {
				t.Fatal(o.Error())
			}
			next(t, hits)
		}
	}
	if n := len(s.ownTLS.entries); n != 2 {
		t.Errorf("%d transports for two distinct settings sent to three times each, want 2", n)
	}
	for i := range tlsPoolSize + 5 {
		_, _ = s.ownTLS.transport(projection.Outbox, &TLS{CACertificates: pki.CAPEM, ServerName: fmt.Sprintf("h%d.internal", i)})
	}
	if n := len(s.ownTLS.entries); n != tlsPoolSize {
		t.Errorf("%d transports held after %d distinct settings, want the bound %d", n, tlsPoolSize+7, tlsPoolSize)
	}

	guarded := newSender(t) // the default policy: loopback refused for A2A
	o := sendTLS(guarded, projection.A2A, srv.URL, &TLS{CACertificates: pki.CAPEM, ClientCertificate: a.CertPEM, ClientKey: a.KeyPEM})
	if o.OK() || o.Class != ClassRefused {
		t.Errorf("a2a to loopback with TLS settings: %+v (%s), want refused by the guard", o, o.Error())
	}
	noHit(t, hits, "the guard refuses loopback for a2a")
}

func TestSendRefusesTLSSettingsThatDoNotParse(t *testing.T) {
	pki := testutil.NewPKI(t, "CA")
	client := pki.Client(t, "c")
	otherKey := pki.Client(t, "d").KeyPEM
	s := newSender(t, WithPolicy(loopbackPolicy()))
	for name, tc := range map[string]TLS{
		"garbage CA":         {CACertificates: "not PEM"},
		"key as CA":          {CACertificates: client.KeyPEM},
		"certificate alone":  {ClientCertificate: client.CertPEM},
		"key of another":     {ClientCertificate: client.CertPEM, ClientKey: otherKey},
		"garbage client key": {ClientCertificate: client.CertPEM, ClientKey: "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"},
	} {
		o := sendTLS(s, projection.Outbox, "https://127.0.0.1:1/hook", &tc)
		if o.Class != ClassRefused || !o.Permanent || !strings.HasPrefix(o.Error(), "POST refused: tls: ") {
			t.Errorf("%s: %+v (%s), want a permanent refusal naming tls", name, o, o.Error())
		}
		if strings.Contains(o.Error(), "BEGIN") || strings.Contains(o.Error(), otherKey[30:60]) {
			t.Errorf("%s: refusal %q quotes PEM", name, o.Error())
		}
	}
}

func TestSendRegistrationHeaders(t *testing.T) {
	srv, hits := receiver(t, nil)
	s := newSender(t, WithPolicy(loopbackPolicy()))
	r := Request{
		Namespace: projection.Outbox, URL: srv.URL, Message: message("m-1"),
		Secrets:    []string{testSecret(1, 32)},
		AuthScheme: "Bearer", AuthCredentials: "c",
		Headers: map[string]string{
			"x-team": "billing", "X-Trace-Tag": "a b", "user-agent": "billing-bridge",
			// Refused by the admin API; a stored row still cannot replace them.
			"webhook-id": "forged", "authorization": "forged", "content-type": "text/forged",
		},
	}
	if o := s.Send(context.Background(), r); !o.OK() {
		t.Fatal(o.Error())
	}
	h := next(t, hits).header
	for k, want := range map[string]string{
		"X-Team": "billing", "X-Trace-Tag": "a b", "User-Agent": "billing-bridge",
		"Webhook-Id": "m-1", "Authorization": "Bearer c", "Content-Type": "application/json",
	} {
		if got := h.Values(k); len(got) != 1 || got[0] != want {
			t.Errorf("%s: %q, want exactly %q", k, got, want)
		}
	}

	r.Headers = map[string]string{"X-Bad": "a\r\nX-Injected: 1"}
	if o := s.Send(context.Background(), r); o.Class != ClassRefused || !o.Permanent || strings.Contains(o.Error(), "Injected") {
		t.Errorf("a header value with CR LF: %+v (%s), want a permanent refusal not quoting it", o, o.Error())
	}
	noHit(t, hits, "the header was refused")
}

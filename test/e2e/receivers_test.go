package e2e

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jetstream-bridge/bridge/internal/testutil"
)

// hook is a loopback receiver that records every request, answered 2xx
// or not, and answers with the script's statuses, then 204.
type hook struct {
	*httptest.Server
	mu     sync.Mutex
	got    []hookRequest
	script []int
}

type hookRequest struct {
	at     time.Time
	header http.Header
	body   string
	peer   string // the client certificate's common name, over mTLS
	status int
}

func newHook(script ...int) *hook {
	h := &hook{script: script}
	h.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		status := 204
		if n := len(h.got); n < len(h.script) {
			status = h.script[n]
		}
		req := hookRequest{at: time.Now(), header: r.Header.Clone(), body: string(b), status: status}
		if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
			req.peer = r.TLS.PeerCertificates[0].Subject.CommonName
		}
		h.got = append(h.got, req)
		h.mu.Unlock()
		if status/100 != 2 {
			w.Header().Set("Retry-After", "1")
		}
		w.WriteHeader(status)
	}))
	// Handshakes refused on purpose are not worth a line in the test log.
	h.Config.ErrorLog = log.New(io.Discard, "", 0)
	return h
}

func startHook(t *testing.T, script ...int) *hook {
	h := newHook(script...)
	h.Start()
	t.Cleanup(h.Close)
	return h
}

// startMTLSHook is a hook on https that presents a certificate of pki for
// hosts and requires a client certificate of pki.
func startMTLSHook(t *testing.T, pki *testutil.PKI, hosts ...string) *hook {
	h := newHook()
	h.TLS = pki.ServerTLS(pki.Server(t, hosts...))
	h.StartTLS()
	t.Cleanup(h.Close)
	return h
}

func (h *hook) requests() []hookRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.got)
}

func (h *hook) count() int { return len(h.requests()) }

func (d *daemon) create(body map[string]any) map[string]any {
	d.t.Helper()
	var out map[string]any
	if code := d.api("POST", "/v1/registrations", body, &out); code != 201 {
		d.t.Fatalf("create %v: %d %v", body["id"], code, out)
	}
	return out
}

// The registration's headers arrive on every POST: the first, the retry
// after a 500, the next message, a resend and a batch.
func TestReceiverHeadersOnEveryPOST(t *testing.T) {
	d := newDaemon(t)
	d.start()
	pub := newPublisher(t, "nats://"+d.natsAddr)
	h := startHook(t, 500)
	headers := map[string]any{"X-Team": "billing", "x-env": "e2e", "User-Agent": "billing-bridge/1"}
	reg := d.create(map[string]any{"id": "hdr", "namespace": "outbox", "subject": "journal.hdr.>", "url": h.URL, "headers": headers})
	if got, _ := reg["headers"].(map[string]any); len(got) != 3 || got["x-env"] != "e2e" {
		t.Errorf("answer's headers %v, want them as registered", reg["headers"])
	}
	d.create(map[string]any{"id": "hdr-batch", "namespace": "outbox", "subject": "journal.hdrb.>", "url": h.URL, "headers": headers,
		"batch": map[string]any{"maxEvents": 2, "maxDelay": "10ms"}})

	first := pub.publish(t, "journal.hdr.1", `{"n":1}`)
	waitFor(t, 20*time.Second, "the retry after the 500", func() bool { return h.count() >= 2 })
	pub.publish(t, "journal.hdr.2", `{"n":2}`)
	waitFor(t, 10*time.Second, "the second message", func() bool { return h.count() >= 3 })
	var resent any
	if code := d.api("POST", "/v1/registrations/hdr/resend", map[string]any{"seq": first}, &resent); code != 200 {
		t.Fatalf("resend: %d", code)
	}
	pub.publish(t, "journal.hdrb.1", `{"n":1}`)
	pub.publish(t, "journal.hdrb.2", `{"n":2}`)
	waitFor(t, 10*time.Second, "the batch", func() bool { return h.count() >= 5 })

	got := h.requests()
	if got[0].status != 500 || got[1].status != 204 || got[0].header.Get("Webhook-Id") != got[1].header.Get("Webhook-Id") {
		t.Fatalf("first two POSTs: %d and %d; want a 500 and its retry", got[0].status, got[1].status)
	}
	for i, r := range got {
		for k, v := range map[string]string{"X-Team": "billing", "X-Env": "e2e", "User-Agent": "billing-bridge/1"} {
			if vs := r.header.Values(k); len(vs) != 1 || vs[0] != v {
				t.Errorf("POST %d (%s): %s = %q, want %q", i+1, r.header.Get("Content-Type"), k, vs, v)
			}
		}
		if r.header.Get("Webhook-Id") == "" {
			t.Errorf("POST %d lost the bridge's own webhook-id", i+1)
		}
	}
	if !strings.HasPrefix(got[4].header.Get("Content-Type"), "application/cloudevents-batch+json") {
		t.Errorf("fifth POST is %q, want the batch", got[4].header.Get("Content-Type"))
	}

	var e map[string]any
	if code := d.api("POST", "/v1/registrations", map[string]any{"namespace": "outbox", "subject": "journal.x", "url": h.URL,
		"headers": map[string]any{"Webhook-Signature": "v1,forged"}}, &e); code != 400 || !strings.Contains(fmt.Sprint(e), `"Webhook-Signature" is set by the bridge`) {
		t.Errorf("a header the bridge sets: %d %v, want 400 naming it", code, e)
	}
}

// Mutual TLS: the registration's CA and client certificate reach a
// receiver that demands one; without the certificate the POST fails, is
// retried and says why; a PUT that adds it delivers the same message,
// the cursor kept. serverName reaches a receiver whose certificate names
// another host than the one dialled.
func TestReceiverMutualTLS(t *testing.T) {
	d := newDaemon(t)
	d.start()
	pub := newPublisher(t, "nats://"+d.natsAddr)
	pki := testutil.NewPKI(t, "receivers CA")
	client := pki.Client(t, "bridge-billing")
	h := startMTLSHook(t, pki, "127.0.0.1")
	named := startMTLSHook(t, pki, "hooks.internal")
	full := map[string]any{"caCertificates": pki.CAPEM, "clientCertificate": client.CertPEM, "clientKey": client.KeyPEM}
	reg := func(id, url string, tls map[string]any) map[string]any {
		return map[string]any{"id": id, "namespace": "outbox", "subject": "journal." + id + ".>", "url": url, "tls": tls}
	}

	answer := d.create(reg("mtls", h.URL, full))
	if got := fmt.Sprint(answer["tls"]); got != "map[caCertificates:true clientCertificate:true]" {
		t.Errorf("answer's tls %s, want only what is set", got)
	}
	withName := map[string]any{"serverName": "hooks.internal"}
	for k, v := range full {
		withName[k] = v
	}
	d.create(reg("named", named.URL, withName))
	noCert := reg("nocert", h.URL, map[string]any{"caCertificates": pki.CAPEM})
	d.create(noCert)

	pub.publish(t, "journal.mtls.1", `{"n":1}`)
	pub.publish(t, "journal.named.1", `{"n":1}`)
	seq := pub.publish(t, "journal.nocert.1", `{"n":1}`)
	waitFor(t, 20*time.Second, "the mTLS receivers' deliveries", func() bool { return h.count() >= 1 && named.count() >= 1 })
	for name, r := range map[string]*hook{"127.0.0.1": h, "hooks.internal": named} {
		if p := r.requests()[0].peer; p != "bridge-billing" {
			t.Errorf("receiver %s saw client certificate %q, want bridge-billing", name, p)
		}
	}

	waitFor(t, 20*time.Second, "the registration without a certificate to fail twice", func() bool {
		a, _ := d.registration("nocert")["attempts"].(float64)
		return a >= 2
	})
	r := d.registration("nocert")
	if last, _ := r["lastError"].(string); !strings.Contains(last, "tls: certificate required") || r["state"] != "active" {
		t.Errorf("without a client certificate: state %v, lastError %q; want active, retrying, naming the TLS alert", r["state"], last)
	}
	if h.count() != 1 {
		t.Errorf("the receiver served %d requests; a POST without a certificate reached it", h.count())
	}

	// Rotation: a PUT with the certificate keeps the cursor, so the
	// message that failed is the one delivered.
	noCert["tls"] = full
	if code := d.api("PUT", "/v1/registrations/nocert", noCert, nil); code != 200 {
		t.Fatalf("PUT: %d", code)
	}
	// The cursor moves after the receiver has answered, so the test waits
	// on the cursor rather than on the receiver's count.
	waitFor(t, 20*time.Second, "the cursor past the message after the PUT", func() bool {
		n, _ := d.registration("nocert")["nextSeq"].(float64)
		return uint64(n) > seq
	})
	r = d.registration("nocert")
	if n, _ := r["nextSeq"].(float64); uint64(n) != seq+1 || r["attempts"].(float64) != 0 || h.count() != 2 {
		t.Errorf("after the PUT: nextSeq %v, attempts %v, receiver served %d; want %d, 0 and 2", r["nextSeq"], r["attempts"], h.count(), seq+1)
	}

	logs := d.logs.String()
	for _, l := range strings.Split(client.KeyPEM, "\n") {
		if len(l) > 20 && strings.Contains(logs, l) {
			t.Fatalf("the bridge's log carries a line of the client key: %q", l)
		}
	}
	if strings.Contains(logs, "BEGIN") {
		t.Error("the bridge's log carries PEM text")
	}
}

// rateLimit {perSecond: 5}: twenty messages take at least 19 intervals
// of 200 ms, arrive in order, and waiting is never a failure.
func TestReceiverRateLimit(t *testing.T) {
	d := newDaemon(t)
	d.start()
	pub := newPublisher(t, "nats://"+d.natsAddr)
	h := startHook(t)
	const perSecond, n = 5, 20
	d.create(map[string]any{"id": "paced", "namespace": "outbox", "subject": "journal.paced.>", "url": h.URL,
		"rateLimit": map[string]any{"perSecond": perSecond}})
	var want []string
	for i := range n {
		want = append(want, fmt.Sprintf(`{"n":%d}`, i))
		pub.publish(t, "journal.paced.a", want[i])
	}
	waitFor(t, 60*time.Second, "the twenty messages", func() bool {
		r := d.registration("paced")
		if a, _ := r["attempts"].(float64); a != 0 || r["lastError"] != "" {
			t.Fatalf("attempts %v, lastError %v while paced; waiting is not failing", r["attempts"], r["lastError"])
		}
		return h.count() >= n
	})

	got := h.requests()
	var bodies []string
	for _, r := range got {
		bodies = append(bodies, r.body)
	}
	if !slices.Equal(bodies, want) {
		t.Fatalf("bodies %q, want the messages once each in order", bodies)
	}
	// A lower bound from the rate, with a tenth of slack for the clocks.
	least := time.Duration(n-1) * time.Second / perSecond * 9 / 10
	if took := got[n-1].at.Sub(got[0].at); took < least {
		t.Errorf("%d POSTs in %v at %d/s, want at least %v", n, took, perSecond, least)
	}
	// The receiver holds the last POST before the bridge has its answer:
	// the count follows.
	waitFor(t, 10*time.Second, "delivered to count the twenty", func() bool {
		r := d.registration("paced")
		if a, _ := r["attempts"].(float64); a != 0 {
			t.Fatalf("attempts %v after the paced POSTs; want 0", a)
		}
		return r["delivered"].(float64) == n
	})
}

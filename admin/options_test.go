package admin

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/jetstream-bridge/bridge/cursor"
	"github.com/jetstream-bridge/bridge/internal/testutil"
)

// outboxWith is an outbox registration with extra members, e.g.
// `"headers":{"X-Team":"billing"}`.
func outboxWith(id, extra string) string {
	return `{"id":"` + id + `","namespace":"outbox","subject":"journal.x","url":"https://a.example/",` + extra + `}`
}

// jsonString quotes s as a JSON string, for PEM text in a body.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func tlsMember(caPEM, certPEM, keyPEM, serverName string) string {
	return fmt.Sprintf(`"tls":{"caCertificates":%s,"clientCertificate":%s,"clientKey":%s,"serverName":%q}`,
		jsonString(caPEM), jsonString(certPEM), jsonString(keyPEM), serverName)
}

// keyLines are lines of a PEM key long enough to be its own: what must
// never appear in an answer or a log line.
func keyLines(keyPEM string) []string {
	var out []string
	for l := range strings.SplitSeq(keyPEM, "\n") {
		if len(l) > 20 && !strings.HasPrefix(l, "-----") {
			out = append(out, l)
		}
	}
	return out
}

func noKeyMaterial(t *testing.T, where string, text []byte, keyPEMs ...string) {
	t.Helper()
	for _, k := range keyPEMs {
		for _, l := range keyLines(k) {
			if strings.Contains(string(text), l) {
				t.Errorf("%s carries key material %q:\n%s", where, l, text)
			}
		}
	}
	if strings.Contains(string(text), "BEGIN") {
		t.Errorf("%s carries PEM text:\n%s", where, text)
	}
}

func TestReceiverOptionsAreStoredAndShown(t *testing.T) {
	h := newHarness(t)
	pki := testutil.NewPKI(t, "receivers CA")
	first, second := pki.Client(t, "bridge-1"), pki.Client(t, "bridge-2")
	body := outboxWith("ob", `"headers":{"X-Team":"billing","x-trace-tag":"a b"},`+
		tlsMember(pki.CAPEM, first.CertPEM, first.KeyPEM, "hooks.internal")+`,"rateLimit":{"perSecond":5}`)

	res := h.do("POST", "/v1/registrations", body)
	if res.status != http.StatusCreated {
		t.Fatalf("create: %d %s", res.status, res.body)
	}
	v := decodeView(t, res.body)
	if v.Headers["X-Team"] != "billing" || v.Headers["x-trace-tag"] != "a b" || len(v.Headers) != 2 {
		t.Errorf("headers %v, want them as registered", v.Headers)
	}
	if v.TLS == nil || *v.TLS != (TLS{CACertificates: true, ClientCertificate: true, ServerName: "hooks.internal"}) {
		t.Errorf("tls %+v, want what is set and the server name", v.TLS)
	}
	if v.RateLimit == nil || *v.RateLimit != (RateLimit{PerSecond: 5, Burst: 1}) {
		t.Errorf("rateLimit %+v, want 5/s with the default burst 1", v.RateLimit)
	}
	stored, err := h.store.Get(t.Context(), "ob")
	if err != nil {
		t.Fatal(err)
	}
	if stored.TLS == nil || stored.TLS.ClientKey != first.KeyPEM || stored.RateLimit.Burst != 1 {
		t.Fatalf("stored tls %+v, rateLimit %+v", stored.TLS, stored.RateLimit)
	}

	// A new client certificate by PUT keeps the cursor: rotation loses no
	// delivery.
	delivered := v.NextSeq + 3
	if err := h.store.Advance(t.Context(), "ob", cursor.Progress{NextSeq: delivered}); err != nil {
		t.Fatal(err)
	}
	rotated := strings.Replace(body, jsonString(first.CertPEM), jsonString(second.CertPEM), 1)
	rotated = strings.Replace(rotated, jsonString(first.KeyPEM), jsonString(second.KeyPEM), 1)
	answers := [][]byte{res.body}
	for _, r := range []response{
		h.do("PUT", "/v1/registrations/ob", rotated),
		h.do("GET", "/v1/registrations/ob", ""),
		h.do("GET", "/v1/registrations", ""),
	} {
		if r.status != http.StatusOK {
			t.Fatalf("status %d: %s", r.status, r.body)
		}
		answers = append(answers, r.body)
	}
	if v := decodeView(t, answers[1]); v.NextSeq != delivered || v.TLS == nil || !v.TLS.ClientCertificate {
		t.Errorf("after PUT: nextSeq %d, tls %+v; want the cursor kept and the certificate set", v.NextSeq, v.TLS)
	}
	if stored, _ := h.store.Get(t.Context(), "ob"); stored.TLS.ClientKey != second.KeyPEM {
		t.Error("PUT did not store the new client key")
	}
	for i, a := range answers {
		noKeyMaterial(t, fmt.Sprintf("answer %d", i), a, first.KeyPEM, second.KeyPEM)
	}
	noKeyMaterial(t, "the log", []byte(h.logs.String()), first.KeyPEM, second.KeyPEM)
}

// Every header the bridge sets itself is refused by name, in any case.
func TestHeadersTheBridgeSetsAreRefused(t *testing.T) {
	h := newHarness(t)
	for _, name := range []string{
		"webhook-id", "Webhook-Signature", "WEBHOOK-TIMESTAMP", "webhook-anything",
		"ce-id", "Ce-Type", "CE-specversion", "ce-x",
		"Content-Type", "content-length", "Host",
		"A2A-Notification-Token", "x-a2a-notification-token",
		"traceparent", "TraceState",
		"Connection", "keep-alive", "Proxy-Connection", "TE", "trailer", "Transfer-Encoding", "Upgrade",
	} {
		res := h.do("POST", "/v1/registrations", outboxWith("r", `"headers":{"X-Ok":"1",`+jsonString(name)+`:"secret-value"}`))
		wantError(t, res, http.StatusBadRequest, "invalid_argument", fmt.Sprintf("headers: %q is set by the bridge", name))
		if strings.Contains(string(res.body), "secret-value") {
			t.Errorf("%s: the refusal echoes the value: %s", name, res.body)
		}
	}

	withAuth := `"authentication":{"scheme":"Bearer","credentials":"c"},`
	wantError(t, h.do("POST", "/v1/registrations", outboxWith("r", withAuth+`"headers":{"authorization":"Bearer x"}`)),
		http.StatusBadRequest, "invalid_argument", `headers: "authorization" is set by the bridge`)
	withOAuth2 := `"oauth2":{"tokenUrl":"https://auth.example/token","clientId":"bridge","clientSecret":"s"},`
	wantError(t, h.do("POST", "/v1/registrations", outboxWith("r", withOAuth2+`"headers":{"AUTHORIZATION":"Bearer x"}`)),
		http.StatusBadRequest, "invalid_argument", `headers: "AUTHORIZATION" is set by the bridge`)
	if v := h.create(outboxWith("own-auth", `"headers":{"Authorization":"Bearer mine"}`)); v.Headers["Authorization"] != "Bearer mine" {
		t.Errorf("Authorization without authentication or oauth2: headers %v, want it kept", v.Headers)
	}
}

func TestHeadersThatCannotBeSentAreRefused(t *testing.T) {
	h := newHarness(t)
	for name, tc := range map[string]struct{ headers, want string }{
		"space in name":     {`{"X Team":"a"}`, `headers: "X Team" is not an HTTP header name`},
		"colon in name":     {`{"X-Team:":"a"}`, `headers: "X-Team:" is not an HTTP header name`},
		"empty name":        {`{"":"a"}`, `headers: "" is not an HTTP header name`},
		"non-ASCII name":    {`{"X-Tëam":"a"}`, `is not an HTTP header name`},
		"CR LF in value":    {`{"X-Team":"a\r\nX-Injected: hidden"}`, `headers: the value of "X-Team" must not contain CR, LF or NUL`},
		"LF in value":       {`{"X-Team":"a\nhidden"}`, `must not contain CR, LF or NUL`},
		"NUL in value":      {`{"X-Team":"a\u0000hidden"}`, `must not contain CR, LF or NUL`},
		"control in value":  {`{"X-Team":"a\u0007hidden"}`, `headers: the value of "X-Team" must not contain control characters`},
		"one header, twice": {`{"X-Team":"a","x-team":"b"}`, `headers: "X-Team" and "x-team" name the same header`},
	} {
		res := h.do("POST", "/v1/registrations", outboxWith("r", `"headers":`+tc.headers))
		wantError(t, res, http.StatusBadRequest, "invalid_argument", tc.want)
		if strings.Contains(string(res.body), "hidden") {
			t.Errorf("%s: the refusal echoes the value: %s", name, res.body)
		}
	}
	if v := h.create(outboxWith("tab", `"headers":{"X-Team":"a\tb"}`)); v.Headers["X-Team"] != "a\tb" {
		t.Errorf("a tab in a value: %v, want it kept", v.Headers)
	}
}

func TestTLSSettingsThatDoNotParseAreRefused(t *testing.T) {
	h := newHarness(t)
	pki := testutil.NewPKI(t, "CA")
	client, other := pki.Client(t, "c"), pki.Client(t, "d")
	garbageKey := "-----BEGIN PRIVATE KEY-----\nR0FSQkFHRS1LRVktTUFURVJJQUwtMDA0Mg==\n-----END PRIVATE KEY-----\n"
	for name, tc := range map[string]struct{ tls, want string }{
		"garbage CA":           {tlsMember("not PEM at all", "", "", ""), "tls.caCertificates: no PEM certificate found"},
		"a key as CA":          {tlsMember(client.KeyPEM, "", "", ""), `tls.caCertificates: PEM block 1 is a "PRIVATE KEY", not a CERTIFICATE`},
		"a broken CA block":    {tlsMember(pki.CAPEM+garbageKey[:len(garbageKey)-40]+"\n", "", "", ""), "tls.caCertificates: text after PEM block 1 is not a PEM block"},
		"certificate alone":    {tlsMember("", client.CertPEM, "", ""), "tls.clientCertificate and clientKey come together"},
		"key alone":            {tlsMember("", "", client.KeyPEM, ""), "tls.clientCertificate and clientKey come together"},
		"garbage certificate":  {tlsMember("", "junk", client.KeyPEM, ""), "tls.clientCertificate: no PEM certificate found"},
		"another's key":        {tlsMember("", client.CertPEM, other.KeyPEM, ""), "tls.clientKey: not a private key, or not the one of clientCertificate"},
		"garbage key":          {tlsMember("", client.CertPEM, garbageKey, ""), "tls.clientKey: not a private key"},
		"a key that is no PEM": {tlsMember("", client.CertPEM, "no PEM here", ""), "tls.clientKey: no PEM block found"},
		"bad serverName":       {tlsMember(pki.CAPEM, "", "", "hooks..internal"), `tls.serverName "hooks..internal" is not a host name`},
		"serverName with port": {tlsMember(pki.CAPEM, "", "", "hooks.internal:443"), "tls.serverName"},
	} {
		res := h.do("POST", "/v1/registrations", outboxWith("r", tc.tls))
		wantError(t, res, http.StatusBadRequest, "invalid_argument", tc.want)
		noKeyMaterial(t, name, res.body, client.KeyPEM, other.KeyPEM, garbageKey)
	}
	wantError(t, h.do("POST", "/v1/registrations", outboxWith("r", `"tls":{"clientKey":"x","extra":1}`)),
		http.StatusBadRequest, "invalid_argument")
	noKeyMaterial(t, "the log", []byte(h.logs.String()), client.KeyPEM, other.KeyPEM, garbageKey)

	a2a := `{"id":"agent","namespace":"a2a","taskId":"t","url":"https://agent.example/",` + tlsMember(pki.CAPEM, client.CertPEM, client.KeyPEM, "10.0.0.1") + `}`
	if v := h.create(a2a); v.TLS == nil || *v.TLS != (TLS{CACertificates: true, ClientCertificate: true, ServerName: "10.0.0.1"}) {
		t.Errorf("a2a with tls: %+v", v.TLS)
	}
}

func TestRateLimitBounds(t *testing.T) {
	h := newHarness(t)
	for _, tc := range []struct{ limit, want string }{
		{`{}`, "rateLimit.perSecond must be greater than 0 and at most 10000"},
		{`{"perSecond":0}`, "rateLimit.perSecond must be greater than 0"},
		{`{"perSecond":-1}`, "rateLimit.perSecond must be greater than 0"},
		{`{"perSecond":10000.5}`, "rateLimit.perSecond must be greater than 0 and at most 10000"},
		{`{"perSecond":5,"burst":0}`, "rateLimit.burst must be 1 to 10000, not 0"},
		{`{"perSecond":5,"burst":10001}`, "rateLimit.burst must be 1 to 10000, not 10001"},
		{`{"perSecond":"5"}`, "rateLimit.perSecond"},
	} {
		wantError(t, h.do("POST", "/v1/registrations", outboxWith("r", `"rateLimit":`+tc.limit)),
			http.StatusBadRequest, "invalid_argument", tc.want)
	}
	for id, tc := range map[string]struct {
		limit string
		want  RateLimit
	}{
		"slowest": {`{"perSecond":0.001}`, RateLimit{PerSecond: 0.001, Burst: 1}},
		"fastest": {`{"perSecond":10000,"burst":10000}`, RateLimit{PerSecond: 10000, Burst: 10000}},
	} {
		if v := h.create(outboxWith(id, `"rateLimit":`+tc.limit)); v.RateLimit == nil || *v.RateLimit != tc.want {
			t.Errorf("%s: rateLimit %+v, want %+v", tc.limit, v.RateLimit, tc.want)
		}
	}
}

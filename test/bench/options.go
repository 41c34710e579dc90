package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jetstream-bridge/bridge/internal/testpki"
)

// The receiver-option scenarios are S1's drain with one thing changed —
// the registration's headers and OAuth 2.0 grant, a client certificate,
// span export — against the drain without it. A figure minutes away from
// its counterpart would carry the machine's drift, which is larger than
// the cost sought, so both sides drain one backlog, alternated in rounds
// (a, b, a, b…), and the figure is the round of the median ratio b ÷ a.

// receiverTLS is a registration's tls option.
type receiverTLS struct {
	CACertificates    string `json:"caCertificates,omitempty"`
	ClientCertificate string `json:"clientCertificate,omitempty"`
	ClientKey         string `json:"clientKey,omitempty"`
	ServerName        string `json:"serverName,omitempty"`
}

// oauth2Grant is a registration's oauth2 option.
type oauth2Grant struct {
	TokenURL     string   `json:"tokenUrl"`
	ClientID     string   `json:"clientId"`
	ClientSecret string   `json:"clientSecret"`
	Scopes       []string `json:"scopes,omitempty"`
}

// side is one half of a pairing: the registration it drains with and the
// environment its bridge runs in.
type side struct {
	v       variant // its name and figure, in logs and failures
	label   string  // "plain", "headers + oauth2"
	url     string  // the receiver, ending /r/0
	shape   func(*registration)
	environ []string // added to the bridge's environment
}

// pairing is one receiver-option scenario: b against a, in the same run.
type pairing struct {
	name   string // "S1h"
	label  string // "headers + oauth2 ÷ plain"
	target float64
	a, b   side
	// payload is message i of the backlog; nil: 1 KiB of 'x', as S1's.
	payload func(i int) []byte
	// probe reads the scenario's own counters. A drain's share is what
	// they read after it, its bridge stopped and its last spans exported,
	// less what they read before.
	probe func() []int64
}

// pairRound is one round's drains, a's then b's, and what each moved the
// pairing's counters by.
type pairRound struct {
	d     [2]drained
	moved [2][]int64
}

func (r pairRound) ratio() float64 { return r.d[1].rate / r.d[0].rate }

// paired runs p's rounds on one backlog of S1's size.
func (b *bench) paired(ctx context.Context, p pairing) ([]pairRound, error) {
	n := b.sz.s1Backlog
	logf("%s: %s, S1 drains of a %s × 1 KiB backlog, %s of each", p.name, p.label, count(float64(n)), plural(b.sz.s1Rounds, "round"))
	s, err := b.newStream(ctx, strings.ToLower(p.name), allowDirect)
	if err != nil {
		return nil, err
	}
	defer b.deleteStream(s)
	subject := s.prefix + ".orders"
	payloadOf := p.payload
	if payloadOf == nil {
		x := bytes.Repeat([]byte{'x'}, kib)
		payloadOf = func(int) []byte { return x }
	}
	first, err := b.publishEach(ctx, s, func(int) string { return subject }, n, payloadOf)
	if err != nil {
		return nil, err
	}
	var rounds []pairRound
	for round := range b.sz.s1Rounds {
		var r pairRound
		for i, sd := range []side{p.a, p.b} {
			logf("%s: round %d of %d, %s", p.name, round+1, b.sz.s1Rounds, sd.label)
			if r.d[i], r.moved[i], err = b.drainSide(ctx, s, subject, first, sd, p.probe); err != nil {
				return nil, fmt.Errorf("%s, round %d: %w", sd.label, round+1, err)
			}
			logf("%s: %s drained at %.0f msg/s", p.name, sd.label, r.d[i].rate)
		}
		rounds = append(rounds, r)
	}
	return rounds, nil
}

// drainSide drains the backlog once as sd, in a bridge of its own.
func (b *bench) drainSide(ctx context.Context, s stream, subject string, first uint64, sd side, probe func() []int64) (drained, []int64, error) {
	start := func(ctx context.Context) (*bridgeProc, error) {
		return b.startFreshEnv(ctx, s, strings.ToLower(sd.v.name), sd.environ)
	}
	reg := registration{ID: "drain", Namespace: "outbox", Subject: subject, URL: sd.url, Start: "first"}
	if sd.shape != nil {
		sd.shape(&reg)
	}
	before := probe()
	d, early := b.drainAs(ctx, start, reg, first, b.sz.s1Backlog, sd.v)
	if early != nil {
		if early.err != nil {
			return d, nil, early.err
		}
		return d, nil, errors.New(early.line)
	}
	delta := probe()
	for i := range delta {
		delta[i] -= before[i]
	}
	return d, delta, nil
}

// medianRound is the round whose ratio is the median of all rounds'.
func medianRound(rounds []pairRound) pairRound {
	sorted := slices.Clone(rounds)
	slices.SortFunc(sorted, func(a, b pairRound) int { return cmp.Compare(a.ratio(), b.ratio()) })
	return sorted[len(sorted)/2]
}

// moved is counter i summed over every round's drains of side s (0: a,
// 1: b).
func moved(rounds []pairRound, s, i int) int64 {
	var n int64
	for _, r := range rounds {
		n += r.moved[s][i]
	}
	return n
}

// pairResult reports p's rounds: one row, b's rate against a's in the
// median round, and a line with every round's ratio and what the
// scenario's own instruments counted.
func pairResult(p pairing, rounds []pairRound, n int, counted string) result {
	m := medianRound(rounds)
	r := m.ratio()
	each := make([]string, len(rounds))
	for i, x := range rounds {
		each[i] = fmt.Sprintf("%.2f (%.0f against %.0f msg/s)", x.ratio(), x.d[1].rate, x.d[0].rate)
	}
	sideLine := func(label string, d drained) string {
		return fmt.Sprintf("%s %.0f msg/s in %v, CPU %s per message, peak RSS %.0f MiB, %s, %d error log lines",
			label, d.rate, d.took.Round(time.Millisecond), perMsg(d.cpu, n), mib(d.hwm), d.extras, d.errLines)
	}
	return result{name: p.name, figure: m.d[1].rate,
		rows: []row{{what: p.name + " " + p.label + ", same run", bridge: count(m.d[1].rate), baseline: count(m.d[0].rate),
			ratio: ratioFor(r, p.target), target: fmt.Sprintf("≥ %.2f", p.target), met: yesNo(r >= p.target)}},
		line: fmt.Sprintf("%s: %s, same run: %.2f, median of %s: %s; median round: %s; %s; %s",
			p.name, p.label, r, plural(len(rounds), "round"), strings.Join(each, ", "),
			sideLine(p.a.label, m.d[0]), sideLine(p.b.label, m.d[1]), counted),
	}
}

// plural is n what, with an s unless n is 1.
func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// checked counts the POSTs reaching the sink through it that carry what a
// scenario's option makes the bridge send, so a figure measured with an
// option the bridge ignored, or one left on for the other side, shows.
type checked struct {
	next    http.Handler
	carries func(*http.Request) bool
	all, ok atomic.Int64
}

func (c *checked) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.all.Add(1)
	if c.carries(r) {
		c.ok.Add(1)
	}
	c.next.ServeHTTP(w, r)
}

// tokenServer is an OAuth 2.0 token endpoint granting one token to one
// client authenticated by HTTP Basic, as the bridge sends it first.
type tokenServer struct {
	id, secret, token string
	granted, refused  atomic.Int64
}

func (t *tokenServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id, secret, ok := r.BasicAuth()
	if r.Method != http.MethodPost || !ok || id != t.id || secret != t.secret {
		t.refused.Add(1)
		w.Header().Set("WWW-Authenticate", `Basic realm="bench"`)
		http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
		return
	}
	if err := r.ParseForm(); err != nil || r.PostForm.Get("grant_type") != "client_credentials" {
		t.refused.Add(1)
		http.Error(w, `{"error":"unsupported_grant_type"}`, http.StatusBadRequest)
		return
	}
	t.granted.Add(1)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	fmt.Fprintf(w, `{"access_token":%q,"token_type":"Bearer","expires_in":3600}`, t.token)
}

// collector is an OTLP/HTTP trace endpoint that reads each export and
// throws it away: what the bridge pays for exporting is its own work, not
// a collector's.
type collector struct {
	requests, bytes, refused atomic.Int64
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
		c.refused.Add(1)
		http.NotFound(w, r)
		return
	}
	n, _ := io.Copy(io.Discard, r.Body)
	c.requests.Add(1)
	c.bytes.Add(n)
	w.WriteHeader(http.StatusOK)
}

// The headers S1h's registration carries.
var s1hHeaders = map[string]string{"X-Team": "billing", "X-Env": "bench", "X-Tenant": "tenant-0042"}

// headersOAuth is S1h: S1 for a registration with three headers of its own
// and an OAuth 2.0 grant from a token endpoint in this process, against a
// plain one.
func (b *bench) headersOAuth(ctx context.Context) result {
	const name, what = "S1h", "S1h drain, 3 headers + oauth2 (msg/s)"
	tokens := &tokenServer{id: "bench-bridge", secret: "bench-secret", token: "bench-token-0123456789abcdef"}
	tl, err := listen(tokens, nil)
	if err != nil {
		return failed(name, what, err)
	}
	defer tl.close()
	check := &checked{next: b.sink, carries: func(r *http.Request) bool {
		for k, v := range s1hHeaders {
			if r.Header.Get(k) != v {
				return false
			}
		}
		return r.Header.Get("Authorization") == "Bearer "+tokens.token
	}}
	rl, err := listen(check, nil)
	if err != nil {
		return failed(name, what, err)
	}
	defer rl.close()
	p := pairing{name: name, label: "3 headers + oauth2 ÷ plain", target: 0.95,
		a: side{v: variant{name: name, what: what}, label: "plain", url: rl.url + "/r/0"},
		b: side{v: variant{name: name, what: what}, label: "3 headers + oauth2", url: rl.url + "/r/0",
			shape: func(reg *registration) {
				reg.Headers = s1hHeaders
				reg.OAuth2 = &oauth2Grant{TokenURL: tl.url + "/token", ClientID: tokens.id, ClientSecret: tokens.secret, Scopes: []string{"events:write"}}
			}},
		probe: func() []int64 {
			return []int64{check.all.Load(), check.ok.Load(), tokens.granted.Load(), tokens.refused.Load()}
		},
	}
	rounds, err := b.paired(ctx, p)
	if err != nil {
		return failed(name, what, err)
	}
	raw, err := b.bareHeadersOAuth(ctx, len(rounds), "Bearer "+tokens.token)
	if err != nil {
		return failed(name, what, err)
	}
	return pairResult(p, rounds, b.sz.s1Backlog, raw+"; "+fmt.Sprintf(
		"POSTs carrying the 3 headers and the token: %s of %s plain, %s of %s with the options; token server: %s (%d granted, %d refused), %d of them in the plain drains",
		count(float64(moved(rounds, 0, 1))), count(float64(moved(rounds, 0, 0))),
		count(float64(moved(rounds, 1, 1))), count(float64(moved(rounds, 1, 0))),
		plural(int(tokens.granted.Load()+tokens.refused.Load()), "request"), tokens.granted.Load(), tokens.refused.Load(),
		moved(rounds, 0, 2)+moved(rounds, 0, 3)))
}

// bareHeadersOAuth is S1h's raw limit: the bare POST loop with the
// bridge's headers, against the same loop with S1h's three headers and
// its bearer token besides, in rounds as the drains are. Bigger requests
// cost the client and the receiver alike, on a machine where both share
// the cores; what the bridge loses beyond this ratio is its own.
func (b *bench) bareHeadersOAuth(ctx context.Context, rounds int, authorization string) (string, error) {
	n := b.sz.s1Backlog
	same := wire{stream: "BENCH_S1H", subject: "bench.s1h.orders"} // the drains' (paired)
	more := same
	more.extra = []string{"Authorization: " + authorization}
	for _, k := range slices.Sorted(maps.Keys(s1hHeaders)) {
		more.extra = append(more.extra, k+": "+s1hHeaders[k])
	}
	ratios := make([]float64, 0, rounds)
	for round := range rounds {
		logf("S1h: raw limit, round %d of %d: %s bare POSTs without and with the headers and token", round+1, rounds, count(float64(n)))
		a, err := b.barePOSTs(ctx, n, 1, kib, same)
		if err != nil {
			return "", fmt.Errorf("baseline without the options: %w", err)
		}
		c, err := b.barePOSTs(ctx, n, 1, kib, more)
		if err != nil {
			return "", fmt.Errorf("baseline with the options' headers: %w", err)
		}
		ratios = append(ratios, c.rate/a.rate)
	}
	each := make([]string, len(ratios))
	for i, r := range ratios {
		each[i] = fmt.Sprintf("%.2f", r)
	}
	slices.Sort(ratios)
	return fmt.Sprintf("raw limit: bare POSTs with the 3 headers and the token ÷ without, median of %s: %.2f (%s)",
		plural(rounds, "round"), ratios[len(ratios)/2], strings.Join(each, ", ")), nil
}

// mutualTLS is S1m (and S1t, its other side): S1 to a receiver demanding
// a client certificate, against one over TLS without, both trusting the
// run's own CA through tls.caCertificates, both HTTP/1.1.
func (b *bench) mutualTLS(ctx context.Context) result {
	const name, what = "S1m", "S1m drain, mTLS receiver (msg/s)"
	ca, err := testpki.New("bench CA")
	if err != nil {
		return failed(name, what, err)
	}
	srvLeaf, err := ca.Server("127.0.0.1")
	if err != nil {
		return failed(name, what, err)
	}
	client, err := ca.Client("bench-bridge")
	if err != nil {
		return failed(name, what, err)
	}
	check := &checked{next: b.sink, carries: func(r *http.Request) bool {
		return r.TLS != nil && len(r.TLS.PeerCertificates) > 0
	}}
	plainTLS, err := listen(check, &tls.Config{Certificates: []tls.Certificate{srvLeaf.TLS}})
	if err != nil {
		return failed(name, what, err)
	}
	defer plainTLS.close()
	mutual, err := listen(check, &tls.Config{Certificates: []tls.Certificate{srvLeaf.TLS},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.Pool})
	if err != nil {
		return failed(name, what, err)
	}
	defer mutual.close()
	p := pairing{name: name, label: "mTLS ÷ TLS", target: 0.95,
		a: side{v: variant{name: "S1t", what: "S1t drain, TLS receiver (msg/s)"}, label: "TLS", url: plainTLS.url + "/r/0",
			shape: func(reg *registration) { reg.TLS = &receiverTLS{CACertificates: ca.PEM} }},
		b: side{v: variant{name: name, what: what}, label: "mTLS", url: mutual.url + "/r/0",
			shape: func(reg *registration) {
				reg.TLS = &receiverTLS{CACertificates: ca.PEM, ClientCertificate: client.CertPEM, ClientKey: client.KeyPEM}
			}},
		probe: func() []int64 {
			return []int64{check.all.Load(), check.ok.Load(), plainTLS.conns.Load() + mutual.conns.Load()}
		},
	}
	rounds, err := b.paired(ctx, p)
	if err != nil {
		return failed(name, what, err)
	}
	return pairResult(p, rounds, b.sz.s1Backlog, fmt.Sprintf(
		"POSTs with a client certificate: %s of %s over TLS, %s of %s over mTLS; TLS connections (handshakes): %d over TLS, %d over mTLS; HTTP/1.1 on both",
		count(float64(moved(rounds, 0, 1))), count(float64(moved(rounds, 0, 0))),
		count(float64(moved(rounds, 1, 1))), count(float64(moved(rounds, 1, 0))),
		moved(rounds, 0, 2), moved(rounds, 1, 2)))
}

// spanExport is S1s: S1 with a span per POST exported over OTLP/HTTP to a
// collector in this process, against no export.
func (b *bench) spanExport(ctx context.Context) result {
	const name, what = "S1s", "S1s drain, span export on (msg/s)"
	otlp := &collector{}
	ol, err := listen(otlp, nil)
	if err != nil {
		return failed(name, what, err)
	}
	defer ol.close()
	check := &checked{next: b.sink, carries: func(r *http.Request) bool { return r.Header.Get("Traceparent") != "" }}
	rl, err := listen(check, nil)
	if err != nil {
		return failed(name, what, err)
	}
	defer rl.close()
	p := pairing{name: name, label: "span export on ÷ off", target: 0.90,
		a: side{v: variant{name: name, what: what}, label: "export off", url: rl.url + "/r/0"},
		b: side{v: variant{name: name, what: what}, label: "export on", url: rl.url + "/r/0",
			environ: []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + ol.url}},
		probe: func() []int64 {
			return []int64{check.all.Load(), check.ok.Load(), otlp.requests.Load(), otlp.bytes.Load(), otlp.refused.Load()}
		},
	}
	rounds, err := b.paired(ctx, p)
	if err != nil {
		return failed(name, what, err)
	}
	on := moved(rounds, 1, 0)
	return pairResult(p, rounds, b.sz.s1Backlog, fmt.Sprintf(
		"POSTs with a traceparent: %s of %s off, %s of %s on; OTLP collector: %d requests, %s bytes (%.0f B per POST) in the drains with export on, %d requests and %d bytes with it off, %d refused",
		count(float64(moved(rounds, 0, 1))), count(float64(moved(rounds, 0, 0))),
		count(float64(moved(rounds, 1, 1))), count(float64(on)),
		moved(rounds, 1, 2), count(float64(moved(rounds, 1, 3))), float64(moved(rounds, 1, 3))/float64(max(on, 1)),
		moved(rounds, 0, 2), moved(rounds, 0, 3), moved(rounds, 0, 4)+moved(rounds, 1, 4)))
}

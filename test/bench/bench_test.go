package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jetstream-bridge/bridge/internal/testpki"
)

// The benchmark's figures are only as good as its instruments; these tests
// hold the instruments to what they claim, against the real kernel and a
// real loopback server. The scenarios themselves run through `make bench`.

func TestProcReadsThisProcess(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the bench reads /proc, which only Linux has")
	}
	pid := os.Getpid()
	before, err := cpuTime(pid)
	if err != nil {
		t.Fatal(err)
	}
	// Burn enough CPU to move utime by several ticks.
	deadline := time.Now().Add(300 * time.Millisecond)
	x := 0
	for time.Now().Before(deadline) {
		x++
	}
	after, err := cpuTime(pid)
	if err != nil {
		t.Fatal(err)
	}
	if after <= before {
		t.Fatalf("CPU time did not grow while spinning: %v → %v (%d loops)", before, after, x)
	}
	m, err := memoryOf(pid)
	if err != nil {
		t.Fatal(err)
	}
	if m.rss <= 0 || m.hwm < m.rss {
		t.Fatalf("memory = %+v, want 0 < VmRSS ≤ VmHWM", m)
	}
}

func TestParseStatCountsFromTheLastParenthesis(t *testing.T) {
	// A command name with spaces and a parenthesis must not shift fields.
	line := "4242 (we ird) (name) S 1 2 3 4 5 6 7 8 9 10 250 75 0 0 20 0 1 0"
	got, err := parseStat([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if want := 3250 * time.Millisecond; got != want {
		t.Fatalf("parseStat = %v, want %v (utime 250 + stime 75 ticks)", got, want)
	}
	if _, err := parseStat([]byte("4242 (short) S 1 2")); err == nil {
		t.Fatal("a truncated stat line was accepted")
	}
}

func TestParseStatusNeedsBothFigures(t *testing.T) {
	m, err := parseStatus([]byte("Name:\tbridge\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\n"))
	if err != nil || m.rss != 1<<20 || m.hwm != 2<<20 {
		t.Fatalf("parseStatus = %+v, %v", m, err)
	}
	if _, err := parseStatus([]byte("VmRSS:\t1024 kB\n")); err == nil {
		t.Fatal("status without VmHWM was accepted")
	}
}

// TestSinkRecordsFirstArrivals drives the sink over loopback the way the
// bridge and the baselines do: single events by webhook-id, a CloudEvents
// batch, a repeat, a stray, and a payload stamp.
func TestSinkRecordsFirstArrivals(t *testing.T) {
	s, err := newSink()
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	post := func(path, contentType, webhookID string, body []byte) {
		t.Helper()
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, s.url+path, bytes.NewReader(body))
		req.Header.Set("Content-Type", contentType)
		if webhookID != "" {
			req.Header.Set("Webhook-Id", webhookID)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			t.Fatalf("sink answered %d", resp.StatusCode)
		}
	}

	r := newRun(2, 3, 10, true)
	s.start(r)
	sent := time.Now().Add(-5 * time.Millisecond)
	stamp := []byte(strconv.FormatInt(sent.UnixNano(), 10) + " payload")
	post("/r/0", "application/octet-stream", "BENCH_S1-10", stamp)
	post("/r/0", "application/octet-stream", "BENCH_S1-10", stamp) // a repeat
	post("/r/0", "application/octet-stream", "BENCH_S1-99", stamp) // outside the run
	post("/r/1", "application/cloudevents-batch+json", "",
		[]byte(`[{"id":"BENCH_S1-10"},{"id":"BENCH_S1-11"},{"id":"BENCH_S1-12"}]`))
	post("/bare", "application/octet-stream", "", stamp)

	if got := r.distinct.Load(); got != 4 {
		t.Fatalf("distinct = %d, want 4", got)
	}
	if got := r.total.Load(); got != 6 {
		t.Fatalf("total = %d, want 6 (repeat and stray included)", got)
	}
	if r.stray.Load() != 1 || r.batches.Load() != 1 || r.singles.Load() != 3 || s.bare.Load() != 1 {
		t.Fatalf("stray %d batches %d singles %d bare %d, want 1 1 3 1",
			r.stray.Load(), r.batches.Load(), r.singles.Load(), s.bare.Load())
	}
	if got := r.extras(); got != "1 repeats, 1 strays" {
		t.Fatalf("extras = %q", got)
	}
	lat := r.latencies()
	if len(lat) != 1 || lat[0] < 5*time.Millisecond || lat[0] > time.Minute {
		t.Fatalf("latencies = %v, want one of at least 5 ms", lat)
	}
	select {
	case <-r.done:
		t.Fatal("run done with 4 of 6 deliveries")
	default:
	}
	post("/r/0", "application/octet-stream", "BENCH_S1-11", stamp)
	post("/r/0", "application/octet-stream", "BENCH_S1-12", stamp)
	select {
	case <-r.done:
	case <-time.After(5 * time.Second):
		t.Fatal("run not done with every delivery in")
	}
	if r.last.Load() == 0 {
		t.Fatal("the last arrival was not recorded")
	}
}

func TestPercentileIsNearestRank(t *testing.T) {
	ds := make([]time.Duration, 100)
	for i := range ds {
		ds[len(ds)-1-i] = time.Duration(i+1) * time.Millisecond
	}
	if p := percentile(ds, 50); p != 50*time.Millisecond {
		t.Errorf("p50 = %v", p)
	}
	if p := percentile(ds, 99); p != 99*time.Millisecond {
		t.Errorf("p99 = %v", p)
	}
	if p := percentile(ds[:1], 99); p != 100*time.Millisecond {
		t.Errorf("p99 of one = %v", p)
	}
}

func TestParseOnly(t *testing.T) {
	set, err := parseOnly("s1, S3,memory,s1d,r2")
	if err != nil || !set["S1"] || !set["S3"] || !set["MEM"] || !set["S1d"] || !set["R2"] || set["S2"] || set["S2d"] {
		t.Fatalf("parseOnly = %v, %v", set, err)
	}
	if _, err := parseOnly("S9"); err == nil || !strings.Contains(err.Error(), "S9") {
		t.Fatalf("unknown scenario: %v", err)
	}
	if all, _ := parseOnly(""); len(all) != len(scenarioNames) {
		t.Fatalf("empty -only selects %v", all)
	}
}

func TestCountGroupsThousands(t *testing.T) {
	for n, want := range map[float64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -1000: "-1,000"} {
		if got := count(n); got != want {
			t.Errorf("count(%v) = %q, want %q", n, got, want)
		}
	}
}

func TestMedianIsTheMiddleRoundOrTheFirstFailure(t *testing.T) {
	round := func(rate, bare float64) outcome {
		return outcome{d: drained{rate: rate}, bare: baseline{before: bareRun{rate: bare}, after: bareRun{rate: bare / 2}}}
	}
	rounds := []outcome{round(90, 100), round(70, 100), round(40, 50)}
	if got := median(rounds); got.ratio() != 0.8 {
		t.Errorf("median of ratios 0.9, 0.7, 0.8 = %v, want 0.8", got.ratio())
	}
	failed := failed("S1", "S1 drain (msg/s)", errors.New("sink gone"))
	rounds = append(rounds, outcome{early: &failed})
	if got := median(rounds); got.early == nil {
		t.Errorf("median of rounds with a failure = ratio %v, want the failure", got.ratio())
	}
}

func TestSameRunRatesTheDefaultStreamAgainstAllowDirect(t *testing.T) {
	results := sameRun([]result{
		{name: "S1", figure: 1000, vsBare: 1.0, rows: []row{{what: s1.what}}},
		{name: "S1d", figure: 900, vsBare: 0.99, rows: []row{{what: s1d.what}}},
		{name: "S2d", figure: 500, rows: []row{{what: s2d.what}, {what: "S2d journal reads per message"}}},
	}, comparisons[:2]...)
	d := results[1].rows
	if len(d) != 3 || d[1].ratio != "0.90" || d[1].met != "no" || d[1].bridge != "900" || d[1].baseline != "1,000" {
		t.Fatalf("S1d rows = %+v, want its figure then a ratio row of 0.90, not met", d)
	}
	if d[2].ratio != "0.99" || d[2].met != "yes" || d[2].bridge != "0.99" || d[2].baseline != "1.00" {
		t.Fatalf("S1d's ratio row against the bare loops = %+v, want 0.99, met", d[2])
	}
	if n := len(results[2].rows); n != 2 {
		t.Fatalf("S2d has %d rows without S2 in the run, want its own 2", n)
	}

	results = sameRun([]result{failed("S2", s2.what, errors.New("sink gone")), {name: "S2d", figure: 500, rows: []row{{what: s2d.what}}}},
		comparisons[1])
	if d := results[1].rows; len(d) != 3 || d[1].met != "n/a" || d[1].ratio != "-" {
		t.Fatalf("S2d rows beside a failed S2 = %+v, want a ratio row of n/a", d)
	}
}

func TestPairResultIsTheMedianRound(t *testing.T) {
	round := func(a, b float64) pairRound {
		return pairRound{d: [2]drained{{rate: a}, {rate: b}}, moved: [2][]int64{{0, 5}, {2, 7}}}
	}
	p := pairing{name: "S1h", label: "3 headers + oauth2 ÷ plain", target: 0.95, a: side{label: "plain"}, b: side{label: "options"}}
	rounds := []pairRound{round(1000, 990), round(1000, 900), round(800, 760)}
	r := pairResult(p, rounds, 100, "counted")
	if len(r.rows) != 1 {
		t.Fatalf("rows = %+v, want one", r.rows)
	}
	x := r.rows[0]
	if x.what != "S1h 3 headers + oauth2 ÷ plain, same run" || x.ratio != "0.95" || x.met != "yes" || x.bridge != "760" || x.baseline != "800" || x.target != "≥ 0.95" {
		t.Fatalf("row = %+v, want the median round's 760 against 800, 0.95, met", x)
	}
	for _, want := range []string{"median of 3 rounds: 0.99 (990 against 1000 msg/s), 0.90 (900 against 1000 msg/s), 0.95", "counted"} {
		if !strings.Contains(r.line, want) {
			t.Errorf("line %q lacks %q", r.line, want)
		}
	}
	if got := moved(rounds, 1, 1); got != 21 {
		t.Errorf("moved(b, 1) = %d, want 21", got)
	}
	if r := pairResult(p, rounds[1:2], 100, ""); r.rows[0].met != "no" {
		t.Errorf("one round of 0.90 against a target of 0.95: met = %q", r.rows[0].met)
	}
}

func TestParseOnlyTakesTheReceiverOptionScenarios(t *testing.T) {
	set, err := parseOnly("s1h,S1t,s1s")
	if err != nil || !set["S1h"] || !set["S1m"] || !set["S1s"] || len(set) != 3 {
		t.Fatalf("parseOnly = %v, %v; want S1h, S1m (for S1t) and S1s", set, err)
	}
}

func TestCleanEnvDropsTheBridgesAndOpenTelemetrysVariables(t *testing.T) {
	got := withoutBridgeVars([]string{"PATH=/bin", "OTEL_EXPORTER_OTLP_ENDPOINT=http://collector:4318", "OTEL_SDK_DISABLED=false",
		"BRIDGE_NATS_URL=nats://x", "NATS_URL=nats://y", "BRIDGE_ATTEMPT_LOG=false", "HOME=/root"})
	want := []string{"PATH=/bin", "BRIDGE_ATTEMPT_LOG=false", "HOME=/root"}
	if !slices.Equal(got, want) {
		t.Fatalf("environment = %q, want %q", got, want)
	}
}

// TestTokenServerGrantsBasicAuthOnly holds S1h's token endpoint to the
// grant it claims to make, over loopback.
func TestTokenServerGrantsBasicAuthOnly(t *testing.T) {
	ts := &tokenServer{id: "c", secret: "s", token: "tok"}
	l, err := listen(ts, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	post := func(form url.Values, basic bool) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, l.url+"/token", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if basic {
			req.SetBasicAuth("c", "s")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := post(url.Values{"grant_type": {"client_credentials"}}, true)
	if code != http.StatusOK || body != `{"access_token":"tok","token_type":"Bearer","expires_in":3600}` {
		t.Fatalf("Basic-authenticated grant: %d %s", code, body)
	}
	if code, _ := post(url.Values{"grant_type": {"client_credentials"}, "client_id": {"c"}, "client_secret": {"s"}}, false); code != http.StatusUnauthorized {
		t.Fatalf("credentials in the form: %d, want 401", code)
	}
	if code, _ := post(url.Values{"grant_type": {"password"}}, true); code != http.StatusBadRequest {
		t.Fatalf("another grant: %d, want 400", code)
	}
	if ts.granted.Load() != 1 || ts.refused.Load() != 2 {
		t.Fatalf("granted %d refused %d, want 1 and 2", ts.granted.Load(), ts.refused.Load())
	}
}

// TestTLSListenerDemandsTheClientCertificate drives S1m's receiver as the
// bridge does, HTTP/2 attempted: it answers over HTTP/1.1 to a client
// presenting a certificate of the run's CA, counts it, and refuses one
// presenting none.
func TestTLSListenerDemandsTheClientCertificate(t *testing.T) {
	ca, err := testpki.New("test CA")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := ca.Server("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	cl, err := ca.Client("bridge")
	if err != nil {
		t.Fatal(err)
	}
	check := &checked{next: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }),
		carries: func(r *http.Request) bool { return r.TLS != nil && len(r.TLS.PeerCertificates) == 1 }}
	l, err := listen(check, &tls.Config{Certificates: []tls.Certificate{srv.TLS}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.Pool})
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	post := func(certs []tls.Certificate) (*http.Response, error) {
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool, Certificates: certs}, ForceAttemptHTTP2: true}
		defer tr.CloseIdleConnections()
		return (&http.Client{Transport: tr}).Post(l.url+"/r/0", "application/octet-stream", strings.NewReader("x"))
	}
	resp, err := post([]tls.Certificate{cl.TLS})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent || resp.ProtoMajor != 1 {
		t.Fatalf("with a client certificate: %d over %s, want 204 over HTTP/1.1", resp.StatusCode, resp.Proto)
	}
	if resp, err := post(nil); err == nil {
		resp.Body.Close()
		t.Fatalf("without a client certificate: %d, want a refused handshake", resp.StatusCode)
	}
	if check.all.Load() != 1 || check.ok.Load() != 1 || l.conns.Load() != 2 {
		t.Fatalf("POSTs %d, with the certificate %d, connections %d; want 1, 1, 2", check.all.Load(), check.ok.Load(), l.conns.Load())
	}
}

func TestCollectorCountsTraceExports(t *testing.T) {
	c := &collector{}
	l, err := listen(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	for _, path := range []string{"/v1/traces", "/v1/traces", "/v1/metrics"} {
		resp, err := http.Post(l.url+path, "application/x-protobuf", bytes.NewReader(make([]byte, 100)))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if path == "/v1/traces" && (resp.StatusCode != http.StatusOK || len(b) != 0) {
			t.Fatalf("export answered %d with %d bytes, want 200 and none", resp.StatusCode, len(b))
		}
	}
	if c.requests.Load() != 2 || c.bytes.Load() != 200 || c.refused.Load() != 1 {
		t.Fatalf("requests %d bytes %d refused %d, want 2, 200, 1", c.requests.Load(), c.bytes.Load(), c.refused.Load())
	}
}

func TestARatioJustBelowItsTargetShowsThatItMisses(t *testing.T) {
	for _, c := range []struct {
		r, target float64
		want      string
	}{
		{0.9479, 0.95, "0.948"},
		{0.9499, 0.95, "0.9499"},
		{0.951, 0.95, "0.95"},
		{0.95, 0.95, "0.95"},
		{0.86, 0.90, "0.86"},
		{1.2, 0.95, "1.20"},
	} {
		if got := ratioFor(c.r, c.target); got != c.want {
			t.Errorf("ratioFor(%v, %v) = %q, want %q", c.r, c.target, got, c.want)
		}
	}
	// And above a ceiling (S4's latencies).
	for r, want := range map[float64]string{1.5004: "1.5004", 1.503: "1.503", 1.4996: "1.50", 8.3: "8.30"} {
		if got := ratioAbove(r, 1.5); got != want {
			t.Errorf("ratioAbove(%v, 1.5) = %q, want %q", r, got, want)
		}
	}
}

package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetstream-bridge/bridge/internal/testutil"
	"github.com/jetstream-bridge/bridge/projection"
	"github.com/jetstream-bridge/bridge/projection/cloudevents"
	"github.com/jetstream-bridge/bridge/webhook"
)

// TestMain lets the test binary be a baseline process, as the bench binary
// is: startChild runs os.Executable(), which under `go test` is this
// binary.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == childArg {
		os.Exit(childMain(os.Args[2:]))
	}
	os.Exit(m.Run())
}

func TestBarePOSTsRunInAChildProcessTheSinkCounts(t *testing.T) {
	s, err := newSink()
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	e := &env{sink: s}

	run, err := e.barePOSTs(context.Background(), 300, 3, kib, wire{})
	if err != nil {
		t.Fatal(err)
	}
	if run.posts != 300 || run.rate <= 0 || run.cpu < 0 {
		t.Fatalf("bare run = %+v, want 300 timed POSTs at a positive rate", run)
	}
	// 300 timed, and one untimed warm-up per worker.
	if got := s.bare.Load(); got != 303 {
		t.Fatalf("sink counted %d bare POSTs, want 303", got)
	}
}

func TestBarePOSTsFailWhenTheSinkRefuses(t *testing.T) {
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer refusing.Close()
	s := &sink{url: refusing.URL}
	e := &env{sink: s}
	_, err := e.barePOSTs(context.Background(), 10, 1, kib, wire{})
	if err == nil || !strings.Contains(err.Error(), "sink answered 503") {
		t.Fatalf("baseline against a refusing sink: err = %v, want the sink's 503", err)
	}
}

// TestBareConsumerDeliversNewMessagesToTheSink runs the live baseline in
// its own process against a real JetStream server: it must see only what
// is published once it is ready, POST each message once with the
// webhook-id the sink keys on, and let the sink time each one.
func TestBareConsumerDeliversNewMessagesToTheSink(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := testutil.NATS(t, filepath.Join(t.TempDir(), "nats"), -1)
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	sk, err := newSink()
	if err != nil {
		t.Fatal(err)
	}
	defer sk.close()
	e := &env{ns: ns, nc: nc, js: js, sink: sk, natsURL: ns.ClientURL()}

	st, err := e.newStream(ctx, "t", allowDirect)
	if err != nil {
		t.Fatal(err)
	}
	subject := st.prefix + ".bare"
	// Published before the consumer exists: it must not be delivered.
	if err := e.publishOne(ctx, subject); err != nil {
		t.Fatal(err)
	}
	r := newRun(1, 20, 2, true)
	sk.start(r)

	c, err := e.bareConsumer(ctx, st, subject)
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		if err := e.publishOne(ctx, subject); err != nil {
			c.kill()
			t.Fatal(err)
		}
	}
	if err := waitCount(ctx, r, 20, time.Minute); err != nil {
		c.kill()
		t.Fatal(err)
	}
	rep, err := c.finish(stallAfter)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Posts != 20 || rep.Failed != 0 {
		t.Fatalf("baseline consumer reported %d POSTs, %d failed; want 20, 0", rep.Posts, rep.Failed)
	}
	if got := r.extras(); got != "0 repeats" {
		t.Fatalf("sink saw %s, want each new message once and the earlier one never", got)
	}
	if lat := r.latencies(); len(lat) != 20 {
		t.Fatalf("sink timed %d deliveries, want 20", len(lat))
	}
}

// TestBaselinePOSTsCarryTheBridgesHeaders sends one message through the
// bridge's own sender and one bare POST with wireHeaders to the same
// receiver: what arrives must be the same, or the baselines' "same bytes"
// would not be.
func TestBaselinePOSTsCarryTheBridgesHeaders(t *testing.T) {
	got := make(chan http.Header, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	ctx := context.Background()
	const stream, subject, seq = "BENCH_S1", "bench.s1.orders", 100_000
	at := time.Unix(1_764_511_105, 0)
	body := bytes.Repeat([]byte{'x'}, kib)

	rec := projection.Record{Stream: stream, Seq: seq, Subject: subject, Time: at, Data: body}
	res, err := cloudevents.New(cloudevents.WithStream(stream)).Project(projection.Target{ID: "r"}, &rec)
	if err != nil {
		t.Fatal(err)
	}
	sender := webhook.NewSender()
	defer sender.Close()
	if o := sender.Send(ctx, webhook.Request{Namespace: projection.Outbox, URL: srv.URL, Message: res.Messages[0], At: at}); o.Status != http.StatusNoContent {
		t.Fatalf("bridge's sender: %+v", o)
	}
	bridge := <-got

	h, err := wireHeaders(stream, subject, seq, body, at)
	if err != nil {
		t.Fatal(err)
	}
	client := bareClient()
	defer client.CloseIdleConnections()
	if err := post(ctx, client, srv.URL, body, h); err != nil {
		t.Fatal(err)
	}
	bare := <-got

	if len(bridge) < 10 {
		t.Fatalf("the bridge sent only %d headers: %v", len(bridge), bridge)
	}
	for k := range mergeKeys(bridge, bare) {
		if !slices.Equal(bridge[k], bare[k]) {
			t.Errorf("%s: the bridge sent %q, the baseline %q", k, bridge[k], bare[k])
		}
	}
}

func mergeKeys(a, b http.Header) map[string]bool {
	keys := make(map[string]bool, len(a)+len(b))
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	return keys
}

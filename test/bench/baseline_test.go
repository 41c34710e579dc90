package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
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

	run, err := e.barePOSTs(context.Background(), 300, 3, kib)
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
	_, err := e.barePOSTs(context.Background(), 10, 1, kib)
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
	ns, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true,
		StoreDir: filepath.Join(t.TempDir(), "nats"), NoSigs: true, NoLog: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	defer func() {
		ns.Shutdown()
		ns.WaitForShutdown()
	}()
	if !ns.ReadyForConnections(15 * time.Second) {
		t.Fatal("nats-server not ready")
	}
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
	e := &env{ns: ns, nc: nc, js: js, sink: sk}

	st, err := e.newStream(ctx, "t")
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

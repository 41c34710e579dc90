package journal_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/jetstream-bridge/bridge/internal/testutil"
	"github.com/jetstream-bridge/bridge/journal"
	"github.com/jetstream-bridge/bridge/projection"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// env is one embedded JetStream server with a client connection.
type env struct {
	t   testing.TB
	dir string
	srv *server.Server
	nc  *nats.Conn
	js  jetstream.JetStream
	ids int // message ids handed out, so none is deduplicated
}

func newEnv(t testing.TB) *env {
	t.Helper()
	e := &env{t: t, dir: t.TempDir()}
	e.srv = testutil.NATS(t, e.dir, -1)
	nc, err := nats.Connect(e.srv.ClientURL(),
		nats.ReconnectWait(20*time.Millisecond),
		nats.MaxReconnects(-1),
		nats.ReconnectJitter(0, 0),
	)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	e.nc = nc
	if e.js, err = jetstream.New(nc); err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	// Before the server stops: cleanups run last registered first.
	t.Cleanup(e.nc.Close)
	return e
}

// restart stops the server and starts it again on the same store and port.
func (e *env) restart() {
	e.t.Helper()
	port := e.srv.Addr().(*net.TCPAddr).Port
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
	e.srv = testutil.NATS(e.t, e.dir, port)
}

func (e *env) stream(cfg jetstream.StreamConfig) jetstream.Stream {
	e.t.Helper()
	if cfg.Subjects == nil {
		cfg.Subjects = []string{"journal.>"}
	}
	// A stream just deleted has its files removed by the server in the
	// background; a create that races that removal fails and is retried.
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, err := e.js.CreateStream(context.Background(), cfg)
		if err == nil {
			return s
		}
		if !strings.Contains(err.Error(), "error creating store") || time.Now().After(deadline) {
			e.t.Fatalf("create stream %s: %v", cfg.Name, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (e *env) publish(subject, data string, hdr nats.Header) uint64 {
	e.t.Helper()
	ack, err := e.js.PublishMsg(context.Background(), &nats.Msg{Subject: subject, Data: []byte(data), Header: hdr})
	if err != nil {
		e.t.Fatalf("publish %s: %v", subject, err)
	}
	return ack.Sequence
}

func (e *env) reader(stream string, opts ...journal.Option) *journal.Reader {
	e.t.Helper()
	r, err := journal.NewReader(e.nc, stream, opts...)
	if err != nil {
		e.t.Fatalf("reader: %v", err)
	}
	e.t.Cleanup(func() { r.Close() })
	return r
}

// streamKinds are the two ways a journal stream is read: batched direct
// gets when it allows them, pull consumers when it does not. Every read
// test runs on both and must see the same pages, skips and verdicts.
var streamKinds = []struct {
	name        string
	allowDirect bool
}{
	{"allow_direct", true},
	{"default", false},
}

// eachStreamKind runs test once per stream kind.
func eachStreamKind(t *testing.T, test func(t *testing.T, allowDirect bool)) {
	for _, k := range streamKinds {
		t.Run(k.name, func(t *testing.T) { test(t, k.allowDirect) })
	}
}

// published is what a test sent, to compare with what a reader returns.
type published struct {
	seq     uint64
	subject string
	data    string
	hdr     nats.Header
}

// interleave publishes n messages alternating between journal.orders.<i>
// and journal.audit.<i>; every third one carries headers.
func (e *env) interleave(n int) []published {
	e.t.Helper()
	var out []published
	for i := range n {
		subj := fmt.Sprintf("journal.orders.%d", i)
		if i%2 == 1 {
			subj = fmt.Sprintf("journal.audit.%d", i)
		}
		var hdr nats.Header
		if i%3 == 0 {
			e.ids++
			hdr = nats.Header{"Nats-Msg-Id": {fmt.Sprintf("id-%d", e.ids)}, "x-Trace": {"a", "b"}}
		}
		data := fmt.Sprintf("payload %d", i)
		out = append(out, published{seq: e.publish(subj, data, hdr), subject: subj, data: data, hdr: hdr})
	}
	return out
}

func matching(all []published, filter string) []published {
	var out []published
	for _, p := range all {
		if journal.SubjectMatches(filter, p.subject) {
			out = append(out, p)
		}
	}
	return out
}

// drain reads filter from from in pages of size until caught up and
// returns every record and the number of pages.
func drain(t testing.TB, r *journal.Reader, filter string, from uint64, size int) ([]projection.Record, int) {
	t.Helper()
	recs, pages, err := drainE(r, filter, from, size)
	if err != nil {
		t.Fatal(err)
	}
	return recs, pages
}

func drainE(r *journal.Reader, filter string, from uint64, size int) ([]projection.Record, int, error) {
	var all []projection.Record
	for pages := 1; pages < 10000; pages++ {
		pg, err := r.Read(context.Background(), filter, from, size)
		if err != nil {
			return nil, pages, fmt.Errorf("read %s from %d: %w", filter, from, err)
		}
		if len(pg.Records) > size {
			return nil, pages, fmt.Errorf("page of %d records, asked for %d", len(pg.Records), size)
		}
		all = append(all, pg.Records...)
		if pg.CaughtUp {
			return all, pages, nil
		}
		if pg.Next <= from {
			return nil, pages, fmt.Errorf("read from %d did not move: next %d", from, pg.Next)
		}
		from = pg.Next
	}
	return nil, 0, fmt.Errorf("read of %s never caught up", filter)
}

func sameRecords(t testing.TB, stream string, got []projection.Record, want []published) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Stream != stream || g.Seq != w.seq || g.Subject != w.subject || string(g.Data) != w.data {
			t.Fatalf("record %d = {%s %d %s %q}, want {%s %d %s %q}", i, g.Stream, g.Seq, g.Subject, g.Data, stream, w.seq, w.subject, w.data)
		}
		if g.Time.IsZero() || time.Since(g.Time) > time.Minute {
			t.Fatalf("record %d has time %v", g.Seq, g.Time)
		}
		if !sameHeader(g.Header, w.hdr) {
			t.Fatalf("record %d header %v, want %v", g.Seq, g.Header, w.hdr)
		}
	}
}

func sameHeader(got map[string][]string, want nats.Header) bool {
	if len(got) != len(want) {
		return false
	}
	for k, wv := range want {
		gv := got[k]
		if len(gv) != len(wv) {
			return false
		}
		for i := range wv {
			if gv[i] != wv[i] {
				return false
			}
		}
	}
	return true
}

// debugLogger logs everything into out, for a test to read.
func debugLogger(out *testutil.SyncBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

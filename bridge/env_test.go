package bridge_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetstream-bridge/bridge/bridge"
	"github.com/jetstream-bridge/bridge/cursor"
	"github.com/jetstream-bridge/bridge/internal/testutil"
	"github.com/jetstream-bridge/bridge/journal"
	"github.com/jetstream-bridge/bridge/projection"
	"github.com/jetstream-bridge/bridge/webhook"
)

const stream = "JOURNAL"

// env is one real stack: an embedded nats-server with JetStream, the
// journal reader, a bbolt store in a temporary directory and the real
// sender. Only the projection is a plain pass-through.
type env struct {
	t      testing.TB
	dir    string
	srv    *server.Server
	nc     *nats.Conn
	js     jetstream.JetStream
	reader *journal.Reader
	db     *cursor.DB
	sender *webhook.Sender
	// shape, when set, edits every registration the env creates.
	shape func(*cursor.Config)
}

func newEnv(t testing.TB, streamOpts ...func(*jetstream.StreamConfig)) *env {
	t.Helper()
	e := &env{t: t, dir: t.TempDir()}
	e.srv = testutil.NATS(t, filepath.Join(e.dir, "nats"), -1)
	var err error
	if e.nc, err = nats.Connect(e.srv.ClientURL()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.nc.Close)
	if e.js, err = jetstream.New(e.nc); err != nil {
		t.Fatal(err)
	}
	cfg := jetstream.StreamConfig{Name: stream, Subjects: []string{"journal.>"}, AllowDirect: true}
	for _, o := range streamOpts {
		o(&cfg)
	}
	ctx := context.Background()
	if _, err := e.js.CreateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if e.reader, err = journal.NewReader(e.nc, stream); err != nil {
		t.Fatal(err)
	}
	e.openStore()
	e.sender = webhook.NewSender(webhook.WithTimeout(2 * time.Second))
	t.Cleanup(e.sender.Close)
	return e
}

func (e *env) openStore() {
	db, err := cursor.Open(filepath.Join(e.dir, "bridge.db"))
	if err != nil {
		e.t.Fatal(err)
	}
	e.db = db
	e.t.Cleanup(func() { _ = db.Close() })
}

func (e *env) publish(subject, data string) uint64 {
	e.t.Helper()
	ack, err := e.js.Publish(context.Background(), subject, []byte(data))
	if err != nil {
		e.t.Fatal(err)
	}
	return ack.Sequence
}

func (e *env) worker(opts ...bridge.Option) *bridge.Worker {
	e.t.Helper()
	return e.workerFor(passThrough{}, opts...)
}

func (e *env) workerFor(p projection.Projection, opts ...bridge.Option) *bridge.Worker {
	e.t.Helper()
	w, err := bridge.New(e.db, e.reader, e.sender, p, opts...)
	if err != nil {
		e.t.Fatal(err)
	}
	return w
}

// register creates an outbox registration reading from the first message.
func (e *env) register(id, url, subject string) cursor.Registration {
	e.t.Helper()
	return e.registerNS(id, "outbox", url, subject, t0)
}

func (e *env) registerNS(id, ns, url, subject string, due time.Time) cursor.Registration {
	e.t.Helper()
	cfg := cursor.Config{ID: id, Namespace: ns, Subject: subject, URL: url}
	if e.shape != nil {
		e.shape(&cfg)
	}
	r, _, err := e.db.Create(context.Background(), cursor.Registration{
		Config:        cfg,
		NextSeq:       1,
		NextAttemptAt: due,
	}, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

func (e *env) get(id string) cursor.Registration {
	e.t.Helper()
	r, err := e.db.Get(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

func (e *env) sweep(w *bridge.Worker, at time.Time, limit int) bridge.Report {
	e.t.Helper()
	rep, err := w.Sweep(context.Background(), at, limit)
	if err != nil {
		e.t.Fatal(err)
	}
	return rep
}

// t0 is a fixed sweep clock; schedules are asserted relative to it.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// passThrough sends each journal message as it is, with id
// <stream>-<seq>. A message whose data is "poison" cannot be projected.
type passThrough struct{}

func (passThrough) Namespace() projection.Namespace { return projection.Outbox }

func (passThrough) Project(_ projection.Target, r *projection.Record) (projection.Result, error) {
	if string(r.Data) == "poison" {
		return projection.Result{}, errors.New("payload is poison")
	}
	return projection.Result{Messages: []projection.Message{{
		ID:     fmt.Sprintf("%s-%d", r.Stream, r.Seq),
		Header: http.Header{"Content-Type": {"text/plain"}},
		Body:   r.Data,
	}}}, nil
}

// delivery is one request a receiver saw.
type delivery struct {
	id   string
	body string
}

// receiver is a loopback HTTP server answering with a programmable status.
type receiver struct {
	*httptest.Server
	mu     sync.Mutex
	got    []delivery
	answer func(n int, w http.ResponseWriter) // n counts requests from 0
}

func newReceiver(t *testing.T, answer func(n int, w http.ResponseWriter)) *receiver {
	rc := &receiver{answer: answer}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		n := len(rc.got)
		rc.got = append(rc.got, delivery{id: r.Header.Get("webhook-id"), body: string(body)})
		answer := rc.answer
		rc.mu.Unlock()
		if answer == nil {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		answer(n, w)
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) deliveries() []delivery {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]delivery(nil), rc.got...)
}

func (rc *receiver) bodies() []string {
	var out []string
	for _, d := range rc.deliveries() {
		out = append(out, d.body)
	}
	return out
}

func status(code int) func(int, http.ResponseWriter) {
	return func(_ int, w http.ResponseWriter) { w.WriteHeader(code) }
}

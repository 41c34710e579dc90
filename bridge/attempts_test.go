package bridge_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/jetstream-bridge/bridge/attempt"
	"github.com/jetstream-bridge/bridge/bridge"
	"github.com/jetstream-bridge/bridge/cursor"
	"github.com/jetstream-bridge/bridge/webhook"
)

// attemptLog opens the attempt log on e's server and gives e a sender that
// keeps answers' bodies, as `bridge run` does with the log on.
func (e *env) attemptLog(timeout time.Duration) *attempt.Log {
	e.t.Helper()
	l, err := attempt.Open(context.Background(), e.nc, attempt.Config{Stream: "ATTEMPTS"})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { l.Close(context.Background()) })
	e.sender = webhook.NewSender(webhook.WithTimeout(timeout), webhook.WithResponseBody(attempt.MaxResponse))
	e.t.Cleanup(e.sender.Close)
	return l
}

// attemptsOf waits for n attempts for seq in the log: it is written
// asynchronously.
func attemptsOf(t *testing.T, l *attempt.Log, seq uint64, n int) []attempt.Attempt {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err := l.Sequence(context.Background(), seq)
		if err == nil && len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d attempts for %d after 5s, want %d: %+v, %v", len(got), seq, n, got, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestRetriesAreLoggedNewestFirst(t *testing.T) {
	e := newEnv(t)
	l := e.attemptLog(2 * time.Second)
	rc := newReceiver(t, func(n int, w http.ResponseWriter) {
		if n < 2 {
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, "database is down")
			return
		}
		_, _ = io.WriteString(w, `{"ok":true}`)
	})
	e.register("billing", rc.URL, "journal.>")
	seq := e.publish("journal.orders", "a")
	w := e.worker(bridge.WithRecorder(l))
	for i := range 3 {
		e.sweep(w, t0.Add(time.Duration(i)*time.Hour), 10)
	}
	got := attemptsOf(t, l, seq, 3)
	ids := rc.deliveries()
	if len(ids) != 3 {
		t.Fatalf("receiver got %d POSTs, want 3", len(ids))
	}
	want := []struct {
		n                          uint32
		outcome, trigger, response string
		status                     int
	}{
		{3, "2xx", "retry", `{"ok":true}`, 200},
		{2, "5xx", "retry", "database is down", 500},
		{1, "5xx", "delivery", "database is down", 500},
	}
	for i, w := range want {
		a := got[i]
		if a.Attempt != w.n || a.Outcome != w.outcome || a.Trigger != w.trigger || a.Response != w.response || a.Status != w.status {
			t.Errorf("attempt %d = %+v, want %+v", i, a, w)
		}
		if a.Registration != "billing" || a.Seq != seq || a.Index != 0 || a.WebhookID != ids[i].id || a.DurationMs < 0 {
			t.Errorf("attempt %d = %+v; want billing, seq %d, webhook-id %q", i, a, seq, ids[i].id)
		}
		if (a.Error == "") != (a.Outcome == "2xx") {
			t.Errorf("attempt %d: error %q with outcome %s", i, a.Error, a.Outcome)
		}
	}
}

func TestFailuresAreClassified(t *testing.T) {
	e := newEnv(t)
	l := e.attemptLog(200 * time.Millisecond)
	// A port nobody listens on refuses the connection.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body) // then the server notices the client leave
		<-r.Context().Done()
	}))
	defer hang.Close()
	huge := newReceiver(t, func(_ int, w http.ResponseWriter) {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(strings.Repeat("x", 1<<20)))
	})
	e.register("refused", closed, "journal.a")
	e.register("hang", hang.URL, "journal.b")
	e.register("huge", huge.URL, "journal.c")
	sa, sb, sc := e.publish("journal.a", "1"), e.publish("journal.b", "2"), e.publish("journal.c", "3")
	e.sweep(e.worker(bridge.WithRecorder(l)), t0, 10)
	if a := attemptsOf(t, l, sa, 1)[0]; a.Outcome != attempt.OutcomeTransport || a.Status != 0 || a.Error == "" {
		t.Errorf("refused connection: %+v, want transport", a)
	}
	if a := attemptsOf(t, l, sb, 1)[0]; a.Outcome != attempt.OutcomeTimeout || a.Error == "" || a.DurationMs < 200 {
		t.Errorf("a receiver hanging past the timeout: %+v, want timeout", a)
	}
	if a := attemptsOf(t, l, sc, 1)[0]; a.Outcome != attempt.Outcome4xx || a.Status != 400 || a.Response != strings.Repeat("x", 4096) {
		t.Errorf("1 MiB answer: outcome %s, status %d, response of %d bytes; want 4xx, 400, 4096", a.Outcome, a.Status, len(a.Response))
	}
}

func TestARewindsDeliveriesAreReplays(t *testing.T) {
	e := newEnv(t)
	l := e.attemptLog(2 * time.Second)
	rc := newReceiver(t, nil)
	e.register("a", rc.URL, "journal.>")
	s1, s2 := e.publish("journal.x", "1"), e.publish("journal.x", "2")
	w := e.worker(bridge.WithRecorder(l))
	e.sweep(w, t0, 10)
	attemptsOf(t, l, s2, 1)
	if _, err := e.db.Rewind(context.Background(), "a", s1, t0); err != nil {
		t.Fatal(err)
	}
	s3 := e.publish("journal.x", "3")
	e.sweep(w, t0.Add(time.Hour), 10)
	for _, c := range []struct {
		seq     uint64
		n       int
		trigger string
		attempt uint32
	}{{s1, 2, "replay", 2}, {s2, 2, "replay", 2}, {s3, 1, "delivery", 1}} {
		a := attemptsOf(t, l, c.seq, c.n)[0]
		if a.Trigger != c.trigger || a.Attempt != c.attempt {
			t.Errorf("seq %d after the rewind: %s #%d, want %s #%d", c.seq, a.Trigger, a.Attempt, c.trigger, c.attempt)
		}
	}
}

func TestAttemptsHoldNoSecret(t *testing.T) {
	e := newEnv(t)
	l := e.attemptLog(2 * time.Second)
	// The receiver echoes every header it got, credentials included.
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
		_ = r.Header.Write(w)
	}))
	defer echo.Close()
	const secret, creds = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "s3cr3t-credentials-123"
	_, _, err := e.db.Create(context.Background(), cursor.Registration{
		Config: cursor.Config{ID: "s", Namespace: "outbox", Subject: "journal.>", URL: echo.URL,
			Secret: secret, AuthScheme: "Bearer", AuthCredentials: creds},
		NextSeq: 1, NextAttemptAt: t0,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	seq := e.publish("journal.x", "1")
	e.sweep(e.worker(bridge.WithRecorder(l)), t0, 10)
	b, _ := json.Marshal(attemptsOf(t, l, seq, 1))
	for _, s := range []string{secret, strings.TrimPrefix(secret, "whsec_"), creds} {
		if strings.Contains(string(b), s) {
			t.Fatalf("an attempt shows %q: %s", s, b)
		}
	}
	if !strings.Contains(string(b), "[redacted]") {
		t.Fatalf("the echoed credentials are not shown redacted: %s", b)
	}
}

func TestRecordingNeverHoldsADeliveryBack(t *testing.T) {
	e := newEnv(t)
	l := e.attemptLog(2 * time.Second)
	if err := e.js.DeleteStream(context.Background(), "ATTEMPTS"); err != nil {
		t.Fatal(err)
	}
	rc := newReceiver(t, nil)
	e.register("a", rc.URL, "journal.>")
	for range 50 {
		e.publish("journal.x", "m")
	}
	e.sweep(e.worker(bridge.WithRecorder(l)), t0, 10)
	if n := len(rc.deliveries()); n != 50 {
		t.Fatalf("receiver got %d of 50 with the attempts stream gone", n)
	}
	if r := e.get("a"); r.NextSeq != 51 {
		t.Fatalf("cursor %d, want 51", r.NextSeq)
	}
	counter := l.Collectors()[0].(prometheus.Counter)
	deadline := time.Now().Add(10 * time.Second)
	for {
		var m dto.Metric
		_ = counter.Write(&m)
		if m.GetCounter().GetValue() >= 50 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("bridge_attempts_dropped_total = %v, want 50", m.GetCounter().GetValue())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// signedReceiver keeps each POST's headers and body.
type signedReceiver struct {
	*httptest.Server
	mu  sync.Mutex
	got []*http.Request
	bod [][]byte
}

func newSignedReceiver(t *testing.T) *signedReceiver {
	rc := &signedReceiver{}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.got, rc.bod = append(rc.got, r), append(rc.bod, b)
		rc.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rc.Close)
	return rc
}

func TestResendChangesNothingOfTheRegistration(t *testing.T) {
	e := newEnv(t)
	l := e.attemptLog(2 * time.Second)
	rc := newSignedReceiver(t)
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	ctx := context.Background()
	_, _, err := e.db.Create(ctx, cursor.Registration{
		Config:  cursor.Config{ID: "p", Namespace: "outbox", Subject: "journal.x", URL: rc.URL, Secret: secret},
		NextSeq: 1, NextAttemptAt: t0,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	seq := e.publish("journal.x", "1")
	other := e.publish("journal.y", "2")
	w := e.worker(bridge.WithRecorder(l))
	e.sweep(w, t0, 10)
	if err := e.db.Park(ctx, "p", "parked by the test"); err != nil {
		t.Fatal(err)
	}
	before := e.get("p")
	d := bridge.NewDaemon(e.db, e.reader, []*bridge.Worker{w})
	got, err := d.Resend(ctx, "p", seq)
	if err != nil || len(got) != 1 || got[0].Trigger != "resend" || got[0].Attempt != 2 || got[0].Outcome != "2xx" {
		t.Fatalf("Resend = %+v, %v; want one 2xx resend, attempt 2", got, err)
	}
	after := e.get("p")
	if after.NextSeq != before.NextSeq || after.State != cursor.Parked || after.LastError != before.LastError || after.Attempts != before.Attempts {
		t.Fatalf("after a resend the registration is %+v, was %+v", after, before)
	}
	rc.mu.Lock()
	reqs, bodies := rc.got, rc.bod
	rc.mu.Unlock()
	if len(reqs) != 2 || reqs[1].Header.Get("webhook-id") != reqs[0].Header.Get("webhook-id") || got[0].WebhookID != reqs[1].Header.Get("webhook-id") {
		t.Fatalf("resend's webhook-id differs from the delivery's")
	}
	key, _ := webhook.ParseSecret(secret)
	if err := webhook.VerifyRequest([][]byte{key}, reqs[1].Header, bodies[1], time.Now(), time.Minute); err != nil {
		t.Fatalf("resend's signature: %v", err)
	}
	for _, s := range []uint64{other, seq + 100} {
		if _, err := d.Resend(ctx, "p", s); !errors.Is(err, attempt.ErrNoMessage) {
			t.Errorf("Resend of %d = %v, want ErrNoMessage (off the filter or beyond the stream)", s, err)
		}
	}
	if _, err := d.Resend(ctx, "nobody", seq); !errors.Is(err, cursor.ErrNotFound) {
		t.Errorf("Resend to an unknown registration = %v", err)
	}
	if got := attemptsOf(t, l, seq, 2); got[0].Trigger != "resend" {
		t.Errorf("the log's newest attempt is %+v, want the resend", got[0])
	}
}

// A message deleted from the stream is not resent, though the journal's
// caches still hold it: the resend answers attempt.ErrNoMessage and POSTs
// nothing.
func TestResendOfADeletedMessageIsNoMessage(t *testing.T) {
	e := newEnv(t)
	rc := newReceiver(t, nil)
	e.register("d", rc.URL, "journal.>")
	seq := e.publish("journal.x", "deleted later")
	w := e.worker()
	e.sweep(w, t0, 10)
	d := bridge.NewDaemon(e.db, e.reader, []*bridge.Worker{w})
	ctx := context.Background()
	if _, err := d.Resend(ctx, "d", seq); err != nil {
		t.Fatalf("resend before the delete: %v", err)
	}
	posts := len(rc.deliveries())
	s, err := e.js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteMsg(ctx, seq); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Resend(ctx, "d", seq); !errors.Is(err, attempt.ErrNoMessage) {
		t.Fatalf("resend after the delete: %v, want attempt.ErrNoMessage", err)
	}
	if got := len(rc.deliveries()); got != posts {
		t.Fatalf("%d POSTs after the message was deleted", got-posts)
	}
}

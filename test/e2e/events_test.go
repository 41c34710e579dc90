package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// opEvent is an operational event as a NATS subscriber receives it.
type opEvent struct {
	subject     string
	contentType string
	raw         string
	ce          struct {
		SpecVersion string          `json:"specversion"`
		ID          string          `json:"id"`
		Source      string          `json:"source"`
		Type        string          `json:"type"`
		Time        time.Time       `json:"time"`
		Subject     string          `json:"subject"`
		Data        json.RawMessage `json:"data"`
	}
}

// eventLog collects every event published under a prefix.
type eventLog struct {
	mu     sync.Mutex
	events []opEvent
}

func subscribeEvents(t *testing.T, url, prefix string) *eventLog {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	l := &eventLog{}
	_, err = nc.Subscribe(prefix+".>", func(m *nats.Msg) {
		e := opEvent{subject: m.Subject, contentType: m.Header.Get("Content-Type"), raw: string(m.Data)}
		if err := json.Unmarshal(m.Data, &e.ce); err != nil {
			t.Errorf("event on %s is not JSON: %v: %s", m.Subject, err, m.Data)
		}
		l.mu.Lock()
		l.events = append(l.events, e)
		l.mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return l
}

// of returns the events published on subject, in order.
func (l *eventLog) of(subject string) []opEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []opEvent
	for _, e := range l.events {
		if e.subject == subject {
			out = append(out, e)
		}
	}
	return out
}

func (l *eventLog) all() []opEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]opEvent(nil), l.events...)
}

// scripted answers each POST with the next status of its script, then 204;
// failures carry Retry-After: 1, so a streak takes seconds.
func scripted(t *testing.T, statuses ...int) (*httptest.Server, *atomic.Int32) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := int(n.Add(1)) - 1
		code := 204
		if i < len(statuses) {
			code = statuses[i]
		}
		if code/100 != 2 {
			w.Header().Set("Retry-After", "1")
		}
		w.WriteHeader(code)
		fmt.Fprintf(w, "answer %d", i+1)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// TestOperationalEventsEachOnce drives every kind of CONTRACT §8 through
// the real binary and counts what a NATS subscriber receives: failing at
// the third consecutive failure and recovered at the 2xx after it, a 410
// parked and then unparked with no failing, created, deleted once for a
// double delete, completed, journal.skipped for a purge under a cursor and
// journal.recreated for a re-created stream. No event shows a secret, a
// token or credentials.
func TestOperationalEventsEachOnce(t *testing.T) {
	d := newDaemon(t, "--a2a-allow-loopback")
	d.start()
	url := "nats://" + d.natsAddr
	ev := subscribeEvents(t, url, "bridge.events")
	pub := newPublisher(t, url)

	const (
		secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
		token  = "tok-9b1c2f53d8e04a7f"
		creds  = "user:pa55-3f8a1c"
	)
	flaky, _ := scripted(t, 500, 500, 500)
	gone, _ := scripted(t, 410)
	done, _ := scripted(t)
	create := func(body map[string]any) {
		t.Helper()
		if code := d.api("POST", "/v1/registrations", body, nil); code != 201 {
			t.Fatalf("create %v: %d", body["id"], code)
		}
	}
	create(map[string]any{"id": "flaky", "namespace": "outbox", "subject": "journal.flaky.>", "url": flaky.URL, "secret": secret,
		"authentication": map[string]any{"scheme": "Basic", "credentials": creds}})
	create(map[string]any{"id": "gone", "namespace": "outbox", "subject": "journal.gone.>", "url": gone.URL,
		"authentication": map[string]any{"scheme": "Bearer", "credentials": token}})
	create(map[string]any{"id": "task", "namespace": "a2a", "taskId": "t1", "url": done.URL + "/a2a", "token": token})

	flakySeq := pub.publish(t, "journal.flaky.1", `{"n":1}`)
	goneSeq := pub.publish(t, "journal.gone.1", `{"n":1}`)
	pub.publish(t, "journal.a2a.t1", `{"statusUpdate":{"taskId":"t1","contextId":"c","status":{"state":"TASK_STATE_COMPLETED"}}}`)

	waitFor(t, 20*time.Second, "flaky to recover", func() bool { return len(ev.of("bridge.events.registration.recovered.flaky")) > 0 })
	waitFor(t, 10*time.Second, "gone to park", func() bool { return len(ev.of("bridge.events.registration.parked.gone")) > 0 })
	waitFor(t, 10*time.Second, "task to complete", func() bool { return len(ev.of("bridge.events.registration.completed.task")) > 0 })

	if out, code := d.cli("unpark", "gone"); code != 0 {
		t.Fatalf("unpark: %d %s", code, out)
	}
	waitFor(t, 10*time.Second, "gone to deliver after the unpark", func() bool {
		n, _ := d.registration("gone")["nextSeq"].(float64)
		return n > float64(goneSeq)
	})
	for range 2 {
		if code := d.api("DELETE", "/v1/registrations/task", nil, nil); code != 204 {
			t.Fatalf("delete: %d", code)
		}
	}
	waitFor(t, 5*time.Second, "the deleted event", func() bool { return len(ev.of("bridge.events.registration.deleted.task")) > 0 })

	failing := ev.of("bridge.events.registration.failing.flaky")
	if len(failing) != 1 {
		t.Fatalf("failing events for flaky: %d, want 1", len(failing))
	}
	var f struct {
		ID        string `json:"id"`
		Seq       uint64 `json:"seq"`
		Attempts  int    `json:"attempts"`
		LastError string `json:"lastError"`
		Signed    bool   `json:"signed"`
	}
	if err := json.Unmarshal(failing[0].ce.Data, &f); err != nil || f.ID != "flaky" || f.Seq != flakySeq || f.Attempts != 3 || f.LastError == "" || !f.Signed {
		t.Fatalf("failing data = %+v (%v): %s", f, err, failing[0].ce.Data)
	}
	c := failing[0]
	if c.contentType != "application/cloudevents+json" || c.ce.SpecVersion != "1.0" || c.ce.Type != "io.jetstream-bridge.registration.failing" ||
		c.ce.Subject != "flaky" || c.ce.ID == "" || !strings.HasPrefix(c.ce.Source, "/jetstream-bridge/") || c.ce.Time.IsZero() {
		t.Fatalf("failing event envelope: content type %q, %+v", c.contentType, c.ce)
	}
	counts := map[string]int{
		"registration.created.flaky": 1, "registration.created.gone": 1, "registration.created.task": 1,
		"registration.failing.flaky": 1, "registration.recovered.flaky": 1,
		"registration.parked.gone": 1, "registration.unparked.gone": 1,
		"registration.failing.gone": 0, "registration.recovered.gone": 0, "registration.parked.flaky": 0,
		"registration.completed.task": 1, "registration.deleted.task": 1,
	}
	for subject, want := range counts {
		if got := len(ev.of("bridge.events." + subject)); got != want {
			t.Errorf("%s: %d events, want %d", subject, got, want)
		}
	}
	var parked struct {
		Seq       uint64 `json:"seq"`
		State     string `json:"state"`
		LastError string `json:"lastError"`
		Auth      struct {
			Scheme string `json:"scheme"`
		} `json:"authentication"`
	}
	if err := json.Unmarshal(ev.of("bridge.events.registration.parked.gone")[0].ce.Data, &parked); err != nil ||
		parked.Seq != goneSeq || parked.State != "parked" || !strings.Contains(parked.LastError, "410") || parked.Auth.Scheme != "Bearer" {
		t.Fatalf("parked data = %+v (%v)", parked, err)
	}

	journalEvents(t, d, ev, pub)

	for _, e := range ev.all() {
		for _, s := range []string{secret, strings.TrimPrefix(secret, "whsec_"), token, creds, "pa55"} {
			if strings.Contains(e.raw, s) {
				t.Fatalf("event on %s shows %q: %s", e.subject, s, e.raw)
			}
		}
	}
}

// journalEvents drives journal.skipped (a purge under a failing cursor)
// and journal.recreated (the stream deleted and created again).
func journalEvents(t *testing.T, d *daemon, ev *eventLog, pub *publisher) {
	t.Helper()
	slow, calls := scripted(t, 503)
	if code := d.api("POST", "/v1/registrations", map[string]any{"id": "skipper", "namespace": "outbox",
		"subject": "journal.skip.>", "url": slow.URL}, nil); code != 201 {
		t.Fatalf("create skipper: %d", code)
	}
	first := pub.publish(t, "journal.skip.1", `{"n":1}`)
	waitFor(t, 10*time.Second, "skipper's first failure", func() bool { return calls.Load() == 1 })
	ctx := context.Background()
	stream, err := pub.js.Stream(ctx, "JOURNAL")
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	naming := func(id string) []opEvent {
		var out []opEvent
		for _, e := range ev.of("bridge.events.journal.skipped") {
			var j struct {
				Registrations []string `json:"registrations"`
			}
			if json.Unmarshal(e.ce.Data, &j) == nil && slices.Contains(j.Registrations, id) {
				out = append(out, e)
			}
		}
		return out
	}
	waitFor(t, 10*time.Second, "journal.skipped", func() bool { return len(naming("skipper")) > 0 })
	time.Sleep(1500 * time.Millisecond) // what one removal could still add
	skipped := naming("skipper")
	var j struct {
		Stream   string `json:"stream"`
		FirstSeq uint64 `json:"firstSeq"`
		LastSeq  uint64 `json:"lastSeq"`
		Count    int    `json:"count"`
	}
	if len(skipped) != 1 || json.Unmarshal(skipped[0].ce.Data, &j) != nil || j.Stream != "JOURNAL" || j.FirstSeq != first ||
		j.LastSeq < first || j.Count < 1 || skipped[0].ce.Subject != "JOURNAL" {
		t.Fatalf("journal.skipped naming skipper: %d events, data %+v", len(skipped), j)
	}
	if calls.Load() != 1 {
		t.Fatalf("skipper's receiver got %d POSTs; the purged message must not be sent", calls.Load())
	}

	cfg := stream.CachedInfo().Config
	if err := pub.js.DeleteStream(ctx, "JOURNAL"); err != nil {
		t.Fatal(err)
	}
	if _, err := pub.js.CreateStream(ctx, jetstream.StreamConfig{Name: cfg.Name, Subjects: cfg.Subjects, Storage: cfg.Storage}); err != nil {
		t.Fatal(err)
	}
	pub.publish(t, "journal.skip.2", `{"n":2}`)
	waitFor(t, 30*time.Second, "journal.recreated", func() bool { return len(ev.of("bridge.events.journal.recreated")) > 0 })
	time.Sleep(time.Second)
	if n := len(ev.of("bridge.events.journal.recreated")); n != 1 {
		t.Fatalf("journal.recreated: %d events, want 1", n)
	}
	var r struct {
		Registrations []string `json:"registrations"`
		Count         int      `json:"count"`
	}
	if err := json.Unmarshal(ev.of("bridge.events.journal.recreated")[0].ce.Data, &r); err != nil || r.Count != 3 || len(r.Registrations) != 3 {
		t.Fatalf("journal.recreated data = %+v (%v); want flaky, gone and skipper", r, err)
	}
	for _, id := range []string{"flaky", "skipper"} {
		if n := len(ev.of("bridge.events.registration.parked." + id)); n != 1 {
			t.Errorf("registration.parked.%s after the re-creation: %d events, want 1", id, n)
		}
	}
	if n := len(ev.of("bridge.events.registration.parked.gone")); n != 2 {
		t.Errorf("registration.parked.gone: %d events, want 2 (410, then the re-creation)", n)
	}
}

// TestEventsUnderTheJournalAreDelivered follows the README's alert recipe:
// with --events-prefix under the journal's subjects the events are stored
// in the journal, and a structured-mode registration on them receives
// another registration's parked event as that CloudEvent, its type,
// subject and time top-level members a chat webhook can read.
func TestEventsUnderTheJournalAreDelivered(t *testing.T) {
	d := newDaemon(t, "--events-prefix", "journal.ops")
	d.start()
	s := newSink(t)
	gone, _ := scripted(t, 410)
	if out, code := d.cli("register", "--id", "slack-alerts", "--namespace", "outbox", "--format", "structured",
		"--subject", "journal.ops.registration.parked.>", "--url", s.URL+"/alerts"); code != 0 {
		t.Fatalf("register the alerts: %d %s", code, out)
	}
	if code := d.api("POST", "/v1/registrations", map[string]any{"id": "billing", "namespace": "outbox",
		"subject": "journal.billing.>", "url": gone.URL}, nil); code != 201 {
		t.Fatalf("create billing: %d", code)
	}
	seq := newPublisher(t, "nats://"+d.natsAddr).publish(t, "journal.billing.1", `{"n":1}`)
	waitFor(t, 15*time.Second, "the parked event at the alerts receiver", func() bool { return len(s.requests()) > 0 })
	got := s.requests()[0]
	if ct := got.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/cloudevents+json") {
		t.Fatalf("content type %q, want a structured CloudEvent", ct)
	}
	var ce struct {
		Type    string `json:"type"`
		Subject string `json:"subject"`
		Time    string `json:"time"`
		Data    struct {
			ID        string `json:"id"`
			State     string `json:"state"`
			Seq       uint64 `json:"seq"`
			LastError string `json:"lastError"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(got.body), &ce); err != nil {
		t.Fatalf("delivered body is not JSON: %v: %s", err, got.body)
	}
	if ce.Type != "io.jetstream-bridge.registration.parked" || ce.Subject != "billing" || ce.Time == "" {
		t.Fatalf("delivered event: type %q, subject %q, time %q", ce.Type, ce.Subject, ce.Time)
	}
	if d := ce.Data; d.ID != "billing" || d.State != "parked" || d.Seq != seq || !strings.Contains(d.LastError, "410") {
		t.Fatalf("delivered event data = %+v: %s", d, got.body)
	}
}

package events_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"

	"github.com/jetstream-bridge/bridge/cursor"
	"github.com/jetstream-bridge/bridge/events"
	"github.com/jetstream-bridge/bridge/internal/testutil"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/nats-io/nats-server/v2/server.(*Server).Start.func1"))
}

// view is what the tests render a registration as: the id, the state and
// whether it is signed, never the secret.
type view struct {
	ID     string `json:"id"`
	State  string `json:"state"`
	Signed bool   `json:"signed"`
}

type fixture struct {
	pub  *events.Publisher
	db   *cursor.DB
	msgs chan *nats.Msg
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	srv := testutil.NATS(t, filepath.Join(t.TempDir(), "nats"), -1)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	msgs := make(chan *nats.Msg, 64)
	if _, err := nc.ChanSubscribe("ops.>", msgs); err != nil {
		t.Fatal(err)
	}
	db, err := cursor.Open(filepath.Join(t.TempDir(), "bridge.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	pub, err := events.New(nc, events.Config{Prefix: "ops", Source: "/jetstream-bridge/b1", Stream: "JOURNAL", Store: db,
		View: func(r cursor.Registration) any {
			return view{ID: r.ID, State: string(r.State), Signed: r.Secret != ""}
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pub.Close(context.Background()) })
	return &fixture{pub: pub, db: db, msgs: msgs}
}

func (f *fixture) next(t *testing.T) (*nats.Msg, map[string]any, map[string]any) {
	t.Helper()
	select {
	case m := <-f.msgs:
		var ce, data map[string]any
		if err := json.Unmarshal(m.Data, &ce); err != nil {
			t.Fatalf("event on %s is not JSON: %v", m.Subject, err)
		}
		b, _ := json.Marshal(ce["data"])
		_ = json.Unmarshal(b, &data)
		return m, ce, data
	case <-time.After(5 * time.Second):
		t.Fatal("no event within 5s")
		return nil, nil, nil
	}
}

func TestARegistrationEventIsAStructuredCloudEventOfTheStoredRow(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if _, _, err := f.db.Create(ctx, cursor.Registration{Config: cursor.Config{ID: "billing", Namespace: "outbox",
		Subject: "journal.>", URL: "https://example.com/hook", Secret: "whsec_topsecret"}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := f.db.Park(ctx, "billing", "POST: 410 Gone"); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 2, 1, 2, 3, 0, time.UTC)
	f.pub.Publish(events.Event{Kind: events.Parked, At: at, Registration: "billing", Seq: 42})

	m, ce, data := f.next(t)
	if m.Subject != "ops.registration.parked.billing" || m.Header.Get("Content-Type") != events.ContentType {
		t.Fatalf("subject %q, content type %q", m.Subject, m.Header.Get("Content-Type"))
	}
	if ce["specversion"] != "1.0" || ce["type"] != "io.jetstream-bridge.registration.parked" || ce["source"] != "/jetstream-bridge/b1" ||
		ce["subject"] != "billing" || ce["time"] != "2026-12-02T01:02:03Z" || ce["id"] == "" || ce["datacontenttype"] != "application/json" {
		t.Fatalf("envelope = %v", ce)
	}
	if data["id"] != "billing" || data["state"] != "parked" || data["signed"] != true || data["seq"] != 42.0 {
		t.Fatalf("data = %v", data)
	}
	if strings.Contains(string(m.Data), "topsecret") {
		t.Fatalf("the event shows the secret: %s", m.Data)
	}

	f.pub.Publish(events.Event{Kind: events.Parked, Registration: "billing", Seq: 42})
	_, again, _ := f.next(t)
	if again["id"] == ce["id"] {
		t.Fatalf("two occurrences share the id %v", ce["id"])
	}
}

func TestADeletedRegistrationShowsTheRowItWas(t *testing.T) {
	f := newFixture(t)
	was := cursor.Registration{Config: cursor.Config{ID: "gone"}, State: cursor.Active}
	f.pub.Publish(events.Event{Kind: events.Deleted, Registration: "gone", Row: &was})
	m, _, data := f.next(t)
	if m.Subject != "ops.registration.deleted.gone" || data["id"] != "gone" || data["state"] != "active" {
		t.Fatalf("%s: %v", m.Subject, data)
	}
	if _, ok := data["seq"]; ok {
		t.Fatalf("deleted carries a seq: %v", data)
	}
}

func TestSkipsOfOneRemovalAreOneEventNamingEveryRegistration(t *testing.T) {
	f := newFixture(t)
	for _, id := range []string{"a", "b"} {
		f.pub.Publish(events.Event{Kind: events.Skipped, Journal: &events.Journal{FirstSeq: 5, LastSeq: 9, Registrations: []string{id}}})
	}
	f.pub.Publish(events.Event{Kind: events.Skipped, Journal: &events.Journal{FirstSeq: 7, LastSeq: 9, Registrations: []string{"c"}}})
	got := map[float64][]any{}
	for range 2 {
		m, ce, data := f.next(t)
		if m.Subject != "ops.journal.skipped" || ce["subject"] != "JOURNAL" || data["stream"] != "JOURNAL" {
			t.Fatalf("%s: %v", m.Subject, ce)
		}
		regs, _ := data["registrations"].([]any)
		got[data["firstSeq"].(float64)] = regs
		if data["count"] != float64(len(regs)) {
			t.Fatalf("count %v beside %v", data["count"], regs)
		}
	}
	if len(got[5]) != 2 || len(got[7]) != 1 {
		t.Fatalf("skipped events by first sequence: %v; want a and b together, c alone", got)
	}
	select {
	case m := <-f.msgs:
		t.Fatalf("a third event: %s %s", m.Subject, m.Data)
	case <-time.After(1500 * time.Millisecond):
	}
}

func TestCloseSendsTheGatheredSkipsAndDropsLaterEvents(t *testing.T) {
	f := newFixture(t)
	f.pub.Publish(events.Event{Kind: events.Skipped, Journal: &events.Journal{FirstSeq: 1, LastSeq: 2, Registrations: []string{"a"}}})
	f.pub.Close(context.Background())
	if m, _, _ := f.next(t); m.Subject != "ops.journal.skipped" {
		t.Fatalf("got %s", m.Subject)
	}
	f.pub.Publish(events.Event{Kind: events.Created, Registration: "x", Row: &cursor.Registration{}})
	select {
	case m := <-f.msgs:
		t.Fatalf("an event after Close: %s", m.Subject)
	case <-time.After(200 * time.Millisecond):
	}
}

func TestAnEventOfARegistrationGoneIsDroppedAndCounted(t *testing.T) {
	f := newFixture(t)
	f.pub.Publish(events.Event{Kind: events.Parked, Registration: "nobody", Seq: 1})
	f.pub.Publish(events.Event{Kind: events.Created, Registration: "x", Row: &cursor.Registration{Config: cursor.Config{ID: "x"}}})
	if m, _, _ := f.next(t); m.Subject != "ops.registration.created.x" {
		t.Fatalf("got %s, want the created event after the dropped one", m.Subject)
	}
	var m dto.Metric
	if err := f.pub.Collectors()[1].(prometheus.Counter).Write(&m); err != nil || m.GetCounter().GetValue() != 1 {
		t.Fatalf("bridge_events_dropped_total = %v (%v), want 1", m.GetCounter().GetValue(), err)
	}
}

// An admin call's event names its actor; a token event shows the token's
// name, scope and role, never its hash.
func TestAdminEventsNameTheirActorAndTokenEventsHideTheHash(t *testing.T) {
	f := newFixture(t)
	was := cursor.Registration{Config: cursor.Config{ID: "team-a-1"}, State: cursor.Active}
	f.pub.Publish(events.Event{Kind: events.Deleted, Registration: "team-a-1", Row: &was, Actor: "team-a-ops"})
	m, _, data := f.next(t)
	if m.Subject != "ops.registration.deleted.team-a-1" || data["actor"] != "team-a-ops" || data["id"] != "team-a-1" {
		t.Fatalf("%s: %v", m.Subject, data)
	}
	tok := cursor.Token{Name: "team-a-ops", IDPrefix: "team-a-", Role: cursor.Operator, CreatedAt: time.Unix(1, 0),
		Hash: []byte("0123456789abcdef0123456789abcdef")}
	f.pub.Publish(events.Event{Kind: events.TokenRevoked, Token: &tok, Actor: "root"})
	m, ce, data := f.next(t)
	if m.Subject != "ops.token.revoked.team-a-ops" || ce["type"] != "io.jetstream-bridge.token.revoked" || ce["subject"] != "team-a-ops" {
		t.Fatalf("%s: %v", m.Subject, ce)
	}
	if data["name"] != "team-a-ops" || data["idPrefix"] != "team-a-" || data["role"] != "operator" || data["actor"] != "root" || len(data) != 5 {
		t.Fatalf("data = %v", data)
	}
	if strings.Contains(string(m.Data), "hash") || strings.Contains(string(m.Data), "MDEyMzQ1") {
		t.Fatalf("the event shows the token's hash: %s", m.Data)
	}
}

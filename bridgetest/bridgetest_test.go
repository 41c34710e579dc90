package bridgetest_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetstream-bridge/bridge/admin"
	"github.com/jetstream-bridge/bridge/bridgetest"
)

// A receiver that refuses the first POST with 503 gets it again, and the
// three orders arrive in stream order, signed, as binary CloudEvents of
// the messages published.
func TestAReceiverThatFailsFirstGetsEveryOrderInOrder(t *testing.T) {
	env := bridgetest.New(t)
	billing := env.Receiver(
		bridgetest.Response{Status: http.StatusServiceUnavailable, RetryAfter: "1"},
		bridgetest.Response{Status: http.StatusOK},
	)
	reg := env.Register(billing.Outbox("journal.orders.>"))
	if !reg.Signed || reg.State != "active" {
		t.Fatalf("registered %+v, want a signed active registration", reg)
	}
	var seqs []uint64
	for i := 1; i <= 3; i++ {
		body := fmt.Sprintf(`{"order":%d}`, i)
		seqs = append(seqs, env.Publish(fmt.Sprintf("journal.orders.%d", i), []byte(body), "Content-Type", "application/json"))
	}

	got := billing.WaitFor(3)
	all := billing.All()
	if all[0].Status != http.StatusServiceUnavailable || all[0].Seq != seqs[0] {
		t.Errorf("first POST: sequence %d answered %d, want sequence %d answered 503", all[0].Seq, all[0].Status, seqs[0])
	}
	bridgetest.AssertSigned(t, all)
	bridgetest.AssertInOrder(t, got)
	bridgetest.AssertAtLeastOnce(t, got, seqs...)
	for i, d := range got[:3] {
		if d.DecodeErr != nil || d.Event == nil {
			t.Fatalf("delivery %d is not a CloudEvent: %v", i, d.DecodeErr)
		}
		wantSubject, wantData := fmt.Sprintf("journal.orders.%d", i+1), fmt.Sprintf(`{"order":%d}`, i+1)
		if d.Event.Subject() != wantSubject || string(d.Event.Data()) != wantData || d.Event.DataContentType() != "application/json" {
			t.Errorf("delivery %d: subject %q data %s (%s), want %q %s (application/json)",
				i, d.Event.Subject(), d.Event.Data(), d.Event.DataContentType(), wantSubject, wantData)
		}
		if d.Header.Get("ce-id") == "" || d.ID != d.Event.ID() {
			t.Errorf("delivery %d: binary mode with ce-id %q and webhook-id %q, want both the event's id %q",
				i, d.Header.Get("ce-id"), d.ID, d.Event.ID())
		}
	}
}

// A structured registration gets application/cloudevents+json, which the
// receiver decodes just as well.
func TestAStructuredReceiverGetsTheSameEvent(t *testing.T) {
	env := bridgetest.New(t)
	rcv := env.Receiver()
	r := rcv.Outbox("journal.>")
	r.Format = "structured"
	env.Register(r)
	seq := env.Publish("journal.signup", []byte(`{"user":"ada"}`), "Content-Type", "application/json", "ce-type", "com.example.signup")

	d := rcv.WaitFor(1)[0]
	if d.Header.Get("Content-Type") != "application/cloudevents+json" || d.Event == nil {
		t.Fatalf("Content-Type %q, event %v (%v): want a structured CloudEvent", d.Header.Get("Content-Type"), d.Event, d.DecodeErr)
	}
	if d.Event.Type() != "com.example.signup" || d.Seq != seq || string(d.Event.Data()) != `{"user":"ada"}` {
		t.Errorf("event type %q, sequence %d, data %s; want com.example.signup, %d, the published body", d.Event.Type(), d.Seq, d.Event.Data(), seq)
	}
	bridgetest.AssertSigned(t, []bridgetest.Delivery{d})
}

// An A2A receiver gets one StreamResponse per event of the journal
// message, in order, and the terminal state completes the registration.
func TestAnA2AReceiverGetsStreamResponses(t *testing.T) {
	env := bridgetest.New(t)
	agent := env.Receiver()
	reg := env.Register(agent.A2A("task-7"))
	seq := env.Publish("journal.a2a.task-7", []byte(`[
		{"statusUpdate":{"taskId":"task-7","contextId":"ctx-1","status":{"state":"TASK_STATE_WORKING"}}},
		{"statusUpdate":{"taskId":"task-7","contextId":"ctx-1","status":{"state":"TASK_STATE_COMPLETED"}}}]`))

	got := agent.WaitFor(2)
	bridgetest.AssertSigned(t, got)
	bridgetest.AssertInOrder(t, got)
	for i, want := range []string{"TASK_STATE_WORKING", "TASK_STATE_COMPLETED"} {
		d := got[i]
		if d.A2A == nil || d.A2A.StatusUpdate == nil {
			t.Fatalf("delivery %d is not a status update: %s (%v)", i, d.Body, d.DecodeErr)
		}
		if su := d.A2A.StatusUpdate; su.TaskID != "task-7" || su.Status.State != want || d.Seq != seq {
			t.Errorf("delivery %d: task %q state %q sequence %d, want task-7 %s %d", i, su.TaskID, su.Status.State, d.Seq, want, seq)
		}
	}
	env.Eventually("the registration to complete", func() bool { return env.Registration(reg.ID).State == "completed" })
}

// A receiver that answers 410 Gone parks its registration, as the admin
// API shows, and is not asked again.
func TestAGoneReceiverParksItsRegistration(t *testing.T) {
	env := bridgetest.New(t)
	gone := env.Receiver(bridgetest.Response{Status: http.StatusGone})
	reg := env.Register(gone.Outbox("journal.>"))
	env.Publish("journal.x", []byte("x"))
	env.Eventually("the registration to park", func() bool { return env.Registration(reg.ID).State == "parked" })
	if n := len(gone.All()); n != 1 || len(gone.Accepted()) != 0 {
		t.Errorf("%d POSTs, %d accepted; want the one refused", n, len(gone.Accepted()))
	}
}

// WithCluster the bridge keeps its registrations in the replicated kv
// store of a three-node cluster and delivers as it does alone; the admin
// API names the bridge holding each registration.
func TestWithClusterTheKVStoreDelivers(t *testing.T) {
	env := bridgetest.New(t, bridgetest.WithCluster())
	rcv := env.Receiver()
	reg := env.Register(rcv.Outbox("journal.>"))
	if reg.Owner == nil || *reg.Owner != "bridgetest" {
		t.Errorf("registration owner %v, want the bridge of the Env", reg.Owner)
	}
	seqs := []uint64{env.Publish("journal.a", []byte("1")), env.Publish("journal.b", []byte("2"))}
	got := rcv.WaitFor(2)
	bridgetest.AssertInOrder(t, got)
	bridgetest.AssertAtLeastOnce(t, got, seqs...)
	bridgetest.AssertSigned(t, got)
}

// A node of the cluster that goes away and comes back costs no delivery:
// the bridge follows the cluster through it.
func TestWithClusterANodeLostAndBackLosesNothing(t *testing.T) {
	env := bridgetest.New(t, bridgetest.WithCluster())
	rcv := env.Receiver()
	env.Register(rcv.Outbox("journal.>"))
	seqs := []uint64{publishRetried(t, env, "journal.a")}
	rcv.WaitFor(1)

	env.StopNode(1)
	seqs = append(seqs, publishRetried(t, env, "journal.b"))
	rcv.WaitFor(2)
	env.RestartNode(1)
	seqs = append(seqs, publishRetried(t, env, "journal.c"))

	got := rcv.WaitFor(3)
	bridgetest.AssertInOrder(t, got)
	bridgetest.AssertAtLeastOnce(t, got, seqs...)
}

// publishRetried publishes as a client of a cluster does: a publish sent
// while a stream elects its leader goes unanswered, so it is sent again
// under the same Nats-Msg-Id, which the stream stores once.
func publishRetried(t *testing.T, env *bridgetest.Env, subject string) uint64 {
	t.Helper()
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		ack, err := env.JetStream().Publish(ctx, subject, []byte(subject), jetstream.WithMsgID(subject))
		cancel()
		if err == nil {
			return ack.Sequence
		}
		if attempt == 15 {
			t.Fatalf("publishing %s: %v, %d times", subject, err, attempt)
		}
	}
}

// A registration with ordering keys gets every message, each key's in
// stream order.
func TestAKeyedRegistrationKeepsOrderPerKey(t *testing.T) {
	env := bridgetest.New(t)
	rc := env.Receiver()
	r := rc.Outbox("journal.orders.>")
	r.Ordering = &admin.Ordering{Key: "tokens:3", MaxInFlight: 4}
	if reg := env.Register(r); reg.Ordering == nil || reg.Ordering.Key != "tokens:3" {
		t.Fatalf("registered with ordering %+v, want tokens:3", reg.Ordering)
	}
	perKey := make(map[string][]uint64)
	for i := range 12 {
		subject := fmt.Sprintf("journal.orders.c%d.e%d", i%3, i)
		perKey[subject[:len("journal.orders.c0")]] = append(perKey[subject[:len("journal.orders.c0")]], env.Publish(subject, []byte("{}")))
	}
	got := rc.WaitFor(12)
	first := make(map[uint64]int)
	for i, d := range got {
		if _, ok := first[d.Seq]; !ok {
			first[d.Seq] = i
		}
	}
	for key, seqs := range perKey {
		for i := 1; i < len(seqs); i++ {
			if first[seqs[i]] < first[seqs[i-1]] {
				t.Fatalf("%s: sequence %d arrived before %d", key, seqs[i], seqs[i-1])
			}
		}
	}
}

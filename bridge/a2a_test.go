package bridge_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetstream-bridge/bridge/admin"
	"github.com/jetstream-bridge/bridge/bridge"
	"github.com/jetstream-bridge/bridge/bridgetest"
	"github.com/jetstream-bridge/bridge/cursor"
	"github.com/jetstream-bridge/bridge/netguard"
	"github.com/jetstream-bridge/bridge/projection/a2a"
	"github.com/jetstream-bridge/bridge/webhook"
)

const fourEvents = `[
 {"statusUpdate":{"taskId":"t1","contextId":"c1","status":{"state":"TASK_STATE_WORKING"}}},
 {"artifactUpdate":{"taskId":"t1","contextId":"c1","artifact":{"artifactId":"a1","parts":[{"text":"hello"}]}}},
 {"message":{"messageId":"m1","taskId":"t1","contextId":"c1","role":"ROLE_AGENT","parts":[{"text":"done soon"}]}},
 {"statusUpdate":{"taskId":"t1","contextId":"c1","status":{"state":"TASK_STATE_COMPLETED"}}}
]`

// a2aWorker serves the a2a namespace through the real projection and a
// sender whose guard lets loopback http through, as --a2a-allow-loopback.
func (e *env) a2aWorker(opts ...bridge.Option) *bridge.Worker {
	e.t.Helper()
	s := webhook.NewSender(webhook.WithTimeout(2*time.Second),
		webhook.WithPolicy(netguard.NewPolicy(netguard.WithAllowLoopbackHTTP(true))))
	e.t.Cleanup(s.Close)
	e.sender = s
	return e.workerFor(a2a.New(a2a.WithStream(stream)), opts...)
}

func (e *env) registerTask(id, task, url string) {
	e.t.Helper()
	_, _, err := e.db.Create(e.t.Context(), cursor.Registration{
		Config:  cursor.Config{ID: id, Namespace: "a2a", TaskID: task, Subject: "journal.a2a." + task, URL: url},
		NextSeq: 1, NextAttemptAt: t0,
	}, nil)
	if err != nil {
		e.t.Fatal(err)
	}
}

func TestA2AArrayIsFourPostsAndTerminalCompletesAfterAck(t *testing.T) {
	e := newEnv(t)
	var failTerminal atomic.Bool
	failTerminal.Store(true)
	rc := newReceiver(t, func(n int, w http.ResponseWriter) {
		if n == 3 && failTerminal.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	e.registerTask("push", "t1", rc.URL)
	e.publish("journal.a2a.t1", fourEvents)
	w := e.a2aWorker()

	rep := e.sweep(w, t0, 10)
	if rep.Deliveries != 3 || rep.Retries != 1 || rep.Completed != 0 {
		t.Fatalf("report %+v; want 3 deliveries then a retry on the terminal event", rep)
	}
	if r := e.get("push"); r.State != cursor.Active || r.NextSeq != 1 {
		t.Fatalf("state %s cursor %d: an unacknowledged terminal event must not complete", r.State, r.NextSeq)
	}
	failTerminal.Store(false)
	rep = e.sweep(w, e.get("push").NextAttemptAt, 10)
	if rep.Completed != 1 || rep.Deliveries != 4 {
		t.Fatalf("report %+v; want the record resent whole (4) and completed", rep)
	}
	r := e.get("push")
	if r.State != cursor.Completed || r.NextSeq != 2 {
		t.Fatalf("state %s cursor %d; want completed past the terminal message", r.State, r.NextSeq)
	}
	var ids []string
	for _, d := range rc.deliveries()[4:] {
		ids = append(ids, d.id)
	}
	if want := []string{"JOURNAL-1-0", "JOURNAL-1-1", "JOURNAL-1-2", "JOURNAL-1-3"}; !slices.Equal(ids, want) {
		t.Fatalf("ids %q, want %q", ids, want)
	}
	e.publish("journal.a2a.t1", fourEvents)
	w.Wake("push")
	if rep := e.sweep(w, t0.Add(time.Hour), 10); rep.Registrations != 0 {
		t.Fatalf("a completed registration was scheduled again: %+v", rep)
	}
}

// An event for another task parks the registration with a lastError
// naming the journal message and the foreign task, as the admin API shows
// it, and never reaches the receiver.
func TestA2AEventForAnotherTaskParks(t *testing.T) {
	env := bridgetest.New(t)
	rcv := env.Receiver()
	reg := env.Register(rcv.A2A("t1"))
	seq := env.Publish("journal.a2a.t1", []byte(`{"statusUpdate":{"taskId":"other","contextId":"c1","status":{"state":"TASK_STATE_WORKING"}}}`))
	var r admin.Registration
	env.Eventually("the registration to park", func() bool {
		r = env.Registration(reg.ID)
		return r.State == "parked"
	})
	if r.NextSeq != seq {
		t.Errorf("parked at cursor %d, want %d: the foreign event is kept for an operator", r.NextSeq, seq)
	}
	if want := fmt.Sprintf("journal message %d", seq); !strings.Contains(r.LastError, want) || !strings.Contains(r.LastError, "other") {
		t.Errorf("lastError %q must name %s and the foreign task", r.LastError, want)
	}
	if got := rcv.All(); len(got) != 0 {
		t.Errorf("an event for another task reached the receiver: %d POSTs", len(got))
	}
}

package bridge_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/jetstream-bridge/bridge/cursor"
	"github.com/jetstream-bridge/bridge/projection/cloudevents"
)

func (e *env) registerBatch(id, url string, b cursor.Batch) {
	e.t.Helper()
	_, _, err := e.db.Create(context.Background(), cursor.Registration{
		Config:  cursor.Config{ID: id, Namespace: "outbox", Subject: "journal.>", URL: url, Batch: &b},
		NextSeq: 1, NextAttemptAt: t0,
	}, nil)
	if err != nil {
		e.t.Fatal(err)
	}
}

// decodeBatch reads a CloudEvents JSON batch the way a receiver would.
func decodeBatch(t *testing.T, body string) []event.Event {
	t.Helper()
	var raw []json.RawMessage
	if err := json.Unmarshal([]byte(body), &raw); err != nil {
		t.Fatalf("batch is not a JSON array: %v", err)
	}
	out := make([]event.Event, len(raw))
	for i, r := range raw {
		if err := json.Unmarshal(r, &out[i]); err != nil {
			t.Fatalf("event %d of the batch: %v", i, err)
		}
	}
	return out
}

func TestBatchModeSendsOrderedBatchesAndAdvancesPastEach(t *testing.T) {
	e := newEnv(t)
	var types []string
	rc := newReceiver(t, nil)
	rc.Config.Handler = wrapContentType(rc.Config.Handler, &types)
	e.registerBatch("b", rc.URL, cursor.Batch{MaxEvents: 100})
	for i := range 250 {
		e.publish("journal.x", fmt.Sprintf(`{"n":%d}`, i))
	}
	w := e.workerFor(cloudevents.New(cloudevents.WithStream(stream)))
	rep := e.sweep(w, t0, 10)
	if rep.Deliveries != 3 || rep.Records != 250 {
		t.Fatalf("report %+v; want 3 batch POSTs carrying 250 records", rep)
	}
	got := rc.deliveries()
	wantIDs := []string{"JOURNAL-1..JOURNAL-100", "JOURNAL-101..JOURNAL-200", "JOURNAL-201..JOURNAL-250"}
	n := 0
	for i, d := range got {
		if d.id != wantIDs[i] {
			t.Fatalf("batch %d webhook-id %q, want %q", i, d.id, wantIDs[i])
		}
		for _, ev := range decodeBatch(t, d.body) {
			n++
			if ev.ID() != fmt.Sprintf("JOURNAL-%d", n) || string(ev.Data()) != fmt.Sprintf(`{"n":%d}`, n-1) {
				t.Fatalf("event %d: id %s data %s", n, ev.ID(), ev.Data())
			}
		}
	}
	if n != 250 || types[0] != cloudevents.BatchContentType {
		t.Fatalf("%d events, content type %q", n, types[0])
	}
	if r := e.get("b"); r.NextSeq != 251 || r.Delivered != 3 {
		t.Fatalf("cursor %d delivered %d; want 251 and 3 POSTs", r.NextSeq, r.Delivered)
	}
}

func TestBatchModeRetriesTheSameBatchAndHoldsAPartialOne(t *testing.T) {
	e := newEnv(t)
	rc := newReceiver(t, func(n int, w http.ResponseWriter) {
		if n == 0 {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	e.registerBatch("b", rc.URL, cursor.Batch{MaxEvents: 2, MaxDelay: time.Hour})
	for i := range 5 {
		e.publish("journal.x", fmt.Sprintf(`{"n":%d}`, i))
	}
	w := e.workerFor(cloudevents.New(cloudevents.WithStream(stream)))
	if rep := e.sweep(w, t0, 10); rep.Retries != 1 {
		t.Fatalf("%+v", rep)
	}
	e.sweep(w, e.get("b").NextAttemptAt, 10)
	got := rc.deliveries()
	if len(got) != 3 || got[0] != got[1] {
		t.Fatalf("the retry must resend the identical batch: %+v", got)
	}
	// The fifth event waits for a partner until its delay is over.
	if r := e.get("b"); r.NextSeq != 5 || !r.NextAttemptAt.IsZero() {
		t.Fatalf("cursor %d nextAttemptAt %v; want 5 and idle while the partial batch is held", r.NextSeq, r.NextAttemptAt)
	}
}

func wrapContentType(h http.Handler, types *[]string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		*types = append(*types, r.Header.Get("Content-Type"))
		h.ServeHTTP(w, r)
	})
}

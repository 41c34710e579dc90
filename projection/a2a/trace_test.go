package a2a_test

import (
	"testing"

	"github.com/jetstream-bridge/bridge/projection"
	"github.com/jetstream-bridge/bridge/projection/a2a"
)

func TestEveryNotificationCarriesTheTraceContext(t *testing.T) {
	const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	r := &projection.Record{Stream: "JOURNAL", Seq: 17, Data: []byte("[" + working + "," + completed + "]"),
		Header: map[string][]string{"traceparent": {traceparent}, "tracestate": {"congo=t61rcWkgMzE"}}}
	res, err := a2a.New().Project(projection.Target{ID: "push-1", TaskID: "t-1"}, r)
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range res.Messages {
		if got := m.Header.Get("Traceparent"); got != traceparent {
			t.Errorf("notification %d: traceparent %q, want %q", i, got, traceparent)
		}
		if got := m.Header.Get("Tracestate"); got != "congo=t61rcWkgMzE" {
			t.Errorf("notification %d: tracestate %q, want the published one", i, got)
		}
	}
	plain, err := project(t, working)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := plain.Messages[0].Header["Traceparent"]; ok {
		t.Error("a notification of a message without a traceparent got one")
	}
}

package webhook

import (
	"context"
	"net/textproto"
	"testing"

	"github.com/jetstream-bridge/bridge/projection"
)

const (
	publishedParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	spanParent      = "00-4bf92f3577b34da6a3ce929d0e0e4736-b7ad6b7169203331-01"
)

func tracedMessage() projection.Message {
	m := message("JOURNAL-7")
	m.Header[projection.TraceparentHeader] = []string{publishedParent}
	m.Header[projection.TracestateHeader] = []string{"congo=t61rcWkgMzE"}
	return m
}

func TestSendPassesTheMessagesTraceContextVerbatim(t *testing.T) {
	srv, hits := receiver(t, status(204, ""))
	s := newSender(t, WithPolicy(loopbackPolicy()))
	if o := s.Send(context.Background(), Request{Namespace: projection.A2A, URL: srv.URL, Message: tracedMessage()}); !o.OK() {
		t.Fatalf("send: %+v", o)
	}
	h := next(t, hits).header
	if got := h.Values("Traceparent"); len(got) != 1 || got[0] != publishedParent {
		t.Errorf("traceparent %q, want the published %q", got, publishedParent)
	}
	if got := h.Values("Tracestate"); len(got) != 1 || got[0] != "congo=t61rcWkgMzE" {
		t.Errorf("tracestate %q, want the published one", got)
	}
}

func TestSendReplacesTheTraceContextWithTheSpans(t *testing.T) {
	srv, hits := receiver(t, status(204, ""))
	s := newSender(t)
	msg := tracedMessage()
	for _, tc := range []struct{ state, want string }{{"rojo=1", "rojo=1"}, {"", ""}} {
		r := Request{Namespace: projection.Outbox, URL: srv.URL, Message: msg, TraceParent: spanParent, TraceState: tc.state}
		if o := s.Send(context.Background(), r); !o.OK() {
			t.Fatalf("send: %+v", o)
		}
		h := next(t, hits).header
		if got := h.Values("Traceparent"); len(got) != 1 || got[0] != spanParent {
			t.Errorf("traceparent %q, want only the span's %q", got, spanParent)
		}
		if got := h.Get("Tracestate"); got != tc.want {
			t.Errorf("tracestate %q, want %q", got, tc.want)
		}
	}
	if got := msg.Header.Get("Traceparent"); got != publishedParent {
		t.Errorf("the message's own header, shared by every receiver, changed to %q", got)
	}
}

func TestTraceHeaderKeysAreCanonical(t *testing.T) {
	for _, k := range []string{projection.TraceparentHeader, projection.TracestateHeader} {
		if c := textproto.CanonicalMIMEHeaderKey(k); c != k {
			t.Errorf("header key %q is sent as written but canonical is %q", k, c)
		}
	}
}

package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/jetstream-bridge/bridge/internal/testutil"
)

const (
	tracedID     = "4bf92f3577b34da6a3ce929d0e0e4736"
	tracedParent = "00f067aa0ba902b7"
	traceparent  = "00-" + tracedID + "-" + tracedParent + "-01"
	tracestate   = "congo=t61rcWkgMzE"
)

// traced starts d, registers a binary and a structured receiver for
// journal.traced.> and publishes one message with a W3C trace context.
func traced(t *testing.T, d *daemon) (binary, structured *sink, seq uint64) {
	t.Helper()
	d.start()
	binary, structured = newSink(t), newSink(t)
	for id, s := range map[string]*sink{"binary": binary, "structured": structured} {
		body := map[string]any{"id": id, "namespace": "outbox", "subject": "journal.traced.>", "url": s.URL + "/hook", "format": id}
		if code := d.api("POST", "/v1/registrations", body, nil); code != http.StatusCreated {
			t.Fatalf("create %s: %d", id, code)
		}
	}
	pub := newPublisher(t, "nats://"+d.natsAddr)
	seq = publishMsg(t, pub, &nats.Msg{Subject: "journal.traced.orders", Data: []byte(`{"order":42}`),
		Header: nats.Header{"traceparent": {traceparent}, "tracestate": {tracestate}, "Content-Type": {"application/json"}}})
	for _, s := range []*sink{binary, structured} {
		waitFor(t, 10*time.Second, "both receivers to get the message", func() bool { return len(s.requests()) == 1 })
	}
	return binary, structured, seq
}

// eventTrace is the traceparent attribute of a structured event.
func eventTrace(t *testing.T, body string) string {
	t.Helper()
	var ev struct {
		Traceparent string `json:"traceparent"`
		Tracestate  string `json:"tracestate"`
	}
	if err := json.Unmarshal([]byte(body), &ev); err != nil {
		t.Fatalf("structured body is not JSON: %v: %s", err, body)
	}
	if ev.Tracestate != tracestate {
		t.Errorf("the event's tracestate attribute is %q, want %q", ev.Tracestate, tracestate)
	}
	return ev.Traceparent
}

func TestTracePublishedContextArrivesVerbatimWithoutExport(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	d := newDaemon(t)
	binary, structured, _ := traced(t, d)
	for name, s := range map[string]*sink{"binary": binary, "structured": structured} {
		h := s.requests()[0].header
		if got := h.Values("Traceparent"); len(got) != 1 || got[0] != traceparent || h.Get("Tracestate") != tracestate {
			t.Errorf("%s: traceparent %q, tracestate %q; want the published ones verbatim", name, got, h.Get("Tracestate"))
		}
	}
	if got := eventTrace(t, structured.requests()[0].body); got != traceparent {
		t.Errorf("the event's traceparent attribute is %q, want %q", got, traceparent)
	}
	if strings.Contains(d.logs.String(), "exporting a span per POST") {
		t.Error("spans are exported without an OTLP endpoint")
	}
	if code := d.stop(); code != 0 {
		t.Errorf("exit %d after SIGTERM", code)
	}
}

func TestTraceSpansAreExportedToTheOTLPEndpoint(t *testing.T) {
	collector := testutil.NewOTLPSink(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	t.Setenv("OTEL_SERVICE_NAME", "")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100") // milliseconds
	d := newDaemon(t)
	binary, structured, seq := traced(t, d)
	spans := collector.WaitSpans(t, 2, 15*time.Second)

	byID := map[string]testutil.Span{}
	for _, sp := range spans {
		byID[sp.SpanID] = sp
	}
	for name, s := range map[string]*sink{"binary": binary, "structured": structured} {
		h := s.requests()[0].header
		f := strings.Split(h.Get("Traceparent"), "-")
		if len(f) != 4 || f[1] != tracedID || f[2] == tracedParent {
			t.Errorf("%s: traceparent %q, want trace %s with a new parent", name, h.Get("Traceparent"), tracedID)
			continue
		}
		sp, ok := byID[f[2]]
		switch {
		case !ok:
			t.Errorf("%s: the receiver's parent %s is no exported span: %+v", name, f[2], spans)
		case sp.TraceID != tracedID || sp.ParentSpanID != tracedParent:
			t.Errorf("%s: span in trace %s under %s, want the published trace under %s", name, sp.TraceID, sp.ParentSpanID, tracedParent)
		case sp.Attributes["bridge.registration.id"] != name || sp.Attributes["bridge.stream.sequence"] != int64(seq) ||
			sp.Attributes["bridge.attempt"] != int64(1) || sp.Attributes["http.response.status_code"] != int64(204):
			t.Errorf("%s: span attributes %v", name, sp.Attributes)
		case sp.Service != "jetstream-bridge" || sp.StatusError:
			t.Errorf("%s: service %q, error status %v", name, sp.Service, sp.StatusError)
		}
		if h.Get("Tracestate") != tracestate {
			t.Errorf("%s: tracestate %q, want %q", name, h.Get("Tracestate"), tracestate)
		}
	}
	if got, want := eventTrace(t, structured.requests()[0].body), structured.requests()[0].header.Get("Traceparent"); got != want {
		t.Errorf("the event's traceparent attribute is %q, want its POST's %q", got, want)
	}
	if code := d.stop(); code != 0 {
		t.Errorf("exit %d after SIGTERM", code)
	}
}

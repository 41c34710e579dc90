package bridge_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/jetstream-bridge/bridge/bridge"
	"github.com/jetstream-bridge/bridge/cursor"
	"github.com/jetstream-bridge/bridge/internal/testutil"
	"github.com/jetstream-bridge/bridge/projection/cloudevents"
)

const (
	publishedTrace  = "4bf92f3577b34da6a3ce929d0e0e4736"
	publishedParent = "00f067aa0ba902b7"
	published       = "00-" + publishedTrace + "-" + publishedParent + "-01"
	publishedState  = "congo=t61rcWkgMzE"
)

// publishTraced publishes data with the W3C headers a traced publisher
// sets, in the spelling OpenTelemetry's propagators use on NATS.
func (e *env) publishTraced(subject, data string) uint64 {
	e.t.Helper()
	m := nats.NewMsg(subject)
	m.Data = []byte(data)
	m.Header["traceparent"] = []string{published}
	m.Header["tracestate"] = []string{publishedState}
	ack, err := e.js.PublishMsg(context.Background(), m)
	if err != nil {
		e.t.Fatal(err)
	}
	return ack.Sequence
}

func (e *env) registerFormat(id, url, format string, batch *cursor.Batch) {
	e.t.Helper()
	_, _, err := e.db.Create(context.Background(), cursor.Registration{
		Config:  cursor.Config{ID: id, Namespace: "outbox", Subject: "journal.>", URL: url, Format: format, Batch: batch},
		NextSeq: 1, NextAttemptAt: t0,
	}, nil)
	if err != nil {
		e.t.Fatal(err)
	}
}

// hook is a receiver that keeps every POST's headers and body and
// answers the nth (from 0) with answer(n).
type hook struct {
	*httptest.Server
	mu     sync.Mutex
	header []http.Header
	body   []string
}

func newHook(t *testing.T, answer func(n int) int) *hook {
	h := &hook{}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		n := len(h.header)
		h.header, h.body = append(h.header, r.Header.Clone()), append(h.body, string(b))
		h.mu.Unlock()
		w.WriteHeader(answer(n))
	}))
	t.Cleanup(h.Close)
	return h
}

func answer(code int) func(int) int { return func(int) int { return code } }

func (h *hook) got(t *testing.T, n int) (http.Header, string) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.header) <= n {
		t.Fatalf("the receiver got %d POSTs, want at least %d", len(h.header), n+1)
	}
	return h.header[n], h.body[n]
}

func TestWithoutSpansTheTraceContextGoesOnVerbatim(t *testing.T) {
	e := newEnv(t)
	binary, structured, batch := newHook(t, answer(204)), newHook(t, answer(204)), newHook(t, answer(204))
	e.registerFormat("binary", binary.URL, "binary", nil)
	e.registerFormat("structured", structured.URL, "structured", nil)
	e.registerFormat("batch", batch.URL, "", &cursor.Batch{MaxEvents: 2})
	e.publish("journal.x", "untraced")
	e.publishTraced("journal.x", `{"n":2}`)
	w := e.workerFor(cloudevents.New(cloudevents.WithStream(stream)))
	e.sweep(w, t0, 10)

	for name, h := range map[string]*hook{"binary": binary, "structured": structured} {
		if hdr, _ := h.got(t, 0); hdr.Get("Traceparent") != "" {
			t.Errorf("%s: a message without a traceparent was sent one: %q", name, hdr.Get("Traceparent"))
		}
		hdr, _ := h.got(t, 1)
		if got := hdr.Values("Traceparent"); len(got) != 1 || got[0] != published || hdr.Get("Tracestate") != publishedState {
			t.Errorf("%s: traceparent %q, tracestate %q; want the published ones verbatim", name, got, hdr.Get("Tracestate"))
		}
	}
	_, body := structured.got(t, 1)
	var ev map[string]any
	if err := json.Unmarshal([]byte(body), &ev); err != nil || ev["traceparent"] != published || ev["tracestate"] != publishedState {
		t.Errorf("structured event %s (%v); want the published traceparent and tracestate attributes", body, err)
	}
	hdr, body := batch.got(t, 0)
	if hdr.Get("Traceparent") != published || !strings.Contains(body, `"traceparent":"`+published+`"`) {
		t.Errorf("batch: traceparent %q, body %s; want the traced event's in both", hdr.Get("Traceparent"), body)
	}
}

// exporting returns a tracer provider that exports to a real OTLP/HTTP
// collector on loopback, as `bridge run` does with OTEL_EXPORTER_OTLP_ENDPOINT.
func exporting(t *testing.T) (*sdktrace.TracerProvider, *testutil.OTLPSink) {
	t.Helper()
	sink := testutil.NewOTLPSink(t)
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(sink.URL+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "bridge-test"))))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, sink
}

// parentOf splits a traceparent into its trace id and parent id.
func parentOf(t *testing.T, tp string) (traceID, spanID string) {
	t.Helper()
	f := strings.Split(tp, "-")
	if len(f) != 4 || len(f[1]) != 32 || len(f[2]) != 16 {
		t.Fatalf("traceparent %q is not version 00", tp)
	}
	return f[1], f[2]
}

func TestEveryAttemptIsASpanOfThePublishedTrace(t *testing.T) {
	e := newEnv(t)
	h := newHook(t, func(n int) int { return []int{503, 204}[n] })
	e.registerFormat("orders", h.URL, "structured", nil)
	seq := e.publishTraced("journal.x", `{"n":1}`)
	tp, sink := exporting(t)
	w := e.workerFor(cloudevents.New(cloudevents.WithStream(stream)), bridge.WithTracer(tp))
	e.sweep(w, t0, 10)
	e.sweep(w, e.get("orders").NextAttemptAt, 10)
	if err := tp.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := sink.WaitSpans(t, 2, 10*time.Second)

	for i, sp := range spans {
		hdr, body := h.got(t, i)
		traceID, parent := parentOf(t, hdr.Get("Traceparent"))
		switch {
		case sp.TraceID != publishedTrace || sp.ParentSpanID != publishedParent:
			t.Errorf("span %d is in trace %s under %s, want the published %s under %s", i, sp.TraceID, sp.ParentSpanID, publishedTrace, publishedParent)
		case traceID != publishedTrace || parent != sp.SpanID:
			t.Errorf("POST %d carried traceparent %s, want trace %s with the span %s as parent", i, hdr.Get("Traceparent"), publishedTrace, sp.SpanID)
		case hdr.Get("Tracestate") != publishedState:
			t.Errorf("POST %d carried tracestate %q, want %q", i, hdr.Get("Tracestate"), publishedState)
		case !strings.Contains(body, `"traceparent":"`+hdr.Get("Traceparent")+`"`):
			t.Errorf("POST %d: the event's traceparent attribute is not its header's %s: %s", i, hdr.Get("Traceparent"), body)
		}
		want := map[string]any{
			"bridge.registration.id":    "orders",
			"bridge.stream.sequence":    int64(seq),
			"bridge.attempt":            int64(i + 1),
			"http.response.status_code": int64([]int{503, 204}[i]),
		}
		for k, v := range want {
			if sp.Attributes[k] != v {
				t.Errorf("span %d: %s = %v, want %v", i, k, sp.Attributes[k], v)
			}
		}
		if sp.Service != "bridge-test" || sp.InstrumentationScope != bridge.TracerName || sp.Name != "POST" {
			t.Errorf("span %d: service %q, scope %q, name %q", i, sp.Service, sp.InstrumentationScope, sp.Name)
		}
	}
	if !spans[0].StatusError || !strings.Contains(spans[0].StatusMessage, "503") || spans[1].StatusError {
		t.Errorf("span statuses: %v %q, %v; want the 503 an error and the 204 not", spans[0].StatusError, spans[0].StatusMessage, spans[1].StatusError)
	}
}

func TestAnUntracedMessageStartsATraceWhenSpansAreExported(t *testing.T) {
	e := newEnv(t)
	h := newHook(t, answer(204))
	e.registerFormat("r", h.URL, "structured", nil)
	e.publish("journal.x", `{"plain":true}`)
	tp, sink := exporting(t)
	e.sweep(e.workerFor(cloudevents.New(cloudevents.WithStream(stream)), bridge.WithTracer(tp)), t0, 10)
	if err := tp.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	sp := sink.WaitSpans(t, 1, 10*time.Second)[0]
	hdr, body := h.got(t, 0)
	traceID, parent := parentOf(t, hdr.Get("Traceparent"))
	if sp.ParentSpanID != "" || traceID != sp.TraceID || parent != sp.SpanID {
		t.Errorf("span %+v, traceparent %q; want a root span whose context the receiver got", sp, hdr.Get("Traceparent"))
	}
	if hdr.Get("Tracestate") != "" {
		t.Errorf("tracestate %q made up", hdr.Get("Tracestate"))
	}
	var ev map[string]any
	if err := json.Unmarshal([]byte(body), &ev); err != nil || ev["traceparent"] != hdr.Get("Traceparent") || ev["id"] != "JOURNAL-1" || ev["data_base64"] != "eyJwbGFpbiI6dHJ1ZX0=" {
		t.Errorf("structured event %s (%v); want the POST's traceparent attribute beside the others", body, err)
	}
}

func TestBatchesA2AAndResendsAreSpansToo(t *testing.T) {
	e := newEnv(t)
	l := e.attemptLog(2 * time.Second)
	tp, sink := exporting(t)
	batch := newHook(t, answer(204))
	e.registerFormat("batch", batch.URL, "", &cursor.Batch{MaxEvents: 10})
	first := e.publishTraced("journal.x", `{"n":1}`)
	e.publish("journal.x", `{"n":2}`)
	w := e.workerFor(cloudevents.New(cloudevents.WithStream(stream)), bridge.WithTracer(tp), bridge.WithRecorder(l))
	e.sweep(w, t0, 10)
	d := bridge.NewDaemon(e.db, e.reader, []*bridge.Worker{w})
	if _, err := d.Resend(context.Background(), "batch", first); err != nil {
		t.Fatal(err)
	}
	a2a := newHook(t, answer(200))
	e.registerTask("push", "t1", a2a.URL)
	m := nats.NewMsg("journal.a2a.t1")
	m.Data, m.Header["Traceparent"] = []byte(fourEvents), []string{published}
	if _, err := e.js.PublishMsg(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	e.sweep(e.a2aWorker(bridge.WithTracer(tp)), t0, 10)
	if err := tp.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := sink.WaitSpans(t, 2+4, 10*time.Second)
	bySpan := map[string]testutil.Span{}
	for _, sp := range spans {
		bySpan[sp.SpanID] = sp
	}
	for i, want := range []struct {
		h       *hook
		n       int
		reg     string
		attempt int64
	}{{batch, 0, "batch", 1}, {batch, 1, "batch", 2}, {a2a, 0, "push", 1}, {a2a, 3, "push", 1}} {
		hdr, _ := want.h.got(t, want.n)
		traceID, parent := parentOf(t, hdr.Get("Traceparent"))
		sp, ok := bySpan[parent]
		switch {
		case !ok:
			t.Errorf("POST %d's traceparent %s names no exported span", i, hdr.Get("Traceparent"))
		case traceID != publishedTrace || sp.ParentSpanID != publishedParent:
			t.Errorf("POST %d: trace %s, span parent %s; want the published trace", i, traceID, sp.ParentSpanID)
		case sp.Attributes["bridge.registration.id"] != want.reg || sp.Attributes["bridge.attempt"] != want.attempt ||
			sp.Attributes["bridge.stream.sequence"] == nil:
			t.Errorf("POST %d: span attributes %v; want registration %s, attempt %d", i, sp.Attributes, want.reg, want.attempt)
		}
	}
}

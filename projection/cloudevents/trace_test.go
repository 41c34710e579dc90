package cloudevents_test

import (
	"encoding/json"
	"testing"

	"github.com/jetstream-bridge/bridge/projection"
	"github.com/jetstream-bridge/bridge/projection/cloudevents"
)

const (
	traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	tracestate  = "congo=t61rcWkgMzE"
)

func traced(seq uint64, extra map[string][]string) *projection.Record {
	h := map[string][]string{"traceparent": {traceparent}, "tracestate": {tracestate}, "Content-Type": {"application/json"}}
	for k, v := range extra {
		h[k] = v
	}
	return record(seq, "journal.orders", h, `{"order":42}`)
}

func TestBinaryModeSendsTheTraceContextAsHeaders(t *testing.T) {
	m := projectOne(t, cloudevents.New(), projection.Target{Format: "binary"}, traced(7, nil))
	assertHeaders(t, m.Header, map[string]string{"Traceparent": traceparent, "Tracestate": tracestate})
	if v := m.Header.Get("Ce-Traceparent"); v != "" {
		t.Errorf("binary mode sent ce-traceparent %q; the trace context travels in the W3C headers", v)
	}
}

func TestStructuredModeCarriesTheTraceContextInHeadersAndEvent(t *testing.T) {
	m := projectOne(t, cloudevents.New(), projection.Target{Format: "structured"}, traced(7, nil))
	assertHeaders(t, m.Header, map[string]string{"Traceparent": traceparent, "Tracestate": tracestate})
	ev := decodeEvent(t, m.Body)
	if ev["traceparent"] != traceparent || ev["tracestate"] != tracestate {
		t.Errorf("event traceparent %v, tracestate %v; want %q, %q", ev["traceparent"], ev["tracestate"], traceparent, tracestate)
	}
}

func TestStructuredModeKeepsAnEventsOwnTraceContext(t *testing.T) {
	own := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	r := traced(7, map[string][]string{"ce-specversion": {"1.0"}, "ce-id": {"e-1"}, "ce-source": {"/app"}, "ce-type": {"t"}, "ce-traceparent": {own}})
	m := projectOne(t, cloudevents.New(), projection.Target{Format: "structured"}, r)
	ev := decodeEvent(t, m.Body)
	if ev["traceparent"] != own || ev["tracestate"] != nil {
		t.Errorf("event traceparent %v, tracestate %v; want the event's own %q and no tracestate of another trace", ev["traceparent"], ev["tracestate"], own)
	}
	if got := m.Header.Get("Traceparent"); got != traceparent {
		t.Errorf("header traceparent %q, want the message's %q", got, traceparent)
	}
}

func TestMalformedTraceparentIsDroppedNotFatal(t *testing.T) {
	for _, format := range []string{"binary", "structured"} {
		r := traced(7, map[string][]string{"traceparent": {"00-not\x01hex"}})
		m := projectOne(t, cloudevents.New(), projection.Target{Format: format}, r)
		if v, ok := m.Header["Traceparent"]; ok {
			t.Errorf("%s: malformed traceparent sent on as %q", format, v)
		}
		if _, ok := m.Header["Tracestate"]; ok {
			t.Errorf("%s: tracestate sent without a traceparent", format)
		}
		if format == "structured" {
			if ev := decodeEvent(t, m.Body); ev["traceparent"] != nil {
				t.Errorf("malformed traceparent carried into the event: %v", ev["traceparent"])
			}
		}
	}
}

func TestNoTraceContextWithoutOne(t *testing.T) {
	for _, format := range []string{"binary", "structured"} {
		m := projectOne(t, cloudevents.New(), projection.Target{Format: format}, record(7, "journal.x", nil, "x"))
		if _, ok := m.Header["Traceparent"]; ok {
			t.Errorf("%s: traceparent made up for a message without one", format)
		}
	}
}

func TestBatchCarriesTheFirstTraceContext(t *testing.T) {
	p := cloudevents.New()
	second := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	var msgs []projection.Message
	for i, r := range []*projection.Record{
		record(6, "journal.x", nil, "untraced"),
		traced(7, nil),
		traced(8, map[string][]string{"traceparent": {second}}),
	} {
		m := projectOne(t, p, projection.Target{Format: "structured"}, r)
		if i == 2 {
			if got := m.Header.Get("Traceparent"); got != second {
				t.Fatalf("third event's traceparent %q, want %q", got, second)
			}
		}
		msgs = append(msgs, m)
	}
	b, err := p.Batch(msgs)
	if err != nil {
		t.Fatal(err)
	}
	assertHeaders(t, b.Header, map[string]string{"Content-Type": cloudevents.BatchContentType, "Traceparent": traceparent, "Tracestate": tracestate})
	var events []map[string]any
	if err := json.Unmarshal(b.Body, &events); err != nil {
		t.Fatal(err)
	}
	for i, want := range []any{nil, traceparent, second} {
		if events[i]["traceparent"] != want {
			t.Errorf("event %d of the batch has traceparent %v, want %v", i, events[i]["traceparent"], want)
		}
	}
}

func decodeEvent(t *testing.T, body []byte) map[string]any {
	t.Helper()
	var ev map[string]any
	if err := json.Unmarshal(body, &ev); err != nil {
		t.Fatalf("structured body is not JSON: %v: %s", err, body)
	}
	return ev
}

const spanContext = "00-4bf92f3577b34da6a3ce929d0e0e4736-b7ad6b7169203331-01"

func TestRetraceGivesTheEventTheSpansContext(t *testing.T) {
	p := cloudevents.New()
	// The data holds a member of the same name and value, which is the
	// application's and must stay as it is.
	r := record(7, "journal.orders", map[string][]string{"traceparent": {traceparent}, "tracestate": {tracestate}, "Content-Type": {"application/json"}},
		`{"traceparent":"`+traceparent+`","order":42}`)
	m := projectOne(t, p, projection.Target{Format: "structured"}, r)
	before := string(m.Body)
	got, ok := p.Retrace(m, spanContext, tracestate)
	if !ok {
		t.Fatal("Retrace left the event's published context")
	}
	if string(m.Body) != before {
		t.Errorf("Retrace changed the shared message's body to %s", m.Body)
	}
	want, ev := decodeEvent(t, m.Body), decodeEvent(t, got.Body)
	want["traceparent"] = spanContext
	if !jsonEqual(ev, want) {
		t.Errorf("retraced event %v, want %v", ev, want)
	}
}

func TestRetraceGivesAnUntracedEventTheSpansContext(t *testing.T) {
	p := cloudevents.New()
	m := projectOne(t, p, projection.Target{Format: "structured"}, record(7, "journal.x", nil, `{"n":1}`))
	got, ok := p.Retrace(m, spanContext, "rojo=1")
	if !ok {
		t.Fatal("Retrace did not give the untraced event the span's context")
	}
	want, ev := decodeEvent(t, m.Body), decodeEvent(t, got.Body)
	want["traceparent"], want["tracestate"] = spanContext, "rojo=1"
	if !jsonEqual(ev, want) {
		t.Errorf("retraced event %v, want %v", ev, want)
	}
}

func TestRetraceLeavesWhatIsNotTheBridgesToChange(t *testing.T) {
	p := cloudevents.New()
	own := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	withOwn := traced(7, map[string][]string{"ce-specversion": {"1.0"}, "ce-id": {"e-1"}, "ce-source": {"/app"}, "ce-type": {"t"}, "ce-traceparent": {own}})
	ownUntraced := record(8, "journal.x", map[string][]string{"ce-specversion": {"1.0"}, "ce-id": {"e-2"}, "ce-source": {"/app"}, "ce-type": {"t"}, "ce-traceparent": {own}}, "x")
	structured := projectOne(t, p, projection.Target{Format: "structured"}, traced(9, nil))
	batch, err := p.Batch([]projection.Message{structured})
	if err != nil {
		t.Fatal(err)
	}
	for name, m := range map[string]projection.Message{
		"an event with its own traceparent":          projectOne(t, p, projection.Target{Format: "structured"}, withOwn),
		"an unpublished event with its own":          projectOne(t, p, projection.Target{Format: "structured"}, ownUntraced),
		"a binary event, whose context is a header":  projectOne(t, p, projection.Target{Format: "binary"}, traced(10, nil)),
		"a batch, whose events keep their own trace": batch,
	} {
		if got, ok := p.Retrace(m, spanContext, ""); ok || string(got.Body) != string(m.Body) {
			t.Errorf("%s: Retrace changed the body to %s", name, got.Body)
		}
	}
}

package cloudevents_test

import (
	"bytes"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/binding"
	"github.com/cloudevents/sdk-go/v2/event"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"github.com/cloudevents/sdk-go/v2/types"

	"github.com/jetstream-bridge/bridge/projection"
	"github.com/jetstream-bridge/bridge/projection/cloudevents"
)

// received is what the loopback receiver decoded from one POST.
type received struct {
	event *event.Event
	err   error
}

// receiver is a real HTTP server on loopback that decodes each request the
// way a CloudEvents consumer does: the SDK's HTTP binding reader.
type receiver struct {
	srv *httptest.Server
	got chan received
}

func newReceiver(t *testing.T) *receiver {
	t.Helper()
	r := &receiver{got: make(chan received, 1)}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		// The HTTP binding requires ce- header values percent-encoded,
		// and the SDK's reader does not decode them, so a conforming
		// consumer decodes first, as the spec says.
		for k, vs := range req.Header {
			if strings.HasPrefix(k, "Ce-") {
				for i, v := range vs {
					d, err := url.PathUnescape(v)
					if err != nil {
						r.got <- received{err: err}
						w.WriteHeader(http.StatusBadRequest)
						return
					}
					vs[i] = d
				}
			}
		}
		e, err := binding.ToEvent(req.Context(), cehttp.NewMessageFromHttpRequest(req))
		r.got <- received{event: e, err: err}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// deliver POSTs m over loopback and returns the event the receiver decoded.
func (r *receiver) deliver(t *testing.T, m projection.Message) *event.Event {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, r.srv.URL, bytes.NewReader(m.Body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = m.Header.Clone()
	resp, err := r.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	resp.Body.Close()
	got := <-r.got
	if got.err != nil {
		t.Fatalf("receiver could not decode the request: %v", got.err)
	}
	return got.event
}

func TestConformanceReceiverDecodesTheIntendedEvent(t *testing.T) {
	rcv := newReceiver(t)
	subject := `journal.a b "quoted" 100% é 日本`
	when := time.Date(2026, 3, 15, 10, 30, 0, 123456789, time.UTC)

	wrapped := func(id, ct string, data []byte) *event.Event {
		e := event.New()
		e.SetID(id)
		e.SetSource("/jetstream/JOURNAL")
		e.SetType("com.example.é")
		e.SetSubject(subject)
		e.SetTime(when)
		e.SetExtension("natsseq", 42)
		if err := e.SetData(ct, data); err != nil {
			t.Fatal(err)
		}
		return &e
	}
	own := func() *event.Event {
		e := event.New()
		e.SetID("evt 1 é")
		e.SetSource("https://orders.example/a%20b")
		e.SetType("com.example.shipped")
		e.SetSubject(`s "1" 日本`)
		e.SetTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
		e.SetExtension("comexampleext", "ext é")
		if err := e.SetData("application/json", []byte(`{"x":"é"}`)); err != nil {
			t.Fatal(err)
		}
		return &e
	}
	structuredDoc, err := own().MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	binaryHeader := map[string][]string{
		"ce-specversion":     {"1.0"},
		"CE-ID":              {"evt%201%20%C3%A9"},
		"Ce-Source":          {"https://orders.example/a%2520b"},
		"ce-type":            {"com.example.shipped"},
		"ce-subject":         {"s%20%221%22%20%E6%97%A5%E6%9C%AC"},
		"ce-time":            {"2026-01-02T03:04:05Z"},
		"ce-datacontenttype": {"application/json"},
		"ce-comexampleext":   {"ext%20%C3%A9"},
	}
	plain := map[string][]string{"ce-type": {"com.example.é"}, "Nats-Msg-Id": {"m-1"}}
	jsonHeader := map[string][]string{"ce-type": {"com.example.é"}, "Nats-Msg-Id": {"m-1"}, "Content-Type": {"application/json"}}

	tests := []struct {
		name   string
		format string
		header map[string][]string
		data   string
		want   *event.Event
	}{
		{"binary", "binary", plain, "\x00\x01bytes", wrapped("m-1", "application/octet-stream", []byte("\x00\x01bytes"))},
		{"binary json", "binary", jsonHeader, `{"a":1}`, wrapped("m-1", "application/json", []byte(`{"a":1}`))},
		{"structured bytes", "structured", plain, "\x00\x01bytes", wrapped("m-1", "application/octet-stream", []byte("\x00\x01bytes"))},
		{"structured json", "structured", jsonHeader, `{"a":"é"}`, wrapped("m-1", "application/json", []byte(`{"a":"é"}`))},
		{"pass-through binary as binary", "binary", binaryHeader, `{"x":"é"}`, own()},
		{"pass-through binary as structured", "structured", binaryHeader, `{"x":"é"}`, own()},
		{"pass-through structured as binary", "binary", map[string][]string{"Content-Type": {"application/cloudevents+json"}}, string(structuredDoc), own()},
		{"pass-through structured as structured", "structured", map[string][]string{"content-type": {"application/cloudevents+json"}}, string(structuredDoc), own()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := &projection.Record{Stream: "JOURNAL", Seq: 42, Subject: subject, Time: when, Header: tc.header, Data: []byte(tc.data)}
			res, err := cloudevents.New().Project(projection.Target{Format: tc.format}, r)
			if err != nil {
				t.Fatalf("Project: %v", err)
			}
			m := res.Messages[0]
			got := rcv.deliver(t, m)
			assertSameEvent(t, got, tc.want)
			if m.ID != tc.want.ID() {
				t.Errorf("message ID = %q, want the event id %q", m.ID, tc.want.ID())
			}
		})
	}
}

// assertSameEvent compares what a receiver can observe of two events: every
// context attribute, every extension in its canonical string form, and the
// data bytes.
func assertSameEvent(t *testing.T, got, want *event.Event) {
	t.Helper()
	attrs := []struct {
		name      string
		got, want string
	}{
		{"specversion", got.SpecVersion(), want.SpecVersion()},
		{"id", got.ID(), want.ID()},
		{"source", got.Source(), want.Source()},
		{"type", got.Type(), want.Type()},
		{"subject", got.Subject(), want.Subject()},
		{"datacontenttype", got.DataContentType(), want.DataContentType()},
		{"dataschema", got.DataSchema(), want.DataSchema()},
		{"time", got.Time().Format(time.RFC3339Nano), want.Time().Format(time.RFC3339Nano)},
	}
	for _, a := range attrs {
		if a.got != a.want {
			t.Errorf("%s = %q, want %q", a.name, a.got, a.want)
		}
	}
	if g, w := canonicalExtensions(t, got), canonicalExtensions(t, want); g != w {
		t.Errorf("extensions = %s, want %s", g, w)
	}
	if !bytes.Equal(got.Data(), want.Data()) {
		t.Errorf("data = %q, want %q", got.Data(), want.Data())
	}
}

func canonicalExtensions(t *testing.T, e *event.Event) string {
	t.Helper()
	var b strings.Builder
	for _, name := range sortedKeys(e.Extensions()) {
		s, err := types.Format(e.Extensions()[name])
		if err != nil {
			t.Fatalf("extension %s: %v", name, err)
		}
		b.WriteString(name + "=" + s + ";")
	}
	return b.String()
}

func sortedKeys(m map[string]any) []string {
	return slices.Sorted(maps.Keys(m))
}

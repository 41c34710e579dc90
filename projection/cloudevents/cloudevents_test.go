package cloudevents_test

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/jetstream-bridge/bridge/projection"
	"github.com/jetstream-bridge/bridge/projection/cloudevents"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var recordTime = time.Date(2026, 3, 15, 10, 30, 0, 123456789, time.UTC)

func record(seq uint64, subject string, header map[string][]string, data string) *projection.Record {
	return &projection.Record{
		Stream:  "JOURNAL",
		Seq:     seq,
		Subject: subject,
		Time:    recordTime,
		Header:  header,
		Data:    []byte(data),
	}
}

func projectOne(t *testing.T, p *cloudevents.Projection, target projection.Target, r *projection.Record) projection.Message {
	t.Helper()
	res, err := p.Project(target, r)
	if err != nil {
		t.Fatalf("Project: %v", err)
	}
	if len(res.Messages) != 1 || res.Terminal {
		t.Fatalf("Project gave %d messages, terminal %v; want 1, false", len(res.Messages), res.Terminal)
	}
	return res.Messages[0]
}

func TestBinaryWrapsPlainMessage(t *testing.T) {
	p := cloudevents.New()
	r := record(17, "journal.orders.created", map[string][]string{
		"Nats-Msg-Id":       {"order-42"},
		"content-type":      {"application/json"},
		"Nats-Expected-Seq": {"16"},
		"X-App":             {"kept out"},
	}, `{"order":42}`)

	m := projectOne(t, p, projection.Target{ID: "billing"}, r)

	want := map[string]string{
		"Ce-Specversion": "1.0",
		"Ce-Id":          "order-42",
		"Ce-Source":      "/jetstream/JOURNAL",
		"Ce-Type":        "io.nats.jetstream.message",
		"Ce-Subject":     "journal.orders.created",
		"Ce-Time":        "2026-03-15T10:30:00.123456789Z",
		"Ce-Natsseq":     "17",
		"Content-Type":   "application/json",
	}
	assertHeaders(t, m.Header, want)
	if m.ID != "order-42" {
		t.Errorf("ID = %q, want the ce-id order-42", m.ID)
	}
	if string(m.Body) != `{"order":42}` {
		t.Errorf("body = %q, want the payload bytes", m.Body)
	}
}

func TestBinaryDefaults(t *testing.T) {
	tests := []struct {
		name   string
		opts   []cloudevents.Option
		target projection.Target
		header map[string][]string
		want   map[string]string
	}{
		{
			name: "no headers",
			want: map[string]string{"Ce-Id": "JOURNAL-9", "Content-Type": "application/octet-stream", "Ce-Type": "io.nats.jetstream.message"},
		},
		{
			name:   "registration content type",
			target: projection.Target{DataContentType: "text/plain; charset=utf-8"},
			want:   map[string]string{"Content-Type": "text/plain; charset=utf-8"},
		},
		{
			name:   "nats content type wins over the registration's",
			target: projection.Target{DataContentType: "text/plain"},
			header: map[string][]string{"CONTENT-TYPE": {"application/xml"}},
			want:   map[string]string{"Content-Type": "application/xml"},
		},
		{
			name:   "canonical spelling wins",
			header: map[string][]string{"content-type": {"text/plain"}, "Content-Type": {"application/xml"}, "CONTENT-TYPE": {"text/csv"}},
			want:   map[string]string{"Content-Type": "application/xml"},
		},
		{
			name:   "else the alphabetically first spelling",
			header: map[string][]string{"content-type": {"text/plain"}, "CONTENT-TYPE": {"text/csv"}},
			want:   map[string]string{"Content-Type": "text/csv"},
		},
		{
			name:   "ce-type header in any case",
			header: map[string][]string{"CE-TYPE": {"com.example.order.created"}},
			want:   map[string]string{"Ce-Type": "com.example.order.created", "Ce-Id": "JOURNAL-9"},
		},
		{
			name: "configured stream, source and type",
			opts: []cloudevents.Option{cloudevents.WithStream("ORDERS"), cloudevents.WithSource("https://orders.example/events"), cloudevents.WithType("com.example.any")},
			want: map[string]string{"Ce-Source": "https://orders.example/events", "Ce-Type": "com.example.any", "Ce-Id": "JOURNAL-9"},
		},
		{
			name: "configured stream names the default source",
			opts: []cloudevents.Option{cloudevents.WithStream("ORDERS")},
			want: map[string]string{"Ce-Source": "/jetstream/ORDERS"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := projectOne(t, cloudevents.New(tc.opts...), tc.target, record(9, "journal.x", tc.header, "payload"))
			assertHeaders(t, m.Header, tc.want)
		})
	}
}

func TestNatsSeqBeyondInt32IsDecimal(t *testing.T) {
	m := projectOne(t, cloudevents.New(), projection.Target{}, record(1<<33, "journal.x", nil, "x"))
	assertHeaders(t, m.Header, map[string]string{"Ce-Natsseq": "8589934592", "Ce-Id": "JOURNAL-8589934592"})
}

func TestNoNatsHeaderLeaks(t *testing.T) {
	header := map[string][]string{
		"Nats-Msg-Id":                 {"a"},
		"nats-rollup":                 {"sub"},
		"Nats-Expected-Last-Sequence": {"1"},
		"Authorization":               {"Bearer not-for-receivers"},
	}
	for _, format := range []string{"binary", "structured"} {
		m := projectOne(t, cloudevents.New(), projection.Target{Format: format}, record(3, "journal.x", header, "x"))
		for k := range m.Header {
			if !strings.HasPrefix(k, "Ce-") && k != "Content-Type" {
				t.Errorf("%s: header %q sent to the receiver", format, k)
			}
		}
	}
}

func TestStructuredData(t *testing.T) {
	tests := []struct {
		name, contentType, payload string
		wantData                   any // decoded "data"; nil when absent
		wantBase64                 string
	}{
		{name: "json as data", contentType: "application/json", payload: `{"a":[1,2]}`, wantData: map[string]any{"a": []any{1.0, 2.0}}},
		{name: "json with charset", contentType: "application/json; charset=utf-8", payload: `[true]`, wantData: []any{true}},
		{name: "invalid json as base64", contentType: "application/json", payload: `{"a":`, wantBase64: `{"a":`},
		{name: "bytes as base64", contentType: "application/octet-stream", payload: "\x00\xff", wantBase64: "\x00\xff"},
		{name: "text as base64", contentType: "text/plain", payload: "héllo", wantBase64: "héllo"},
		{name: "+json as base64", contentType: "application/vnd.example+json", payload: `{"a":1}`, wantBase64: `{"a":1}`},
		{name: "empty payload has no data", contentType: "application/json", payload: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := record(5, "journal.x", map[string][]string{"Content-Type": {tc.contentType}}, tc.payload)
			m := projectOne(t, cloudevents.New(), projection.Target{Format: "structured"}, r)
			if ct := m.Header.Get("Content-Type"); ct != "application/cloudevents+json" {
				t.Fatalf("Content-Type = %q, want application/cloudevents+json", ct)
			}
			var doc map[string]any
			if err := json.Unmarshal(m.Body, &doc); err != nil {
				t.Fatalf("body is not JSON: %v\n%s", err, m.Body)
			}
			if doc["datacontenttype"] != tc.contentType || doc["id"] != "JOURNAL-5" || doc["natsseq"] != 5.0 {
				t.Errorf("attributes = %v", doc)
			}
			data, hasData := doc["data"]
			b64, hasB64 := doc["data_base64"]
			switch {
			case tc.wantData != nil:
				if !hasData || hasB64 || !jsonEqual(data, tc.wantData) {
					t.Errorf("data = %v, data_base64 = %v; want data %v", data, b64, tc.wantData)
				}
			case tc.wantBase64 != "":
				if hasData || b64 != base64.StdEncoding.EncodeToString([]byte(tc.wantBase64)) {
					t.Errorf("data = %v, data_base64 = %v; want data_base64 of %q", data, b64, tc.wantBase64)
				}
			default:
				if hasData || hasB64 {
					t.Errorf("data = %v, data_base64 = %v; want neither", data, b64)
				}
			}
		})
	}
}

func TestStructuredKeepsJSONPayloadBytes(t *testing.T) {
	payload := "{\"a\": 1,\n  \"b\": \"<&>\"}"
	r := record(5, "journal.x", map[string][]string{"Content-Type": {"application/json"}}, payload)
	m := projectOne(t, cloudevents.New(), projection.Target{Format: "structured"}, r)
	if !strings.Contains(string(m.Body), `"data":`+payload) {
		t.Errorf("body %s does not carry the payload %s unchanged", m.Body, payload)
	}
}

func TestPercentEncodesCEHeaders(t *testing.T) {
	subject := `journal.a b "q" 100% é 日本`
	r := record(6, subject, map[string][]string{"ce-type": {"com.example.é"}}, "x")
	m := projectOne(t, cloudevents.New(), projection.Target{}, r)
	assertHeaders(t, m.Header, map[string]string{
		"Ce-Subject": "journal.a%20b%20%22q%22%20100%25%20%C3%A9%20%E6%97%A5%E6%9C%AC",
		"Ce-Type":    "com.example.%C3%A9",
	})
	for k, vs := range m.Header {
		for _, v := range vs {
			for i := 0; i < len(v); i++ {
				if strings.HasPrefix(k, "Ce-") && (v[i] <= ' ' || v[i] >= 0x7f || v[i] == '"') {
					t.Errorf("header %s = %q holds byte %#x", k, v, v[i])
				}
			}
		}
	}
}

func TestPassThroughBinary(t *testing.T) {
	header := map[string][]string{
		"ce-specversion":     {"1.0"},
		"CE-ID":              {"evt-1"},
		"Ce-Source":          {"https://orders.example/src"},
		"ce-type":            {"com.example.order.created"},
		"ce-subject":         {"order%2042%20%C3%A9"},
		"ce-time":            {"2026-01-02T03:04:05Z"},
		"ce-datacontenttype": {"application/json"},
		"ce-comexampleext":   {"ext value"},
		"Nats-Msg-Id":        {"ignored"},
	}
	r := record(8, "journal.orders", header, `{"order":42}`)
	m := projectOne(t, cloudevents.New(), projection.Target{DataContentType: "text/plain"}, r)
	assertHeaders(t, m.Header, map[string]string{
		"Ce-Specversion":   "1.0",
		"Ce-Id":            "evt-1",
		"Ce-Source":        "https://orders.example/src",
		"Ce-Type":          "com.example.order.created",
		"Ce-Subject":       "order%2042%20%C3%A9",
		"Ce-Time":          "2026-01-02T03:04:05Z",
		"Ce-Comexampleext": "ext%20value",
		"Content-Type":     "application/json",
	})
	if len(m.Header) != 8 {
		t.Errorf("headers = %v; want exactly the event's own attributes (no natsseq, nothing from NATS)", m.Header)
	}
	if m.ID != "evt-1" || string(m.Body) != `{"order":42}` {
		t.Errorf("ID = %q, body = %q", m.ID, m.Body)
	}
}

func TestPassThroughBinaryTakesNatsContentType(t *testing.T) {
	header := map[string][]string{
		"ce-specversion": {"1.0"}, "ce-id": {"e"}, "ce-source": {"/s"}, "ce-type": {"t"},
		"Content-Type": {"text/csv"},
	}
	m := projectOne(t, cloudevents.New(), projection.Target{}, record(8, "journal.x", header, "a,b"))
	assertHeaders(t, m.Header, map[string]string{"Content-Type": "text/csv"})
}

func TestPassThroughStructured(t *testing.T) {
	doc := `{"specversion":"1.0","id":"evt-2","source":"/orders","type":"com.example.shipped","subject":"s 1","datacontenttype":"application/json","data":{"x":1},"comexampleext":"v"}`
	header := map[string][]string{"content-type": {"application/cloudevents+json; charset=UTF-8"}}

	m := projectOne(t, cloudevents.New(), projection.Target{}, record(9, "journal.x", header, doc))
	assertHeaders(t, m.Header, map[string]string{
		"Ce-Id": "evt-2", "Ce-Source": "/orders", "Ce-Type": "com.example.shipped",
		"Ce-Subject": "s%201", "Content-Type": "application/json", "Ce-Comexampleext": "v",
	})
	if string(m.Body) != `{"x":1}` || m.ID != "evt-2" {
		t.Errorf("binary: ID = %q, body = %s", m.ID, m.Body)
	}

	m = projectOne(t, cloudevents.New(), projection.Target{Format: "structured"}, record(9, "journal.x", header, doc))
	var got, want map[string]any
	if err := json.Unmarshal(m.Body, &got); err != nil {
		t.Fatal(err)
	}
	_ = json.Unmarshal([]byte(doc), &want)
	if !jsonEqual(got, want) {
		t.Errorf("structured body = %s\nwant %s", m.Body, doc)
	}
}

func TestPermanentErrorsNameTheProblemAndSequence(t *testing.T) {
	ce := func(kv ...string) map[string][]string {
		h := map[string][]string{}
		for i := 0; i < len(kv); i += 2 {
			h[kv[i]] = append(h[kv[i]], kv[i+1])
		}
		return h
	}
	structured := ce("Content-Type", "application/cloudevents+json")
	tests := []struct {
		name   string
		opts   []cloudevents.Option
		target projection.Target
		header map[string][]string
		data   string
		want   string
	}{
		{name: "binary without id", header: ce("ce-specversion", "1.0", "ce-source", "/s", "ce-type", "t"), want: "id"},
		{name: "binary without source", header: ce("ce-specversion", "1.0", "ce-id", "i", "ce-type", "t"), want: "source"},
		{name: "binary without type", header: ce("ce-specversion", "1.0", "ce-id", "i", "ce-source", "/s"), want: "type"},
		{name: "binary bad specversion", header: ce("ce-specversion", "2.0", "ce-id", "i", "ce-source", "/s", "ce-type", "t"), want: `specversion "2.0"`},
		{name: "binary repeated attribute", header: ce("ce-specversion", "1.0", "ce-id", "i", "CE-ID", "j", "ce-source", "/s", "ce-type", "t"), want: "Ce-Id has 2 values"},
		{name: "binary bad attribute name", header: ce("ce-specversion", "1.0", "ce-id", "i", "ce-source", "/s", "ce-type", "t", "ce-bad_name", "x"), want: `"ce-bad_name"`},
		{name: "binary bad time", header: ce("ce-specversion", "1.0", "ce-id", "i", "ce-source", "/s", "ce-type", "t", "ce-time", "yesterday"), want: "binary event"},
		{name: "structured malformed", header: structured, data: `{"specversion":"1.0",`, want: "structured event"},
		{name: "structured without id", header: structured, data: `{"specversion":"1.0","source":"/s","type":"t"}`, want: "id"},
		{name: "structured 0.3", header: structured, data: `{"specversion":"0.3","id":"i","source":"/s","type":"t"}`, want: `specversion "0.3"`},
		{name: "structured batch", header: ce("Content-Type", "application/cloudevents-batch+json"), data: `[]`, want: "not supported"},
		{name: "unknown format", target: projection.Target{Format: "xml"}, want: `format "xml"`},
		{name: "bad content type", header: ce("Content-Type", "not a type"), want: "datacontenttype"},
		{name: "empty Nats-Msg-Id", header: ce("Nats-Msg-Id", " "), want: "id"},
		{name: "invalid utf-8 subject", header: ce("ce-type", "\xff"), want: "type is not valid UTF-8"},
		{name: "bad source", opts: []cloudevents.Option{cloudevents.WithSource("%zz")}, want: `source "%zz"`},
		{name: "cloudevents content type in binary", target: projection.Target{DataContentType: "application/cloudevents+json"}, want: "structured"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := cloudevents.New(tc.opts...).Project(tc.target, record(4711, "journal.x", tc.header, tc.data))
			if err == nil {
				t.Fatal("Project succeeded; want a permanent error")
			}
			if msg := err.Error(); !strings.Contains(msg, "journal message 4711") || !strings.Contains(msg, tc.want) {
				t.Errorf("error %q does not name sequence 4711 and %q", msg, tc.want)
			}
		})
	}
}

func TestCheckSource(t *testing.T) {
	for _, ok := range []string{"/jetstream/JOURNAL", "https://example.com/x", "urn:example:x"} {
		if err := cloudevents.CheckSource(ok); err != nil {
			t.Errorf("CheckSource(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "  ", "%zz", "a\nb"} {
		if err := cloudevents.CheckSource(bad); err == nil {
			t.Errorf("CheckSource(%q) = nil, want an error", bad)
		}
	}
}

func TestNamespace(t *testing.T) {
	if ns := cloudevents.New().Namespace(); ns != projection.Outbox {
		t.Errorf("Namespace = %q, want outbox", ns)
	}
}

func assertHeaders(t *testing.T, got http.Header, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if vs := got.Values(k); len(vs) != 1 || vs[0] != v {
			t.Errorf("header %s = %q, want [%q]", k, vs, v)
		}
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func TestPassThroughRefusesInvalidUTF8Source(t *testing.T) {
	header := map[string][]string{
		"ce-specversion": {"1.0"}, "ce-id": {"e"}, "ce-source": {"urn:%FF"}, "ce-type": {"t"},
	}
	_, err := cloudevents.New().Project(projection.Target{Format: "structured"}, record(12, "journal.x", header, "x"))
	if err == nil || !strings.Contains(err.Error(), "journal message 12: attribute source is not valid UTF-8") {
		t.Errorf("error %v; want the invalid source named with sequence 12", err)
	}
}

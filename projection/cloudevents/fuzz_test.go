package cloudevents_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/cloudevents/sdk-go/v2/binding"
	"github.com/cloudevents/sdk-go/v2/event"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"

	"github.com/jetstream-bridge/bridge/filter"
	"github.com/jetstream-bridge/bridge/projection"
	"github.com/jetstream-bridge/bridge/projection/cloudevents"
)

// parseHeader reads "Key: value" lines into a NATS header map.
func parseHeader(s string) map[string][]string {
	h := map[string][]string{}
	for line := range strings.SplitSeq(s, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok {
			h[k] = append(h[k], strings.TrimSpace(v))
		}
	}
	return h
}

// FuzzProject checks that no record panics the projection, that every
// refusal names the record's sequence, and that whatever is produced is a
// request net/http can send and the SDK's reader decodes to an event with
// the message's id: ce- values are printable ASCII, no Nats-* header leaks,
// structured bodies are UTF-8 JSON, binary bodies are the payload. The
// event a filter reads (Describe) fails exactly where Project does, has
// the message's id, and filters run on it without panicking, whatever
// the payload (CONTRACT §13).
func FuzzProject(f *testing.F) {
	f.Add([]byte(`{"a":1}`), "Content-Type: application/json\nNats-Msg-Id: m-1", "journal.orders", false, uint64(1))
	f.Add([]byte("\x00\xff"), "ce-type: com.example.é", `journal.a b "q" 100%`, true, uint64(1<<40))
	f.Add([]byte(`{"specversion":"1.0","id":"i","source":"/s","type":"t","data":"x","datacontenttype":"text/plain"}`), "content-type: application/cloudevents+json", "j", true, uint64(3))
	f.Add([]byte("payload"), "ce-specversion: 1.0\nCE-ID: a%20b\nce-source: /s\nce-type: t\nce-ext: %C3%A9", "j", false, uint64(4))
	f.Add([]byte("x"), "ce-specversion: 1.0\nce-id: a\nce-id: b", "j", false, uint64(5))

	f.Add([]byte(`{"total": 150, "items": [{"sku": "a"}], "n": null}`), "Content-Type: application/vnd.x+json\nX-Tenant: eu", "journal.orders.1", false, uint64(6))
	f.Add([]byte(`[[[[{"total": "x"}]]]]`), "ce-specversion: 1.0\nce-id: a\nce-source: /s\nce-type: order.created\nce-time: 2026-01-01T00:00:00Z", "j", true, uint64(7))

	p := cloudevents.New()
	var filters []*filter.Program
	for _, expr := range []string{
		"event.type == 'order.created' && data.total > 100",
		"headers['x-tenant'] == 'eu' || subject.startsWith('journal.orders.')",
		"data.items.exists(i, i.sku == 'a') && event.time > timestamp('2020-01-01T00:00:00Z')",
		"size(data) > 2 && event.natsseq > 3 && data != b''",
	} {
		prg, err := filter.Compile(expr)
		if err != nil {
			f.Fatal(err)
		}
		filters = append(filters, prg)
	}
	f.Fuzz(func(t *testing.T, data []byte, header, subject string, structured bool, seq uint64) {
		target := projection.Target{ID: "hook", DataContentType: "application/json"}
		if structured {
			target.Format = "structured"
		}
		r := &projection.Record{Stream: "JOURNAL", Seq: seq, Subject: subject, Header: parseHeader(header), Data: data}
		res, err := p.Project(target, r)
		ev, derr := p.Describe(target, r)
		if (err == nil) != (derr == nil) {
			t.Fatalf("Project: %v; Describe: %v", err, derr)
		}
		if err == nil {
			in := filter.NewInput(ev, r, nil)
			for _, prg := range filters {
				_, _ = prg.Match(in)
			}
			if id := ev.Attributes["id"]; id != res.Messages[0].ID {
				t.Fatalf("filter's event id %v, message ID %q", id, res.Messages[0].ID)
			}
		}
		if err != nil {
			if !strings.Contains(err.Error(), "journal message "+strconv.FormatUint(seq, 10)+":") {
				t.Fatalf("error %q does not name sequence %d", err, seq)
			}
			return
		}
		if len(res.Messages) != 1 || res.Terminal {
			t.Fatalf("got %d messages, terminal %v", len(res.Messages), res.Terminal)
		}
		m := res.Messages[0]
		checkSendable(t, m)
		if structured && (!utf8.Valid(m.Body) || !json.Valid(m.Body)) {
			t.Fatalf("structured body is not UTF-8 JSON: %q", m.Body)
		}
		e, err := decodeLikeAReceiver(m)
		if err != nil {
			t.Fatalf("receiver cannot decode %v %q: %v", m.Header, m.Body, err)
		}
		if e.ID() != m.ID {
			t.Fatalf("decoded id %q, message ID %q", e.ID(), m.ID)
		}
		if !structured && !bytes.Equal(e.Data(), data) && !isEventFormatHeader(r.Header) {
			t.Fatalf("binary body %q is not the payload %q", e.Data(), data)
		}
	})
}

func isEventFormatHeader(h map[string][]string) bool {
	for k, vs := range h {
		if strings.EqualFold(k, "Content-Type") && len(vs) > 0 && strings.HasPrefix(strings.ToLower(strings.TrimSpace(vs[0])), "application/cloudevents") {
			return true
		}
	}
	return false
}

func checkSendable(t *testing.T, m projection.Message) {
	t.Helper()
	if m.ID == "" {
		t.Fatal("empty message ID")
	}
	for k, vs := range m.Header {
		if strings.HasPrefix(strings.ToLower(k), "nats") {
			t.Fatalf("header %q leaked to the receiver", k)
		}
		for _, v := range vs {
			for i := 0; i < len(v); i++ {
				c := v[i]
				if strings.HasPrefix(k, "Ce-") && (c <= ' ' || c >= 0x7f || c == '"') {
					t.Fatalf("header %s = %q holds byte %#x", k, v, c)
				}
				if c < ' ' && c != '\t' || c == 0x7f {
					t.Fatalf("header %s = %q is not a valid HTTP field value", k, v)
				}
			}
		}
	}
}

// decodeLikeAReceiver percent-decodes the ce- values, as the HTTP binding
// requires of a receiver, and decodes the request with the SDK's reader.
func decodeLikeAReceiver(m projection.Message) (*event.Event, error) {
	h := m.Header.Clone()
	for k, vs := range h {
		if strings.HasPrefix(k, "Ce-") {
			for i, v := range vs {
				d, err := url.PathUnescape(v)
				if err != nil {
					return nil, err
				}
				vs[i] = d
			}
		}
	}
	req := &http.Request{Header: h, Body: io.NopCloser(bytes.NewReader(m.Body))}
	return binding.ToEvent(context.Background(), cehttp.NewMessageFromHttpRequest(req.WithContext(context.Background())))
}

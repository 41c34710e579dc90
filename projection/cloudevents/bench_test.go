package cloudevents_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jetstream-bridge/bridge/projection"
	"github.com/jetstream-bridge/bridge/projection/cloudevents"
)

// benchRecord is a typical outbox message: a 1 KiB JSON document with a
// content type and a deduplication id.
func benchRecord() *projection.Record {
	doc := `{"order":42,"note":"` + strings.Repeat("x", 1024-len(`{"order":42,"note":""}`)) + `"}`
	return &projection.Record{
		Stream:  "JOURNAL",
		Seq:     123456,
		Subject: "journal.orders.created",
		Time:    time.Date(2026, 3, 15, 10, 30, 0, 123456789, time.UTC),
		Header:  map[string][]string{"Nats-Msg-Id": {"order-42"}, "Content-Type": {"application/json"}},
		Data:    []byte(doc),
	}
}

func benchmarkProject(b *testing.B, format string) {
	p := cloudevents.New()
	r := benchRecord()
	t := projection.Target{ID: "billing", Format: format}
	b.ReportAllocs()
	b.SetBytes(int64(len(r.Data)))
	for b.Loop() {
		if _, err := p.Project(t, r); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkProjectBinary1KiB(b *testing.B)     { benchmarkProject(b, "binary") }
func BenchmarkProjectStructured1KiB(b *testing.B) { benchmarkProject(b, "structured") }

// BenchmarkLoopbackPOST1KiB is the yardstick for the two above: one POST of
// an already projected 1 KiB message to a receiver on loopback, which is
// what every projection is followed by. The projection should cost a small
// fraction of it.
func BenchmarkLoopbackPOST1KiB(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	res, err := cloudevents.New().Project(projection.Target{}, benchRecord())
	if err != nil {
		b.Fatal(err)
	}
	m := res.Messages[0]
	client := srv.Client()
	b.ReportAllocs()
	for b.Loop() {
		req, err := http.NewRequest(http.MethodPost, srv.URL, bytes.NewReader(m.Body))
		if err != nil {
			b.Fatal(err)
		}
		req.Header = m.Header.Clone()
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

package webhook

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jetstream-bridge/bridge/projection"
)

// benchServer answers 204 after reading the body, like a fast receiver.
func benchServer(b *testing.B) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	b.Cleanup(srv.Close)
	return srv
}

func benchBody() []byte { return bytes.Repeat([]byte("a"), 1024) }

// BenchmarkSend1KiB is a full Send: URL checks, signing with one secret,
// headers, POST on a kept-alive connection, classification.
func BenchmarkSend1KiB(b *testing.B) {
	srv := benchServer(b)
	s := NewSender()
	b.Cleanup(s.Close)
	msg := projection.Message{ID: "JOURNAL-1", Header: http.Header{"Content-Type": {"application/json"}}, Body: benchBody()}
	req := Request{Namespace: projection.Outbox, URL: srv.URL + "/hook", Message: msg, Secrets: []string{testSecret(1, 32)}, At: time.Now()}
	b.SetBytes(int64(len(msg.Body)))
	b.ReportAllocs()
	for b.Loop() {
		if o := s.Send(context.Background(), req); !o.OK() {
			b.Fatal(o.Error())
		}
	}
}

// BenchmarkBarePOST1KiB is the floor Send is measured against: a plain
// http.Client POST of the same bytes to the same kind of server.
func BenchmarkBarePOST1KiB(b *testing.B) {
	srv := benchServer(b)
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	b.Cleanup(c.CloseIdleConnections)
	body := benchBody()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		resp, err := c.Post(srv.URL+"/hook", "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			b.Fatal(resp.Status)
		}
	}
}

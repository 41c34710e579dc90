package bridge_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jetstream-bridge/bridge/bridge"
	"github.com/jetstream-bridge/bridge/projection/cloudevents"
)

// BenchmarkDrain measures one registration draining a backlog of 1 KiB
// messages through the real stack; BenchmarkBarePOST is the sequential
// POST loop it sits on, to compare in one run.
func BenchmarkDrain(b *testing.B) { benchDrain(b, newEnv(b)) }

// benchDrain delivers b.N messages of 1 KiB to one registration of e,
// through a worker with opts.
func benchDrain(b *testing.B, e *env, opts ...bridge.Option) {
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer sink.Close()
	payload := strings.Repeat("x", 1024)
	for range b.N {
		e.publish("journal.bench", payload)
	}
	e.register("r", sink.URL, "journal.>")
	w := e.workerFor(cloudevents.New(cloudevents.WithStream(stream)), opts...)
	b.ResetTimer()
	ctx := context.Background()
	for delivered := 0; delivered < b.N; {
		rep, err := w.Sweep(ctx, time.Now(), 16)
		if err != nil {
			b.Fatal(err)
		}
		delivered += rep.Deliveries
		if err := e.db.Flush(ctx); err != nil {
			b.Fatal(err)
		}
		w.Wake("r")
	}
}

func BenchmarkBarePOST(b *testing.B) {
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer sink.Close()
	payload := bytes.Repeat([]byte("x"), 1024)
	c := &http.Client{}
	b.ResetTimer()
	for range b.N {
		resp, err := c.Post(sink.URL, "application/octet-stream", bytes.NewReader(payload))
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

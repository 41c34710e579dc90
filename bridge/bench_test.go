package bridge_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/jetstream-bridge/bridge/bridge"
	"github.com/jetstream-bridge/bridge/cursor"
	"github.com/jetstream-bridge/bridge/internal/spanbatch"
	"github.com/jetstream-bridge/bridge/projection/cloudevents"
)

// BenchmarkDrain measures one registration draining a backlog of 1 KiB
// messages through the real stack; BenchmarkBarePOST is the sequential
// POST loop it sits on, to compare in one run.
func BenchmarkDrain(b *testing.B) { benchDrain(b, newEnv(b)) }

// BenchmarkDrainOptions is BenchmarkDrain for a plain registration and for
// one with three headers of its own and an OAuth 2.0 grant (a token
// endpoint on loopback), to compare in one run what the options cost a
// drain beyond the POST (test/bench S1h).
func BenchmarkDrainOptions(b *testing.B) {
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"access_token":"bench-token-0123456789abcdef","token_type":"Bearer","expires_in":3600}`)
	}))
	defer tokens.Close()
	b.Run("plain", func(b *testing.B) { benchDrain(b, newEnv(b)) })
	b.Run("headers+oauth2", func(b *testing.B) {
		e := newEnv(b)
		e.shape = func(c *cursor.Config) {
			c.Headers = map[string]string{"X-Team": "billing", "X-Env": "bench", "X-Tenant": "tenant-0042"}
			c.OAuth2 = &cursor.OAuth2{TokenURL: tokens.URL + "/token", ClientID: "bench", ClientSecret: "bench-secret", Scopes: []string{"events:write"}}
		}
		benchDrain(b, e)
	})
}

// BenchmarkDrainSpans is BenchmarkDrain without and with a span per POST
// exported over OTLP/HTTP, through the batch processor the daemon uses, to
// a collector on loopback that discards what it reads (test/bench S1s).
func BenchmarkDrainSpans(b *testing.B) {
	b.Run("off", func(b *testing.B) { benchDrain(b, newEnv(b)) })
	b.Run("otlp", func(b *testing.B) {
		col := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
		}))
		defer col.Close()
		exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(col.URL))
		if err != nil {
			b.Fatal(err)
		}
		batching, err := spanbatch.ConfigFromEnv(func(string) string { return "" })
		if err != nil {
			b.Fatal(err)
		}
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spanbatch.New(exp, batching)))
		defer func() { _ = tp.Shutdown(context.Background()) }()
		benchDrain(b, newEnv(b), bridge.WithTracer(tp))
	})
}

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

// BenchmarkBarePOSTOptions is BenchmarkBarePOST without and with what
// S1h's options add to each request (three headers and a bearer token):
// the share of the drain's loss that is the bigger request itself, paid
// by the client and the receiver alike, with no bridge in the way.
func BenchmarkBarePOSTOptions(b *testing.B) {
	extra := http.Header{
		"X-Team": {"billing"}, "X-Env": {"bench"}, "X-Tenant": {"tenant-0042"},
		"Authorization": {"Bearer bench-token-0123456789abcdef"},
	}
	for _, c := range []struct {
		name string
		h    http.Header
	}{{"plain", nil}, {"headers+bearer", extra}} {
		b.Run(c.name, func(b *testing.B) { benchBarePOST(b, c.h) })
	}
}

func benchBarePOST(b *testing.B, extra http.Header) {
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer sink.Close()
	payload := bytes.Repeat([]byte("x"), 1024)
	c := &http.Client{}
	b.ResetTimer()
	for range b.N {
		req, err := http.NewRequest(http.MethodPost, sink.URL, bytes.NewReader(payload))
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/octet-stream")
		for k, v := range extra {
			req.Header[k] = v
		}
		resp, err := c.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// BenchmarkDrainKeyed is BenchmarkDrain for a registration keyed by
// subject over 1,000 subjects with 16 POSTs in flight, beside the strict
// drain of the same messages and a bare loop keeping 16 POSTs in flight
// (test/bench S1k is the same with the real binary).
func BenchmarkDrainKeyed(b *testing.B) {
	b.Run("strict", func(b *testing.B) { benchDrainSubjects(b, newEnv(b), nil) })
	b.Run("subject16", func(b *testing.B) {
		benchDrainSubjects(b, newEnv(b), &cursor.Ordering{Key: cursor.OrderSubject, MaxInFlight: 16})
	})
	b.Run("bare16", func(b *testing.B) {
		sink := discardSink()
		defer sink.Close()
		payload := bytes.Repeat([]byte("x"), 1024)
		c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
		b.ResetTimer()
		var next atomic.Int64
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				for next.Add(1) <= int64(b.N) {
					resp, err := c.Post(sink.URL, "application/octet-stream", bytes.NewReader(payload))
					if err != nil {
						b.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			})
		}
		wg.Wait()
	})
}

func discardSink() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
}

// benchDrainSubjects delivers b.N messages of 1 KiB over 1,000 subjects
// to one registration of e with ordering o, through the daemon's path:
// Run, woken by the journal's tail.
func benchDrainSubjects(b *testing.B, e *env, o *cursor.Ordering) {
	sink := discardSink()
	defer sink.Close()
	payload := []byte(strings.Repeat("x", 1024))
	for i := range b.N {
		if _, err := e.js.PublishAsync(fmt.Sprintf("journal.bench.%d", i%1000), payload); err != nil {
			b.Fatal(err)
		}
	}
	<-e.js.PublishAsyncComplete()
	e.shape = func(c *cursor.Config) { c.Ordering = o }
	w := e.workerFor(cloudevents.New(cloudevents.WithStream(stream)))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b.ResetTimer()
	e.register("r", sink.URL, "journal.>")
	done := make(chan error, 1)
	go func() { done <- bridge.NewDaemon(e.db, e.reader, []*bridge.Worker{w}).Run(ctx) }()
	for e.get("r").NextSeq <= uint64(b.N) {
		time.Sleep(time.Millisecond)
	}
	b.StopTimer()
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

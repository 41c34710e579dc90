package bridge

import (
	"context"
	"net/http"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/jetstream-bridge/bridge/cursor"
	"github.com/jetstream-bridge/bridge/projection"
	"github.com/jetstream-bridge/bridge/webhook"
)

// answered is a sender whose receiver answers 204 at once, so what a
// POST costs the worker is all that is measured.
type answered struct{}

func (answered) Send(context.Context, webhook.Request) webhook.Outcome {
	return webhook.Outcome{Status: http.StatusNoContent, Class: webhook.Class2xx}
}

type outboxOnly struct{}

func (outboxOnly) Namespace() projection.Namespace { return projection.Outbox }
func (outboxOnly) Project(projection.Target, *projection.Record) (projection.Result, error) {
	return projection.Result{}, nil
}

func postBench(tb testing.TB, opts ...Option) (*Worker, *cursor.Registration, webhook.Request) {
	tb.Helper()
	w, err := New(nil, nil, answered{}, outboxOnly{}, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	reg := &cursor.Registration{Config: cursor.Config{ID: "orders", Namespace: "outbox", URL: "http://127.0.0.1:9/hook"}}
	msg := projection.Message{ID: "JOURNAL-7", Body: []byte(`{"n":7}`), Header: http.Header{
		"Content-Type":               {"application/cloudevents+json"},
		projection.TraceparentHeader: {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
	}}
	return w, reg, requestOf(reg, msg, time.Now())
}

// A bridge that exports no spans pays nothing for tracing on the path of
// every POST: not a span, not an allocation.
func TestAnUntracedPostAllocatesNothing(t *testing.T) {
	w, reg, req := postBench(t)
	ctx := context.Background()
	if n := testing.AllocsPerRun(1000, func() { _ = w.post(ctx, reg, 7, 1, req) }); n != 0 {
		t.Errorf("an untraced POST allocates %v times in the worker", n)
	}
}

// BenchmarkPostUntraced and BenchmarkPostTraced are the worker's cost of
// one POST around the sender's, without and with a span exported through
// the SDK's batch processor.
func BenchmarkPostUntraced(b *testing.B) { benchPost(b) }

func BenchmarkPostTraced(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	benchPost(b, WithTracer(tp))
}

func benchPost(b *testing.B, opts ...Option) {
	w, reg, req := postBench(b, opts...)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_ = w.post(ctx, reg, 7, 1, req)
	}
}

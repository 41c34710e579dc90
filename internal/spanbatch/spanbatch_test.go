package spanbatch

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder is an exporter that keeps each batch's size and can hold an
// export until released.
type recorder struct {
	mu       sync.Mutex
	batches  []int
	names    []string
	shutdown bool
	entered  chan struct{} // receives once per export, when set
	hold     chan struct{} // an export waits on it, when set
}

func (r *recorder) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	if r.entered != nil {
		r.entered <- struct{}{}
	}
	if r.hold != nil {
		<-r.hold
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.batches = append(r.batches, len(spans))
	for _, s := range spans {
		r.names = append(r.names, s.Name())
	}
	return nil
}

func (r *recorder) Shutdown(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.shutdown = true
	return nil
}

func (r *recorder) exported() (batches []int, names []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int(nil), r.batches...), append([]string(nil), r.names...)
}

func provider(t *testing.T, exp sdktrace.SpanExporter, cfg Config) (*sdktrace.TracerProvider, *Processor) {
	t.Helper()
	p := New(exp, cfg)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(p))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, p
}

func endSpans(tp *sdktrace.TracerProvider, names ...string) {
	tr := tp.Tracer("test")
	for _, n := range names {
		_, s := tr.Start(context.Background(), n)
		s.End()
	}
}

func TestFlushExportsInBatchesInOrder(t *testing.T) {
	rec := &recorder{}
	tp, _ := provider(t, rec, Config{ScheduleDelay: time.Hour, ExportTimeout: time.Second, MaxQueue: 100, MaxBatch: 4})
	endSpans(tp, "a", "b", "c", "d", "e", "f", "g", "h", "i", "j")
	if err := tp.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	batches, names := rec.exported()
	if got := strings.Join(names, ""); got != "abcdefghij" {
		t.Fatalf("exported %q; want every span once, in the order they ended", got)
	}
	for _, n := range batches {
		if n > 4 {
			t.Fatalf("batches %v; none may exceed 4", batches)
		}
	}
}

func TestAFullBatchIsExportedWithoutWaitingForTheSchedule(t *testing.T) {
	rec := &recorder{}
	tp, _ := provider(t, rec, Config{ScheduleDelay: time.Hour, ExportTimeout: time.Second, MaxQueue: 100, MaxBatch: 3})
	endSpans(tp, "a", "b", "c")
	deadline := time.Now().Add(10 * time.Second)
	for {
		if batches, _ := rec.exported(); len(batches) == 1 && batches[0] == 3 {
			return
		}
		if time.Now().After(deadline) {
			batches, _ := rec.exported()
			t.Fatalf("after a full batch of 3, exported %v", batches)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestTheScheduleExportsAPartialBatch(t *testing.T) {
	rec := &recorder{}
	tp, _ := provider(t, rec, Config{ScheduleDelay: 20 * time.Millisecond, ExportTimeout: time.Second, MaxQueue: 100, MaxBatch: 50})
	endSpans(tp, "a", "b")
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, names := rec.exported(); strings.Join(names, "") == "ab" {
			return
		}
		if time.Now().After(deadline) {
			_, names := rec.exported()
			t.Fatalf("after the schedule, exported %v", names)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestShutdownExportsTheRestAndIgnoresLaterSpans(t *testing.T) {
	rec := &recorder{}
	p := New(rec, Config{ScheduleDelay: time.Hour, ExportTimeout: time.Second, MaxQueue: 100, MaxBatch: 50})
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(p))
	endSpans(tp, "a", "b")
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	endSpans(tp, "late")
	if err := p.ForceFlush(context.Background()); err != nil {
		t.Fatalf("flush after shutdown: %v", err)
	}
	_ = tp.Shutdown(context.Background())
	_, names := rec.exported()
	if strings.Join(names, ",") != "a,b" || !rec.shutdown {
		t.Fatalf("exported %v, exporter shut down %v; want a, b and shut down", names, rec.shutdown)
	}
}

func TestAFullQueueDropsAndCounts(t *testing.T) {
	rec := &recorder{entered: make(chan struct{}, 4), hold: make(chan struct{})}
	p := New(rec, Config{ScheduleDelay: time.Hour, ExportTimeout: time.Second, MaxQueue: 2, MaxBatch: 2})
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(p))
	endSpans(tp, "a", "b") // a full batch: the export takes it and waits
	<-rec.entered
	endSpans(tp, "c", "d", "e") // the queue holds two; e is dropped
	close(rec.hold)
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	_ = tp.Shutdown(context.Background())
	_, names := rec.exported()
	if got := strings.Join(names, ""); got != "abcd" || p.droppedSpans() != 1 {
		t.Fatalf("exported %q with %d dropped; want abcd and 1 dropped", got, p.droppedSpans())
	}
}

func TestConfigFromEnv(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	c, err := ConfigFromEnv(env(nil))
	if err != nil || c != (Config{5 * time.Second, 30 * time.Second, 2048, 512}) {
		t.Fatalf("defaults %+v, %v", c, err)
	}
	c, err = ConfigFromEnv(env(map[string]string{envScheduleDelay: "100", envMaxQueue: "10", envMaxBatch: "64", envExportTimeout: "250"}))
	if err != nil || c != (Config{100 * time.Millisecond, 250 * time.Millisecond, 10, 10}) {
		t.Fatalf("from the environment %+v, %v; want the batch capped at the queue", c, err)
	}
	for _, bad := range []string{"0", "-5", "soon"} {
		if _, err := ConfigFromEnv(env(map[string]string{envMaxBatch: bad})); err == nil || !strings.Contains(err.Error(), envMaxBatch) {
			t.Fatalf("%s=%s: err %v; want one naming the variable", envMaxBatch, bad, err)
		}
	}
}

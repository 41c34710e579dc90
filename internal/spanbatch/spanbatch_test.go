package spanbatch

import (
	"context"
	"strings"
	"sync"
	"syscall"
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

// BenchmarkEndSpan is the cost of starting and ending a span through the
// SDK's batch span processor and through this one, exporting to an
// exporter that discards, from as many goroutines as there are cores. Both
// queues are large enough that a loop this tight drops nothing.
func BenchmarkEndSpan(b *testing.B) {
	const queue = 1 << 22
	for _, c := range []struct {
		name string
		proc func() sdktrace.SpanProcessor
	}{
		{"sdk", func() sdktrace.SpanProcessor {
			return sdktrace.NewBatchSpanProcessor(discard{}, sdktrace.WithMaxQueueSize(queue))
		}},
		{"spanbatch", func() sdktrace.SpanProcessor {
			return New(discard{}, Config{ScheduleDelay: 5 * time.Second, ExportTimeout: 30 * time.Second, MaxQueue: queue, MaxBatch: 512})
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(c.proc()))
			defer func() { _ = tp.Shutdown(context.Background()) }()
			tr := tp.Tracer("bench")
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					_, s := tr.Start(context.Background(), "POST")
					s.End()
				}
			})
		})
	}
}

// BenchmarkSparseSpans ends one span every 20 µs from one goroutine, as a
// drain makes a span per POST, and reports the process's CPU per span
// (cpu-ns/op, the 20 µs of waiting included on both sides): between spans
// the SDK's export goroutine parks, and each span wakes it.
func BenchmarkSparseSpans(b *testing.B) {
	for _, c := range []struct {
		name string
		proc func() sdktrace.SpanProcessor
	}{
		{"sdk", func() sdktrace.SpanProcessor { return sdktrace.NewBatchSpanProcessor(discard{}) }},
		{"spanbatch", func() sdktrace.SpanProcessor {
			return New(discard{}, Config{ScheduleDelay: 5 * time.Second, ExportTimeout: 30 * time.Second, MaxQueue: 2048, MaxBatch: 512})
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(c.proc()))
			defer func() { _ = tp.Shutdown(context.Background()) }()
			tr := tp.Tracer("bench")
			before := cpuTime(b)
			for b.Loop() {
				_, s := tr.Start(context.Background(), "POST")
				s.End()
				for t := time.Now(); time.Since(t) < 20*time.Microsecond; {
					// the POST this span stands for
				}
			}
			b.ReportMetric(float64((cpuTime(b)-before).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

// cpuTime is the CPU the process has used, user and system.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

// Package spanbatch is an OpenTelemetry span processor that hands ended
// spans to an exporter in batches, as the SDK's batch span processor does,
// but wakes its export goroutine once per batch instead of once per span.
//
// Why not sdktrace.NewBatchSpanProcessor: it queues each ended span on a
// channel its goroutine waits on, so every span of a POST wakes that
// goroutine. In a drain of 1 KiB messages to a loopback receiver with a
// span per POST, those wake-ups were the largest part of what export cost:
// runtime.futex 0.44 s and findRunnable 0.59 s of 4.69 s of the bridge's
// CPU, against 0.23 s and 0.37 s of 3.85 s without spans, and S1s went
// from 0.79 to 0.88 with this processor (test/bench S1s,
// docs/performance.md). In process, BenchmarkSparseSpans (a span every
// 20 µs) measures the SDK's at about 6.5 µs of CPU a span and this one at
// about 1.7 µs; in a tight loop (BenchmarkEndSpan) they cost the same.
// Here an ended span is appended to a slice under a mutex, and the
// goroutine is woken only when a batch is full, on the schedule, on flush
// and on shutdown.
//
// It reads the same OTEL_BSP_* variables as the SDK's processor, with the
// same defaults, and drops spans past the queue's size as it does.
package spanbatch

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// The variables the processor reads, and their defaults (the SDK's).
const (
	envScheduleDelay = "OTEL_BSP_SCHEDULE_DELAY"        // ms, 5000
	envExportTimeout = "OTEL_BSP_EXPORT_TIMEOUT"        // ms, 30000
	envMaxQueue      = "OTEL_BSP_MAX_QUEUE_SIZE"        // 2048
	envMaxBatch      = "OTEL_BSP_MAX_EXPORT_BATCH_SIZE" // 512
)

// Config is how the processor batches.
type Config struct {
	ScheduleDelay time.Duration // the longest an ended span waits for its export
	ExportTimeout time.Duration // one export's bound
	MaxQueue      int           // spans held at most; more are dropped
	MaxBatch      int           // spans per export at most
}

// ConfigFromEnv is the configuration the OTEL_BSP_* variables ask for. A
// value that is not a positive integer is an error naming its variable.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	c := Config{ScheduleDelay: 5 * time.Second, ExportTimeout: 30 * time.Second, MaxQueue: 2048, MaxBatch: 512}
	for _, v := range []struct {
		name string
		ms   *time.Duration
		n    *int
	}{
		{envScheduleDelay, &c.ScheduleDelay, nil},
		{envExportTimeout, &c.ExportTimeout, nil},
		{envMaxQueue, nil, &c.MaxQueue},
		{envMaxBatch, nil, &c.MaxBatch},
	} {
		s := strings.TrimSpace(getenv(v.name))
		if s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			return c, fmt.Errorf("%s=%q: want a positive integer", v.name, s)
		}
		if v.ms != nil {
			*v.ms = time.Duration(n) * time.Millisecond
		} else {
			*v.n = n
		}
	}
	// As the SDK does: a batch is never larger than the queue.
	c.MaxBatch = min(c.MaxBatch, c.MaxQueue)
	return c, nil
}

// Processor batches ended, sampled spans for its exporter.
//
// Invariant: every span OnEnd accepted is exported by the goroutine, or
// counted as dropped, by the time Shutdown returns (within its context).
type Processor struct {
	exp sdktrace.SpanExporter
	cfg Config

	mu      sync.Mutex
	queue   []sdktrace.ReadOnlySpan
	dropped int
	closed  bool

	kick    chan struct{}   // a full batch is waiting; capacity 1
	flushes chan chan error // ForceFlush's requests
	stop    chan struct{}
	stopped chan struct{}
	once    sync.Once
}

var _ sdktrace.SpanProcessor = (*Processor)(nil)

// New starts the processor's export goroutine; Shutdown stops it.
func New(exp sdktrace.SpanExporter, cfg Config) *Processor {
	p := &Processor{
		exp: exp, cfg: cfg,
		queue:   make([]sdktrace.ReadOnlySpan, 0, cfg.MaxBatch),
		kick:    make(chan struct{}, 1),
		flushes: make(chan chan error),
		stop:    make(chan struct{}),
		stopped: make(chan struct{}),
	}
	go p.run()
	return p
}

// OnStart does nothing: spans are handed over when they end.
func (p *Processor) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd queues s for export, or drops it when the queue is full.
func (p *Processor) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	if len(p.queue) >= p.cfg.MaxQueue {
		p.dropped++
		p.mu.Unlock()
		return
	}
	p.queue = append(p.queue, s)
	full := len(p.queue) >= p.cfg.MaxBatch
	p.mu.Unlock()
	if full {
		// Every span past a full batch asks again (cheaply: a send
		// refused), so a queue that grew while an export ran is taken as
		// soon as the goroutine is free, not at the next tick.
		select {
		case p.kick <- struct{}{}:
		default: // a wake-up is pending already
		}
	}
}

// ForceFlush exports every span queued so far.
func (p *Processor) ForceFlush(ctx context.Context) error {
	reply := make(chan error, 1)
	select {
	case p.flushes <- reply:
	case <-p.stopped:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Shutdown exports what is queued, stops the goroutine and shuts the
// exporter down. Spans ending after it are ignored.
func (p *Processor) Shutdown(ctx context.Context) error {
	var err error
	p.once.Do(func() {
		p.mu.Lock()
		p.closed = true
		p.mu.Unlock()
		close(p.stop)
		select {
		case <-p.stopped:
		case <-ctx.Done():
			err = ctx.Err()
			return
		}
		if n := p.droppedSpans(); n > 0 {
			otel.Handle(fmt.Errorf("%d spans dropped: the export queue (%s) was full", n, envMaxQueue))
		}
		err = p.exp.Shutdown(ctx)
	})
	return err
}

func (p *Processor) droppedSpans() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dropped
}

func (p *Processor) run() {
	defer close(p.stopped)
	tick := time.NewTicker(p.cfg.ScheduleDelay)
	defer tick.Stop()
	for {
		select {
		case <-p.kick:
			p.exportQueued()
		case <-tick.C:
			p.exportQueued()
		case reply := <-p.flushes:
			reply <- p.exportQueued()
		case <-p.stop:
			p.exportQueued()
			return
		}
	}
}

// exportQueued takes the queue and exports it in batches of MaxBatch. An
// export error goes to OpenTelemetry's error handler, as the SDK's
// processor reports it; the spans of that batch are not retried.
func (p *Processor) exportQueued() error {
	p.mu.Lock()
	spans := p.queue
	p.queue = make([]sdktrace.ReadOnlySpan, 0, p.cfg.MaxBatch)
	p.mu.Unlock()
	var first error
	for len(spans) > 0 {
		n := min(len(spans), p.cfg.MaxBatch)
		ctx, cancel := context.WithTimeout(context.Background(), p.cfg.ExportTimeout)
		err := p.exp.ExportSpans(ctx, spans[:n])
		cancel()
		if err != nil {
			otel.Handle(err)
			if first == nil {
				first = err
			}
		}
		spans = spans[n:]
	}
	return first
}

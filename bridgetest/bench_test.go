package bridgetest

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jetstream-bridge/bridge/daemon"
)

// BenchmarkEnv starts and stops one Env: what every test using
// bridgetest pays. Besides the time per start and stop it reports the
// mean of each phase: the nats-server with JetStream, the bridge up to
// its attempt log (bbolt open, journal and attempts streams created), up
// to its operational events, up to its admin API listening, and the stop.
func BenchmarkEnv(b *testing.B) {
	var (
		mu     sync.Mutex
		last   time.Time
		phases = map[string]time.Duration{}
	)
	mark := func(phase string) {
		mu.Lock()
		defer mu.Unlock()
		now := time.Now()
		phases[phase] += now.Sub(last)
		last = now
	}
	logged := func(c *daemon.Config) {
		c.Logger = slog.New(markHandler{mark: mark, phases: map[string]string{
			"attempt log: every POST is recorded; the log is bounded, the oldest records go first": "streams",
			"operational events are published on NATS":                                             "events",
			"bridge running": "admin-listen",
		}})
	}
	var each []time.Duration
	for b.Loop() {
		start := time.Now()
		mu.Lock()
		last = start
		mu.Unlock()
		e := New(b, WithConfig(logged), func(s *settings) { s.mark = mark })
		e.close()
		mark("stop")
		each = append(each, time.Since(start))
	}
	for phase, d := range phases {
		b.ReportMetric(float64(d.Microseconds())/1000/float64(b.N), phase+"-ms/op")
	}
	// The median, as the mean hides how a slow start or two on a shared
	// machine moves it (-benchtime=50x for the median over 50).
	slices.Sort(each)
	b.ReportMetric(float64(each[len(each)/2].Microseconds())/1000, "median-ms")
}

// markHandler marks a phase at each log message that ends one.
type markHandler struct {
	mark   func(string)
	phases map[string]string
}

func (h markHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h markHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h markHandler) WithGroup(string) slog.Handler            { return h }
func (h markHandler) Handle(_ context.Context, r slog.Record) error {
	if p, ok := h.phases[r.Message]; ok {
		h.mark(p)
	}
	return nil
}

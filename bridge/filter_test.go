package bridge_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jetstream-bridge/bridge/bridge"
	"github.com/jetstream-bridge/bridge/cursor"
	"github.com/jetstream-bridge/bridge/projection/cloudevents"
)

// filtered makes the env's registrations JSON ones with filter expr.
func filtered(expr string, more ...func(*cursor.Config)) func(*cursor.Config) {
	return func(c *cursor.Config) {
		c.Filter, c.DataContentType = expr, "application/json"
		for _, m := range more {
			m(c)
		}
	}
}

// publishTotals publishes {"n":i,"total":t} for each total, and
// {"n":i} for a negative one; it returns the bodies a filter on
// total > 100 delivers and the sequence of the last message without one.
func (e *env) publishTotals(totals ...int) (want []string, missing uint64) {
	e.t.Helper()
	for i, total := range totals {
		body := fmt.Sprintf(`{"n":%d,"total":%d}`, i, total)
		if total < 0 {
			body = fmt.Sprintf(`{"n":%d}`, i)
		}
		seq := e.publish(fmt.Sprintf("journal.k%d", i%3), body)
		switch {
		case total < 0:
			missing = seq
		case total > 100:
			want = append(want, body)
		}
	}
	return want, missing
}

// wantScreened checks a registration after its filter ran over every
// message: the cursor past the last, active, the counts and the error.
func (e *env) wantScreened(id string, next, filteredN, failed uint64, missing uint64) {
	e.t.Helper()
	r := e.get(id)
	if r.NextSeq != next || len(r.Ahead) != 0 || r.State != cursor.Active ||
		r.Filtered != filteredN || r.FilterErrors != failed {
		e.t.Fatalf("nextSeq %d ahead %v state %s filtered %d filterErrors %d; want %d, none, active, %d, %d",
			r.NextSeq, r.Ahead, r.State, r.Filtered, r.FilterErrors, next, filteredN, failed)
	}
	if want := fmt.Sprintf("journal message %d: no such key: total", missing); failed > 0 && r.LastFilterError != want {
		e.t.Fatalf("lastFilterError %q, want %q", r.LastFilterError, want)
	}
}

var totals = []int{150, 20, 101, -1, 100, 500, 7, 300, 99, 1000}

// TestFilterStrict: a strict registration gets exactly the messages its
// filter is true for, in order; the others, and the one it fails on, move
// the cursor as acknowledged ones do and are counted, in the store and in
// the metrics.
func TestFilterStrict(t *testing.T) {
	e := newEnv(t)
	e.shape = filtered("data.total > 100")
	rc := newReceiver(t, nil)
	e.register("f", rc.URL, "journal.>")
	want, missing := e.publishTotals(totals...)
	reg := prometheus.NewRegistry()
	m := bridge.NewMetrics(reg)
	w := e.workerFor(cloudevents.New(cloudevents.WithStream(stream)), bridge.WithMetrics(m))
	rep := e.sweep(w, t0, 10)
	if got := rc.bodies(); !slices.Equal(got, want) || rep.Deliveries != len(want) {
		t.Fatalf("delivered %q (report %+v), want %q", got, rep, want)
	}
	e.wantScreened("f", uint64(len(totals)+1), uint64(len(totals)-len(want)-1), 1, missing)
	if r := e.get("f"); r.Delivered != uint64(len(want)) {
		t.Fatalf("delivered %d, want %d", r.Delivered, len(want))
	}
	for name, want := range map[string]float64{"bridge_filtered_total": 4, "bridge_filter_errors_total": 1} {
		if got := counterValue(t, reg, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	// Everything filtered out: the cursor still follows the head.
	e.publishTotals(1, 2, 3)
	w.Wake("f")
	e.sweep(w, t0, 10)
	if r := e.get("f"); r.NextSeq != uint64(len(totals)+4) || r.Filtered != 7 || len(rc.bodies()) != len(want) {
		t.Fatalf("after three filtered messages: nextSeq %d filtered %d, %d POSTs", r.NextSeq, r.Filtered, len(rc.bodies()))
	}
}

// TestFilterBatch: batch mode filters before batching: the batches carry
// the matching messages only, and the cursor passes the rest.
func TestFilterBatch(t *testing.T) {
	e := newEnv(t)
	e.shape = filtered("data.total > 100", func(c *cursor.Config) { c.Batch = &cursor.Batch{MaxEvents: 2} })
	rc := newReceiver(t, nil)
	e.register("b", rc.URL, "journal.>")
	want, missing := e.publishTotals(totals...)
	w := e.workerFor(cloudevents.New(cloudevents.WithStream(stream)))
	e.sweep(w, t0, 10)
	var got []string
	for _, d := range rc.deliveries() {
		for _, ev := range decodeBatch(t, d.body) {
			got = append(got, string(ev.Data()))
		}
	}
	if !slices.Equal(got, want) || len(rc.deliveries()) != 3 {
		t.Fatalf("%d batches carried %q, want 3 carrying %q", len(rc.deliveries()), got, want)
	}
	e.wantScreened("b", uint64(len(totals)+1), uint64(len(totals)-len(want)-1), 1, missing)
}

// TestFilterKeyed: a keyed registration acknowledges what its filter
// passes over into its window, so the cursor moves past it and nothing
// is left ahead once every message is done.
func TestFilterKeyed(t *testing.T) {
	e := newEnv(t)
	e.shape = filtered("data.total > 100", keyedBy("subject", 4))
	rc := newKeyedReceiver(t, func(string) int { return 204 })
	e.register("k", rc.URL, "journal.>")
	var all []int
	for range 5 {
		all = append(all, totals...)
	}
	want, _ := e.publishTotals(all...)
	w := e.workerFor(cloudevents.New(cloudevents.WithStream(stream)))
	e.sweepUntil(w, time.Now, func() bool { return len(rc.acked()) == len(want) })
	e.sweepUntil(w, time.Now, func() bool { return e.get("k").NextSeq == uint64(len(all)+1) })
	got := rc.arrivals()
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("delivered %q, want %q", got, want)
	}
	r := e.get("k")
	if len(r.Ahead) != 0 || r.Filtered != uint64(len(all)-len(want)-5) || r.FilterErrors != 5 ||
		!strings.Contains(r.LastFilterError, "no such key: total") {
		t.Fatalf("ahead %v filtered %d filterErrors %d lastFilterError %q", r.Ahead, r.Filtered, r.FilterErrors, r.LastFilterError)
	}
}

// counterValue is the value of the one series of counter name in reg.
func counterValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no single series of %s", name)
	return 0
}

// BenchmarkDrainFilter is BenchmarkDrain without a filter and with one
// that passes every message and reads its data, so each message is also
// described, parsed (1 KiB of JSON) and filtered: what a filter costs a
// strict drain beyond the POST (the S1 with and without).
func BenchmarkDrainFilter(b *testing.B) {
	b.Run("off", func(b *testing.B) { benchDrain(b, newEnv(b)) })
	b.Run("pass-all", func(b *testing.B) {
		e := newEnv(b)
		e.shape = func(c *cursor.Config) { c.Filter = "event.type != '' && size(data) > 0" }
		benchDrain(b, e)
	})
}

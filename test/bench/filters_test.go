package main

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/jetstream-bridge/bridge/filter"
	"github.com/jetstream-bridge/bridge/projection"
	"github.com/jetstream-bridge/bridge/projection/cloudevents"
)

func TestParseOnlyTakesTheFilterScenarios(t *testing.T) {
	set, err := parseOnly("s1f,S2f")
	if err != nil || !set["S1f"] || !set["S2f"] || len(set) != 2 {
		t.Fatalf("parseOnly = %v, %v; want S1f and S2f", set, err)
	}
}

func TestOrderJSONIsOneKiBOfJSON(t *testing.T) {
	for _, i := range []int{0, 1, 7, 999, 99_999, 1_999_999} {
		b := orderJSON(i)
		var v struct {
			N     int     `json:"n"`
			Total float64 `json:"total"`
		}
		if err := json.Unmarshal(b, &v); err != nil || len(b) != kib || v.N != i || v.Total < 0 {
			t.Fatalf("orderJSON(%d): %d bytes, n %d, total %v, %v; want %d bytes of JSON with n %d", i, len(b), v.N, v.Total, err, kib, i)
		}
	}
}

// TestTheFiltersPassWhatTheRunExpects runs S1f's and S2f's filters with
// the bridge's filter package on the messages the scenarios publish, as
// a binary outbox registration of dataContentType application/json
// reads them.
func TestTheFiltersPassWhatTheRunExpects(t *testing.T) {
	match := func(expr string, i int) bool {
		t.Helper()
		p, err := filter.Compile(expr)
		if err != nil {
			t.Fatal(err)
		}
		rec := &projection.Record{Stream: "BENCH_S2F", Seq: uint64(i + 1), Subject: "bench.s2f.fan", Time: time.Now(), Data: orderJSON(i)}
		ev, err := cloudevents.New().Describe(projection.Target{Format: "binary", DataContentType: jsonContentType}, rec)
		if err != nil {
			t.Fatal(err)
		}
		ok, err := p.Match(filter.NewInput(ev, rec, nil))
		if err != nil {
			t.Fatalf("%s on message %d: %v", expr, i, err)
		}
		return ok
	}
	for i := range 6 {
		if !match(passAll, i) {
			t.Errorf("%s passes over message %d", passAll, i)
		}
		for reg := range 4 {
			if got, want := match(halfByParity.expr(reg), i), halfByParity.passes(reg, i); got != want {
				t.Errorf("registration %d's filter %s on message %d = %v, the run expects %v", reg, halfByParity.expr(reg), i, got, want)
			}
		}
	}
}

func TestFilteredRunWantsWhatPassesAndCountsTheRest(t *testing.T) {
	r := newFilteredRun(4, 6, 10, halfByParity.passes)
	if r.want() != 12 {
		t.Fatalf("want = %d, want 12: 4 registrations, half of 6 messages each", r.want())
	}
	now := time.Now()
	for reg := range 4 {
		for m := range 6 {
			r.record(reg, uint64(10+m), now, 0)
		}
	}
	r.record(0, 10, now, 0) // a repeat
	select {
	case <-r.done:
	default:
		t.Fatal("run not done with every expected delivery in")
	}
	if r.distinct.Load() != 12 || r.unwanted.Load() != 12 || r.stray.Load() != 0 {
		t.Fatalf("distinct %d, unwanted %d, stray %d; want 12, 12, 0", r.distinct.Load(), r.unwanted.Load(), r.stray.Load())
	}
	if got, want := r.extras(), "1 repeats, 12 the filters should have passed over"; got != want {
		t.Errorf("extras = %q, want %q", got, want)
	}

	r = newFilteredRun(2, 4, 1, halfByParity.passes)
	r.record(0, 1, now, 0)
	r.record(1, 2, now, 0)
	r.record(1, 4, now, 0)
	if got, want := r.short(5), fmt.Sprintf("1 registrations short: registration 0: 1 of 2, first missing seq %d", 3); got != want {
		t.Errorf("short = %q, want %q", got, want)
	}
	if got := r.shortRegs(); len(got) != 1 || got[0] != 0 {
		t.Errorf("shortRegs = %v, want [0]", got)
	}
}

func TestSameRunRatesS2fAgainstS2(t *testing.T) {
	results := sameRun([]result{
		{name: "S2", figure: 20_000, vsBare: 0.90, rows: []row{{what: s2.what}, {what: "S2 journal reads per message"}}},
		{name: "S2f", figure: 19_000, vsBare: 0.88, rows: []row{{what: s2f.what}, {what: "S2f journal reads per message"}}},
	}, comparisons...)
	d := results[1].rows
	if len(d) != 4 || d[1].what != "S2 filters passing half of 2× the messages ÷ none, same run" || d[1].ratio != "0.95" || d[1].met != "yes" || d[1].target != "≥ 0.90" {
		t.Fatalf("S2f rows = %+v, want its figure, then 0.95 against S2, met", d)
	}
}

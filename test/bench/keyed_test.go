package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestParseOnlyTakesTheOrderingKeyScenarios(t *testing.T) {
	set, err := parseOnly("s1k,S5,memk,s1b")
	if err != nil || !set["S1k"] || !set["S5"] || !set["MEMK"] || !set["S1b"] || len(set) != 4 {
		t.Fatalf("parseOnly = %v, %v; want S1k, S5, MEMK and S1b", set, err)
	}
}

func TestKeyedVariantSpreadsItsBacklogOverItsSubjects(t *testing.T) {
	filter, subjectOf := s1k.subjects("bench.s1k.orders")
	if filter != "bench.s1k.orders.>" || subjectOf(0) != "bench.s1k.orders.0" || subjectOf(1_999) != "bench.s1k.orders.999" {
		t.Fatalf("S1k: filter %q, subjects %q %q", filter, subjectOf(0), subjectOf(1_999))
	}
	if s1k.inFlight() != 16 || !strings.Contains(s1k.loop(), "16 in flight") {
		t.Fatalf("S1k: %d in flight, loop %q", s1k.inFlight(), s1k.loop())
	}
	filter, subjectOf = s1.subjects("bench.s1.orders")
	if filter != "bench.s1.orders" || subjectOf(5) != "bench.s1.orders" || s1.inFlight() != 1 {
		t.Fatalf("S1: filter %q, subject %q, %d in flight", filter, subjectOf(5), s1.inFlight())
	}
}

// TestSinkRefusesWhatItIsToldTo: a refused POST is answered 503 without
// Retry-After, counted and not recorded; the others go on.
func TestSinkRefusesWhatItIsToldTo(t *testing.T) {
	s := testSink(t)
	r := newRun(1, 2, 10, false)
	s.start(r)
	s.setRefuse(func(req *http.Request) bool { return req.Header.Get("Webhook-Id") == "BENCH_MEMK-10" })
	status := func(id string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, s.url+"/r/0", strings.NewReader("x"))
		req.Header.Set("Webhook-Id", id)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Retry-After")
	}
	if code, after := status("BENCH_MEMK-10"); code != http.StatusServiceUnavailable || after != "" {
		t.Fatalf("refused POST: %d, Retry-After %q; want 503 without", code, after)
	}
	if code, _ := status("BENCH_MEMK-11"); code != http.StatusNoContent {
		t.Fatalf("other POST: %d", code)
	}
	if s.refused.Load() != 1 || r.distinct.Load() != 1 || r.arrived[0].Load() != 0 {
		t.Fatalf("refused %d, distinct %d, first recorded %v; want 1, 1, no", s.refused.Load(), r.distinct.Load(), r.arrived[0].Load() != 0)
	}
	s.setRefuse(nil)
	if code, _ := status("BENCH_MEMK-10"); code != http.StatusNoContent || r.distinct.Load() != 2 {
		t.Fatalf("with nothing refused: %d, distinct %d", code, r.distinct.Load())
	}
}

func TestDelayedBarePathWaitsAsARegistrationDoes(t *testing.T) {
	s := testSink(t)
	s.setDelay(50 * time.Millisecond)
	start := time.Now()
	postTo(t, s.url+delayedBarePath, "")
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Fatalf("a delayed baseline POST answered after %v, want at least 50 ms", d)
	}
	if s.bare.Load() != 1 {
		t.Fatalf("sink counted %d bare POSTs, want 1", s.bare.Load())
	}
}

// TestWireBatchIsTheBridgesBatch: the bare batch is the events of
// consecutive messages, each a structured CloudEvent of the message's
// data, joined with the id the bridge's batch carries.
func TestWireBatchIsTheBridgesBatch(t *testing.T) {
	body := bytes.Repeat([]byte{'x'}, kib)
	h, batch, err := wireBatch("BENCH_S1", "bench.s1.orders", 100, 3, body, time.Unix(1_764_511_105, 0))
	if err != nil {
		t.Fatal(err)
	}
	if ct := h.Get("Content-Type"); ct != "application/cloudevents-batch+json" {
		t.Errorf("Content-Type %q", ct)
	}
	if id := h.Get("Webhook-Id"); id != "BENCH_S1-100..BENCH_S1-102" {
		t.Errorf("Webhook-Id %q", id)
	}
	if h.Get("Webhook-Timestamp") != "1764511105" || !strings.HasPrefix(h.Get("User-Agent"), "jetstream-bridge/") {
		t.Errorf("headers %v", h)
	}
	var evs []map[string]any
	if err := json.Unmarshal(batch, &evs); err != nil {
		t.Fatal(err)
	}
	if len(evs) != 3 {
		t.Fatalf("%d events, want 3", len(evs))
	}
	for i, ev := range evs {
		if ev["id"] != fmt.Sprintf("BENCH_S1-%d", 100+i) || ev["subject"] != "bench.s1.orders" || ev["specversion"] != "1.0" {
			t.Errorf("event %d: id %v subject %v specversion %v", i, ev["id"], ev["subject"], ev["specversion"])
		}
	}
	if len(batch) < 3*kib {
		t.Errorf("batch of %d bytes carries less than its 3 KiB of data", len(batch))
	}
}

func TestBarePOSTsOfBatchesAreCountedByTheirEvents(t *testing.T) {
	s := testSink(t)
	e := &env{sink: s}
	run, err := e.barePOSTs(context.Background(), 20, 1, kib, wire{stream: "BENCH_S1", subject: "bench.s1.orders", batch: 7})
	if err != nil {
		t.Fatal(err)
	}
	if run.posts != 20 || s.bare.Load() != 21 || s.bareEvents.Load() != 21*7 {
		t.Fatalf("run %+v, sink counted %d POSTs and %d events; want 20 timed, 21 and 147", run, s.bare.Load(), s.bareEvents.Load())
	}
}

func TestWithTargetSetsEveryRow(t *testing.T) {
	r := withTarget(notImplemented("S5", "S5 x", "why"), "≥ 0.90 × bare")
	if len(r.rows) != 1 || r.rows[0].target != "≥ 0.90 × bare" || r.rows[0].met != "n/a" {
		t.Fatalf("rows %+v", r.rows)
	}
}

// TestReadWindowsCountsFullWindowsAtTheHeldMessage reads a listing as the
// admin API answers it.
func TestReadWindowsCountsFullWindowsAtTheHeldMessage(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("after") == "" {
			fmt.Fprint(w, `{"registrations":[{"id":"a","state":"active","nextSeq":7,"attempts":3,"ahead":4095},{"id":"b","state":"active","nextSeq":7,"ahead":12}],"next":"b"}`)
			return
		}
		fmt.Fprint(w, `{"registrations":[{"id":"c","state":"parked","nextSeq":9,"attempts":32,"ahead":4095}],"next":""}`)
	}))
	defer srv.Close()
	br := &bridgeProc{admin: strings.TrimPrefix(srv.URL, "http://")}
	w, err := readWindows(context.Background(), br, 7, 4095)
	if err != nil {
		t.Fatal(err)
	}
	if w != (windows{listed: 3, full: 1, atHeld: 2, parked: 1, maxAttempts: 32}) {
		t.Fatalf("windows = %+v", w)
	}
}

// testSink is a sink closed when the test ends.
func testSink(t *testing.T) *sink {
	t.Helper()
	s, err := newSink()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.close)
	return s
}

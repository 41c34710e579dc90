package main

import (
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestSettledWantsEveryRegistrationOwnedByTheLiveBridges(t *testing.T) {
	want := []string{"b1", "b2"}
	live := map[string]int{"b1": 2, "b2": 1}
	own := map[string]string{"r1": "b1", "r2": "b1", "r3": "b2"}
	if !settled(own, live, want, 3) {
		t.Fatal("three registrations owned by both live bridges: not settled")
	}
	for name, c := range map[string]struct {
		own  map[string]string
		live map[string]int
		n    int
	}{
		"one unowned":           {map[string]string{"r1": "b1", "r2": "", "r3": "b2"}, live, 3},
		"owned by a dead one":   {map[string]string{"r1": "b1", "r2": "b3", "r3": "b2"}, live, 3},
		"one not listed yet":    {map[string]string{"r1": "b1", "r3": "b2"}, live, 3},
		"a bridge owning none":  {map[string]string{"r1": "b1", "r2": "b1", "r3": "b1"}, live, 3},
		"a third bridge live":   {own, map[string]int{"b1": 2, "b2": 1, "b3": 0}, 3},
		"a wanted one not live": {own, map[string]int{"b1": 2, "b3": 1}, 3},
	} {
		if settled(c.own, c.live, want, c.n) {
			t.Errorf("%s: settled", name)
		}
	}
	// Fewer registrations than bridges: some bridge rightly owns none.
	if !settled(map[string]string{"r1": "b2"}, live, want, 1) {
		t.Error("one registration owned by one of two live bridges: not settled")
	}
}

func TestHeaviestIsTheOwnerOfMostWithItsIDs(t *testing.T) {
	own := map[string]string{"r1": "b2", "r2": "b1", "r3": "b2", "r4": "", "r5": "b3", "r6": "b1"}
	name, ids := heaviest(own)
	if name != "b1" && name != "b2" {
		t.Fatalf("heaviest = %q", name)
	}
	// b1 and b2 tie at two: the first by name wins, so a run is repeatable.
	if name != "b1" || !slices.Equal(ids, []string{"r2", "r6"}) {
		t.Fatalf("heaviest = %q %v, want b1 [r2 r6]", name, ids)
	}
	own["r7"] = "b3"
	own["r8"] = "b3"
	if name, ids := heaviest(own); name != "b3" || !slices.Equal(ids, []string{"r5", "r7", "r8"}) {
		t.Fatalf("heaviest = %q %v, want b3 [r5 r7 r8]", name, ids)
	}
	if name, ids := heaviest(map[string]string{"r1": ""}); name != "" || ids != nil {
		t.Fatalf("heaviest of unowned = %q %v, want none", name, ids)
	}
}

func TestFreePortsAreDistinctAndFree(t *testing.T) {
	ports, err := freePorts(6)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] {
			t.Fatalf("port %d twice in %v", p, ports)
		}
		seen[p] = true
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatalf("port %d not free after freePorts: %v", p, err)
		}
		l.Close()
	}
}

// TestDelayedSinkAnswersLateAndNotesEachRegistrationsLatest drives the
// slow-receiver mode over loopback: a registration's POST is answered
// after the delay, a baseline's at once, and the latest POST to each
// registration is noted even outside the run's sequences.
func TestDelayedSinkAnswersLateAndNotesEachRegistrationsLatest(t *testing.T) {
	s, err := newSink()
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	r := newRun(2, 1, 10, false)
	s.start(r)
	s.setDelay(50 * time.Millisecond)
	took := func(path, id string) time.Duration {
		t.Helper()
		start := time.Now()
		postTo(t, s.url+path, id)
		return time.Since(start)
	}
	if d := took("/r/1", "BENCH_C3-99"); d < 50*time.Millisecond {
		t.Fatalf("a registration's POST answered after %v, want at least 50 ms", d)
	}
	if d := took("/bare", ""); d >= 50*time.Millisecond {
		t.Fatalf("a baseline POST answered after %v, want at once", d)
	}
	if r.latestAt(1) == 0 || r.latestAt(0) != 0 {
		t.Fatalf("latest = %d, %d; want registration 1's noted (a stray sequence), 0's not", r.latestAt(0), r.latestAt(1))
	}
	s.setDelay(0)
	if d := took("/r/0", "BENCH_C3-10"); d >= 50*time.Millisecond {
		t.Fatalf("with no delay a registration's POST answered after %v", d)
	}
	if r.latestAt(0) == 0 || r.distinct.Load() != 1 {
		t.Fatalf("latest %d, distinct %d after an in-range POST", r.latestAt(0), r.distinct.Load())
	}
}

func postTo(t *testing.T, url, webhookID string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	if webhookID != "" {
		req.Header.Set("Webhook-Id", webhookID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("sink answered %d", resp.StatusCode)
	}
}

package admin

import (
	"bytes"
	"fmt"
	"net/http"
	"sync"
	"testing"
)

// burst sends a create of each body at once, with headers, and returns
// the answers in the same order; the store commits creates that arrive
// together in one group.
func (h *harness) burst(bodies []string, headers ...string) []response {
	h.t.Helper()
	out := make([]response, len(bodies))
	errs := make([]error, len(bodies))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, body := range bodies {
		wg.Go(func() {
			<-start
			out[i], errs[i] = h.send("POST", "/v1/registrations", body, headers...)
		})
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			h.t.Fatal(err)
		}
	}
	return out
}

func outboxBody(id string) string {
	return `{"id":"` + id + `","namespace":"outbox","subject":"journal.>","url":"https://a.example/"}`
}

// Creates of one id race with creates of other ids: exactly one of the
// former is answered 201, the rest 409, and a 409 beside them in a group
// never costs another create its 201.
func TestConcurrentCreatesOfOneIDGiveOne201(t *testing.T) {
	h := newHarness(t)
	for round := range 25 {
		dup := fmt.Sprintf("dup-%d", round)
		bodies := make([]string, 16)
		for i := range bodies {
			bodies[i] = outboxBody(dup)
			if i%2 == 1 {
				bodies[i] = outboxBody(fmt.Sprintf("own-%d-%d", round, i))
			}
		}
		created := 0
		for i, res := range h.burst(bodies) {
			switch {
			case i%2 == 1 && res.status != http.StatusCreated:
				t.Fatalf("round %d: create of its own id %d: %d %s", round, i, res.status, res.body)
			case i%2 == 0 && res.status == http.StatusCreated:
				created++
			case i%2 == 0:
				wantError(t, res, http.StatusConflict, codeAlreadyExists, dup)
			}
		}
		if created != 1 {
			t.Fatalf("round %d: %d creates of %s answered 201, want exactly 1", round, created, dup)
		}
	}
}

func TestConcurrentIdempotentCreatesGetOneAnswer(t *testing.T) {
	h := newHarness(t)
	// No id: every try would generate its own, so only the key can make
	// them one registration.
	bodies := make([]string, 16)
	for i := range bodies {
		bodies[i] = `{"namespace":"outbox","subject":"journal.>","url":"https://a.example/"}`
	}
	for round := range 25 {
		answers := h.burst(bodies, "Idempotency-Key", fmt.Sprintf("key-%d", round))
		first := answers[0]
		if first.status != http.StatusCreated {
			t.Fatalf("round %d: status %d %s", round, first.status, first.body)
		}
		for i, res := range answers[1:] {
			if res.status != first.status || !bytes.Equal(res.body, first.body) {
				t.Fatalf("round %d, try %d: %d %s; want the same answer as the first: %d %s",
					round, i+1, res.status, res.body, first.status, first.body)
			}
		}
	}
	if page := listPage(t, h, "?limit=1000"); len(page.Registrations) != 25 {
		t.Errorf("%d registrations stored, want one per key (25)", len(page.Registrations))
	}
}

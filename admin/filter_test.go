package admin

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/jetstream-bridge/bridge/cursor"
)

// TestFilterIsStoredAndEchoed: a filter is stored and echoed as written,
// with filtered and filterErrors in every answer; a PUT replaces it and
// keeps the counts.
func TestFilterIsStoredAndEchoed(t *testing.T) {
	h := newHarness(t)
	expr := `event.type == 'order.created' && data.total > 100`
	v := h.create(outboxWith("orders", `"filter":`+jsonString(expr)))
	if v.Filter != expr || v.Filtered != 0 || v.FilterErrors != 0 {
		t.Fatalf("answer: filter %q filtered %d filterErrors %d", v.Filter, v.Filtered, v.FilterErrors)
	}
	if stored, err := h.store.Get(t.Context(), "orders"); err != nil || stored.Filter != expr {
		t.Fatalf("stored filter %q, %v", stored.Filter, err)
	}
	err := h.store.Advance(t.Context(), "orders", cursor.Progress{NextSeq: v.NextSeq + 5, Delivered: 2, Filtered: 2,
		FilterErrors: 1, LastFilterError: "journal message 3: no such key: total"})
	if err != nil {
		t.Fatal(err)
	}
	next := `headers['x-tenant'] == 'eu'`
	res := h.do("PUT", "/v1/registrations/orders", outboxWith("orders", `"filter":`+jsonString(next)))
	got := decodeView(t, res.body)
	if res.status != http.StatusOK || got.Filter != next || got.Filtered != 2 || got.FilterErrors != 1 ||
		got.LastFilterError != "journal message 3: no such key: total" {
		t.Fatalf("PUT: %d %s", res.status, res.body)
	}
	res = h.do("PUT", "/v1/registrations/orders", outboxWith("orders", `"format":"binary"`))
	if res.status != http.StatusOK || bytes.Contains(res.body, []byte(`"filter":`)) ||
		!bytes.Contains(res.body, []byte(`"filtered":2`)) {
		t.Fatalf("PUT without a filter: %d %s; want no filter and the counts kept", res.status, res.body)
	}
	if stored, _ := h.store.Get(t.Context(), "orders"); stored.Filter != "" {
		t.Fatalf("stored filter after a PUT without one: %q", stored.Filter)
	}
	res = h.do("POST", "/v1/registrations", outboxWith("plain", `"filter":""`))
	if res.status != http.StatusCreated || !bytes.Contains(res.body, []byte(`"filtered":0,"filterErrors":0`)) {
		t.Errorf("without a filter: %d %s; want filtered and filterErrors 0", res.status, res.body)
	}
}

// TestFilterRefusals: 400 with CEL's message and position.
func TestFilterRefusals(t *testing.T) {
	h := newHarness(t)
	for _, tc := range []struct{ filter, want string }{
		{`"event.type == "`, "filter:1:15: Syntax error"},
		{`"event.type == 'a' &&\n data.total >"`, "filter:2:14: Syntax error"},
		{`"data.total + 1"`, "filter must yield a bool"},
		{`"subject"`, "filter must yield a bool, not string"},
		{`"tenant == 'eu'"`, "filter:1:1: undeclared reference to 'tenant'"},
		{`"data.items.all(a, data.items.all(b, a == b))"`, "over the bound of 10000000"},
		{`"   "`, "filter must not be empty"},
		{`true`, "filter must be a string"},
	} {
		wantError(t, h.do("POST", "/v1/registrations", outboxWith("r", `"filter":`+tc.filter)),
			http.StatusBadRequest, "invalid_argument", tc.want)
	}
	wantError(t, h.do("POST", "/v1/registrations",
		`{"namespace":"a2a","taskId":"t","url":"https://agent.example/","filter":"subject == 'x'"}`),
		http.StatusBadRequest, "invalid_argument", "filter applies to outbox registrations only")
	if rows, _, err := h.store.List(t.Context(), cursor.ListOptions{Limit: 10}); err != nil || len(rows) != 0 {
		t.Errorf("refusals stored %d registrations (err %v)", len(rows), err)
	}
}

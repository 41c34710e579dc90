package admin

import (
	"bytes"
	"net/http"
	"slices"
	"sync"
	"testing"

	"github.com/jetstream-bridge/bridge/cursor"
)

// TestOrderingIsStoredAndEchoedAsSet: every key form is stored as given,
// `registration` too, with maxInFlight filled with the default when left
// out; a registration without ordering answers none.
func TestOrderingIsStoredAndEchoedAsSet(t *testing.T) {
	h := newHarness(t)
	for id, tc := range map[string]struct {
		ordering string
		want     Ordering
	}{
		"total":    {`{"key":"registration"}`, Ordering{Key: "registration", MaxInFlight: 16}},
		"subject":  {`{"key":"subject","maxInFlight":1}`, Ordering{Key: "subject", MaxInFlight: 1}},
		"customer": {`{"key":"tokens:3"}`, Ordering{Key: "tokens:3", MaxInFlight: 16}},
		"pairs":    {`{"key":"tokens:4,2","maxInFlight":256}`, Ordering{Key: "tokens:4,2", MaxInFlight: 256}},
		"header":   {`{"key":"header:Nats-Msg-Id","maxInFlight":8}`, Ordering{Key: "header:Nats-Msg-Id", MaxInFlight: 8}},
		"unbound":  {`{"key":"none"}`, Ordering{Key: "none", MaxInFlight: 16}},
	} {
		v := h.create(outboxWith(id, `"ordering":`+tc.ordering))
		if v.Ordering == nil || *v.Ordering != tc.want {
			t.Errorf("%s: answer's ordering %+v, want %+v", tc.ordering, v.Ordering, tc.want)
		}
		if v.InFlight != 0 || v.Ahead != 0 {
			t.Errorf("%s: a new registration answers inFlight %d, ahead %d", tc.ordering, v.InFlight, v.Ahead)
		}
		stored, err := h.store.Get(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if stored.Ordering == nil || *stored.Ordering != (cursor.Ordering(tc.want)) {
			t.Errorf("%s: stored %+v, want %+v", tc.ordering, stored.Ordering, tc.want)
		}
	}
	res := h.do("POST", "/v1/registrations", outboxWith("plain", `"ordering":null`))
	if res.status != http.StatusCreated || bytes.Contains(res.body, []byte(`"ordering"`)) ||
		!bytes.Contains(res.body, []byte(`"inFlight":0`)) || !bytes.Contains(res.body, []byte(`"ahead":0`)) {
		t.Errorf("without ordering: %d %s; want no ordering, inFlight 0 and ahead 0", res.status, res.body)
	}
}

// TestOrderingRefusals: every refusal is a 400 of the API's error shape
// whose message names the field.
func TestOrderingRefusals(t *testing.T) {
	h := newHarness(t)
	for _, tc := range []struct{ ordering, want string }{
		{`{}`, "ordering.key is required"},
		{`{"maxInFlight":4}`, "ordering.key is required"},
		{`{"key":"stream"}`, `ordering.key "stream" is not a key`},
		{`{"key":"Subject"}`, `ordering.key "Subject" is not a key`},
		{`{"key":"tokens:0"}`, `ordering.key "tokens:0": tokens are numbered from 1`},
		{`{"key":"tokens:2,0"}`, "tokens are numbered from 1"},
		{`{"key":"tokens:"}`, `ordering.key "tokens:" must be tokens: and a comma-separated list`},
		{`{"key":"tokens:1,,2"}`, "ordering.key"},
		{`{"key":"tokens:1,"}`, "ordering.key"},
		{`{"key":"tokens: 3"}`, "ordering.key"},
		{`{"key":"tokens:-1"}`, "ordering.key"},
		{`{"key":"tokens:+1"}`, "ordering.key"},
		{`{"key":"tokens:03"}`, "ordering.key"},
		{`{"key":"tokens:x"}`, "ordering.key"},
		{`{"key":"tokens:99999999999999999999"}`, "ordering.key"},
		{`{"key":"tokens:2,4,2"}`, `ordering.key "tokens:2,4,2" names token 2 twice`},
		{`{"key":"header:"}`, `ordering.key "header:" must name a header`},
		{`{"key":"header:X Tenant"}`, "must name a header"},
		{`{"key":"header:X-Tenant:"}`, "must name a header"},
		{`{"key":"subject","maxInFlight":0}`, "ordering.maxInFlight must be 1 to 256, not 0"},
		{`{"key":"subject","maxInFlight":257}`, "ordering.maxInFlight must be 1 to 256, not 257"},
		{`{"key":"subject","maxInFlight":-3}`, "ordering.maxInFlight must be 1 to 256"},
		{`{"key":"subject","maxInFlight":1.5}`, "ordering.maxInFlight must be an integer"},
		{`{"key":"subject","maxInFlight":"16"}`, "ordering.maxInFlight must be an integer"},
		{`{"key":3}`, "ordering.key must be a string"},
		{`{"key":"subject","window":4096}`, `unknown field "window"`},
		{`"subject"`, "ordering must be an object"},
	} {
		wantError(t, h.do("POST", "/v1/registrations", outboxWith("r", `"ordering":`+tc.ordering)),
			http.StatusBadRequest, "invalid_argument", tc.want)
	}
	wantError(t, h.do("POST", "/v1/registrations", outboxWith("r", `"ordering":{"key":"subject"},"batch":{"maxEvents":10}`)),
		http.StatusBadRequest, "invalid_argument", "ordering and batch cannot be combined")
	wantError(t, h.do("POST", "/v1/registrations", outboxWith("r", `"ordering":{"key":"registration"},"batch":{}`)),
		http.StatusBadRequest, "invalid_argument", "ordering and batch")
	wantError(t, h.do("POST", "/v1/registrations",
		`{"namespace":"a2a","taskId":"t","url":"https://agent.example/","ordering":{"key":"subject"}}`),
		http.StatusBadRequest, "invalid_argument", "ordering applies to outbox registrations only")
	if rows, _, err := h.store.List(t.Context(), cursor.ListOptions{Limit: 10}); err != nil || len(rows) != 0 {
		t.Errorf("refusals stored %d registrations (err %v)", len(rows), err)
	}
}

// TestReplaceOrderingKeepsCursorAndWindow: a PUT that changes the
// ordering, or drops it, keeps the cursor and what the receiver
// acknowledged ahead of it, in the real store.
func TestReplaceOrderingKeepsCursorAndWindow(t *testing.T) {
	h := newHarness(t)
	v := h.create(outboxWith("keyed", `"ordering":{"key":"subject","maxInFlight":4}`))
	next := v.NextSeq + 3
	ahead := cursor.Ahead{next + 1, next + 2, next + 7}
	if err := h.store.Advance(t.Context(), "keyed", cursor.Progress{NextSeq: next, Delivered: 6, Window: true, Ahead: ahead}); err != nil {
		t.Fatal(err)
	}
	if err := h.store.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ordering string
		want     *cursor.Ordering
	}{
		{`{"key":"tokens:3","maxInFlight":32}`, &cursor.Ordering{Key: "tokens:3", MaxInFlight: 32}},
		{`{"key":"registration"}`, &cursor.Ordering{Key: "registration", MaxInFlight: 16}},
		{`null`, nil},
	} {
		res := h.do("PUT", "/v1/registrations/keyed", outboxWith("keyed", `"ordering":`+tc.ordering))
		if res.status != http.StatusOK {
			t.Fatalf("PUT with ordering %s: %d %s", tc.ordering, res.status, res.body)
		}
		got := decodeView(t, res.body)
		if got.NextSeq != next || got.Ahead != len(ahead) || got.Delivered != 6 {
			t.Errorf("PUT with ordering %s: nextSeq %d ahead %d delivered %d; want %d, %d, 6 kept",
				tc.ordering, got.NextSeq, got.Ahead, got.Delivered, next, len(ahead))
		}
		stored, err := h.store.Get(t.Context(), "keyed")
		if err != nil {
			t.Fatal(err)
		}
		if stored.NextSeq != next || !slices.Equal(stored.Ahead, ahead) {
			t.Errorf("PUT with ordering %s: stored nextSeq %d ahead %v; want %d %v", tc.ordering, stored.NextSeq, stored.Ahead, next, ahead)
		}
		if (stored.Ordering == nil) != (tc.want == nil) || tc.want != nil && *stored.Ordering != *tc.want {
			t.Errorf("PUT with ordering %s: stored ordering %+v, want %+v", tc.ordering, stored.Ordering, tc.want)
		}
	}
}

// inFlightCounts is a delivery engine's in-flight count per registration.
type inFlightCounts struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *inFlightCounts) InFlight(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[id]
}

func (c *inFlightCounts) set(id string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[id] = n
}

// TestAnswersTellInFlight: GET, list and PUT answer what the engine has in
// flight; an idempotent replay answers its first body byte for byte.
func TestAnswersTellInFlight(t *testing.T) {
	counts := &inFlightCounts{n: map[string]int{}}
	h := newHarness(t, func(o *Options) { o.InFlight = counts })
	body := outboxWith("keyed", `"ordering":{"key":"tokens:3"}`)
	first := h.do("POST", "/v1/registrations", body, "Idempotency-Key", "k-1")
	if first.status != http.StatusCreated || decodeView(t, first.body).InFlight != 0 {
		t.Fatalf("create: %d %s", first.status, first.body)
	}
	counts.set("keyed", 7)
	if again := h.do("POST", "/v1/registrations", body, "Idempotency-Key", "k-1"); again.status != first.status || !bytes.Equal(again.body, first.body) {
		t.Errorf("replay: %d %s\nwant the first answer %d %s", again.status, again.body, first.status, first.body)
	}
	if v := decodeView(t, h.do("GET", "/v1/registrations/keyed", "").body); v.InFlight != 7 {
		t.Errorf("GET: inFlight %d, want 7", v.InFlight)
	}
	if v := decodeView(t, h.do("PUT", "/v1/registrations/keyed", body).body); v.InFlight != 7 {
		t.Errorf("PUT: inFlight %d, want 7", v.InFlight)
	}
	res := h.do("GET", "/v1/registrations", "")
	if res.status != http.StatusOK || !bytes.Contains(res.body, []byte(`"inFlight":7`)) {
		t.Errorf("list: %d %s, want inFlight 7", res.status, res.body)
	}
}

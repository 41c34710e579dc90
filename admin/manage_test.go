package admin

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jetstream-bridge/bridge/cursor"
)

const otherSecret = "whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="

func TestGet(t *testing.T) {
	h := newHarness(t)
	made := h.create(`{"id":"g1","namespace":"outbox","subject":"journal.x","url":"https://a.example/"}`)
	res := h.do("GET", "/v1/registrations/g1", "")
	if res.status != 200 {
		t.Fatalf("get: %d %s", res.status, res.body)
	}
	if got := decodeView(t, res.body); got.ID != made.ID || got.NextSeq != made.NextSeq {
		t.Errorf("get answered %+v, want %+v", got, made)
	}
	wantError(t, h.do("GET", "/v1/registrations/missing", ""), http.StatusNotFound, "not_found", `"missing"`)
	// An id the API could never have created is simply not there.
	long := strings.Repeat("x", 2000)
	for _, path := range []string{"/v1/registrations/" + long, "/v1/registrations/a%20b"} {
		wantError(t, h.do("GET", path, ""), http.StatusNotFound, "not_found")
		wantError(t, h.do("POST", path+"/unpark", ""), http.StatusNotFound, "not_found")
		if res := h.do("DELETE", path, ""); res.status != http.StatusNoContent {
			t.Errorf("DELETE %.40s: %d %s, want 204", path, res.status, res.body)
		}
	}
}

func TestListPagesAndFilters(t *testing.T) {
	h := newHarness(t)
	for i := range 5 {
		h.create(fmt.Sprintf(`{"id":"o%d","namespace":"outbox","subject":"journal.x","url":"https://a.example/"}`, i))
	}
	h.create(`{"id":"a0","namespace":"a2a","taskId":"t","url":"https://agent.example/"}`)
	if err := h.store.Park(t.Context(), "o3", "receiver answered 410"); err != nil {
		t.Fatal(err)
	}

	var ids []string
	after := ""
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("paging does not end")
		}
		page := listPage(t, h, "?namespace=outbox&limit=2&after="+after)
		for _, r := range page.Registrations {
			ids = append(ids, r.ID)
		}
		if page.Next == "" {
			break
		}
		after = page.Next
	}
	if want := []string{"o0", "o1", "o2", "o3", "o4"}; !slices.Equal(ids, want) {
		t.Errorf("outbox pages gave %v, want %v", ids, want)
	}

	parked := listPage(t, h, "?state=parked")
	if len(parked.Registrations) != 1 || parked.Registrations[0].ID != "o3" || parked.Registrations[0].LastError != "receiver answered 410" {
		t.Errorf("parked listing: %+v", parked.Registrations)
	}
	if empty := listPage(t, h, "?state=completed"); empty.Registrations == nil || len(empty.Registrations) != 0 {
		t.Errorf("an empty listing must be [], got %+v", empty.Registrations)
	}
	byPrefix := listPage(t, h, "?prefix=o&limit=2&after=o1")
	if len(byPrefix.Registrations) != 2 || byPrefix.Registrations[0].ID != "o2" || byPrefix.Next != "o3" {
		t.Errorf("prefix o after o1: %+v next %q", byPrefix.Registrations, byPrefix.Next)
	}
	if last := listPage(t, h, "?prefix=o&after=o3"); len(last.Registrations) != 1 || last.Registrations[0].ID != "o4" || last.Next != "" {
		t.Errorf("prefix o after o3: %+v next %q", last.Registrations, last.Next)
	}
	if parkedA := listPage(t, h, "?prefix=a&state=parked"); len(parkedA.Registrations) != 0 {
		t.Errorf("parked with prefix a: %+v", parkedA.Registrations)
	}

	for query, frag := range map[string]string{
		"?limit=0":                            "limit",
		"?limit=1001":                         "limit",
		"?limit=ten":                          "limit",
		"?namespace=inbox":                    "namespace",
		"?state=sleeping":                     "state",
		"?prefix=a%20b":                       "prefix",
		"?prefix=" + strings.Repeat("x", 129): "prefix",
	} {
		wantError(t, h.do("GET", "/v1/registrations"+query, ""), http.StatusBadRequest, "invalid_argument", frag)
	}
}

func purge(t *testing.T, h *harness, body string) cursor.PurgeReport {
	t.Helper()
	res := h.do("POST", "/v1/purge", body)
	var rep cursor.PurgeReport
	if err := json.Unmarshal(res.body, &rep); err != nil || res.status != 200 {
		t.Fatalf("purge %s: %d %s (%v)", body, res.status, res.body, err)
	}
	return rep
}

func listPage(t *testing.T, h *harness, query string) Page {
	t.Helper()
	res := h.do("GET", "/v1/registrations"+query, "")
	if res.status != 200 {
		t.Fatalf("list %s: %d %s", query, res.status, res.body)
	}
	var page Page
	if err := json.Unmarshal(res.body, &page); err != nil {
		t.Fatalf("list %s: %v", query, err)
	}
	return page
}

func TestReplaceKeepsCursorAndRotatesSecret(t *testing.T) {
	h := newHarness(t)
	h.create(`{"id":"r","namespace":"outbox","subject":"journal.x","url":"https://a.example/","secret":"` + goodSecret + `","start":{"seq":5}}`)
	if err := h.store.Park(t.Context(), "r", "gone"); err != nil {
		t.Fatal(err)
	}
	h.clock.advance(time.Hour)

	res := h.do("PUT", "/v1/registrations/r", `{"namespace":"outbox","subject":"journal.y","url":"https://b.example/","secret":"`+otherSecret+`","start":"new"}`)
	if res.status != 200 {
		t.Fatalf("replace: %d %s", res.status, res.body)
	}
	v := decodeView(t, res.body)
	if v.NextSeq != 5 || v.Subject != "journal.y" || v.URL != "https://b.example/" || v.State != "active" {
		t.Errorf("replace answered %+v; want the cursor 5 kept, the new subject and url, unparked", v)
	}
	stored, _ := h.store.Get(t.Context(), "r")
	if stored.Secret != otherSecret || stored.PreviousSecret != goodSecret {
		t.Errorf("secret rotation: secret %q previous %q", stored.Secret, stored.PreviousSecret)
	}
	if want := h.clock.now().Add(24 * time.Hour); !stored.PreviousSecretUntil.Equal(want) {
		t.Errorf("previous secret signs until %v, want %v", stored.PreviousSecretUntil, want)
	}
	if w := h.waker.woken(); w[len(w)-1] != "r" {
		t.Errorf("replace did not wake the worker: %v", w)
	}

	// Replacing again with the same secret keeps the rotation running;
	// dropping the secret ends signing altogether.
	h.do("PUT", "/v1/registrations/r", `{"namespace":"outbox","subject":"journal.y","url":"https://b.example/","secret":"`+otherSecret+`"}`)
	if stored, _ = h.store.Get(t.Context(), "r"); stored.PreviousSecret != goodSecret {
		t.Errorf("an unchanged secret ended the rotation")
	}
	h.do("PUT", "/v1/registrations/r", `{"subject":"journal.y","url":"https://b.example/"}`)
	if stored, _ = h.store.Get(t.Context(), "r"); stored.Secret != "" || stored.PreviousSecret != "" || stored.Namespace != "outbox" {
		t.Errorf("removing the secret left %+v", stored.Config)
	}
}

func TestReplaceRefusals(t *testing.T) {
	h := newHarness(t)
	h.create(`{"id":"r","namespace":"outbox","subject":"journal.x","url":"https://a.example/"}`)
	wantError(t, h.do("PUT", "/v1/registrations/missing", `{"namespace":"outbox","subject":"journal.x","url":"https://a.example/"}`),
		http.StatusNotFound, "not_found", `"missing"`)
	wantError(t, h.do("PUT", "/v1/registrations/r", `{"namespace":"a2a","taskId":"t","url":"https://a.example/"}`),
		http.StatusBadRequest, "invalid_argument", "namespace cannot change")
	wantError(t, h.do("PUT", "/v1/registrations/r", `{"id":"other","namespace":"outbox","subject":"journal.x","url":"https://a.example/"}`),
		http.StatusBadRequest, "invalid_argument", `"other"`, "path")
	wantError(t, h.do("PUT", "/v1/registrations/r", `{"namespace":"outbox","subject":"journal x","url":"https://a.example/"}`),
		http.StatusBadRequest, "invalid_argument", "whitespace")
	wantError(t, h.do("PUT", "/v1/registrations/r", `{"namespace":"outbox","subject":"journal.x","url":"https://a.example/","colour":"red"}`),
		http.StatusBadRequest, "invalid_argument", `unknown field "colour"`)
	if stored, _ := h.store.Get(t.Context(), "r"); stored.Subject != "journal.x" {
		t.Errorf("a refused replace changed the subject to %q", stored.Subject)
	}
}

func TestDeleteIsIdempotent(t *testing.T) {
	h := newHarness(t)
	h.create(`{"id":"d","namespace":"outbox","subject":"journal.x","url":"https://a.example/"}`)
	for range 2 {
		if res := h.do("DELETE", "/v1/registrations/d", ""); res.status != http.StatusNoContent || len(res.body) != 0 {
			t.Errorf("delete: %d %q, want 204 and no body", res.status, res.body)
		}
	}
	wantError(t, h.do("GET", "/v1/registrations/d", ""), http.StatusNotFound, "not_found")
}

func TestUnpark(t *testing.T) {
	h := newHarness(t)
	h.create(`{"id":"u","namespace":"outbox","subject":"journal.x","url":"https://a.example/"}`)
	wantError(t, h.do("POST", "/v1/registrations/u/unpark", ""), http.StatusConflict, "failed_precondition", `"u" is active, not parked`)
	wantError(t, h.do("POST", "/v1/registrations/missing/unpark", ""), http.StatusNotFound, "not_found")

	if err := h.store.Park(t.Context(), "u", "410 Gone"); err != nil {
		t.Fatal(err)
	}
	res := h.do("POST", "/v1/registrations/u/unpark", "")
	if res.status != 200 {
		t.Fatalf("unpark: %d %s", res.status, res.body)
	}
	if v := decodeView(t, res.body); v.State != "active" || v.NextSeq != 42 {
		t.Errorf("unpark answered state %q nextSeq %d, want active at the kept cursor 42", v.State, v.NextSeq)
	}
}

func TestRewind(t *testing.T) {
	h := newHarness(t)
	h.create(`{"id":"w","namespace":"outbox","subject":"journal.x","url":"https://a.example/"}`)
	if err := h.store.Park(t.Context(), "w", "cannot project message 30"); err != nil {
		t.Fatal(err)
	}
	res := h.do("POST", "/v1/registrations/w/rewind", `{"seq": 3}`)
	if v := decodeView(t, res.body); res.status != 200 || v.NextSeq != 3 || v.State != "parked" {
		t.Errorf("rewind by seq: %d %s; want nextSeq 3, still parked", res.status, res.body)
	}
	at := h.journal.base.Add(20 * time.Second).Format(time.RFC3339)
	res = h.do("POST", "/v1/registrations/w/rewind", `{"time": "`+at+`"}`)
	if v := decodeView(t, res.body); res.status != 200 || v.NextSeq != 21 {
		t.Errorf("rewind by time: %d %s; want nextSeq 21", res.status, res.body)
	}
	if w := h.waker.woken(); len(w) != 3 || w[2] != "w" {
		t.Errorf("woken %v, want a wake per create and rewind", w)
	}

	for body, frags := range map[string][]string{
		``:   {"empty"},
		`{}`: {"exactly one"},
		`{"seq":1,"time":"2026-01-01T00:00:00Z"}`: {"exactly one"},
		`{"seq":0}`:               {"seq must be at least 1"},
		`{"seq":"3"}`:             {"seq must be a non-negative integer"},
		`{"seq":1000}`:            {"past the end"},
		`{"time":"last tuesday"}`: {"time must be an RFC 3339 time"},
		`{"sequence":3}`:          {`unknown field "sequence"`},
	} {
		wantError(t, h.do("POST", "/v1/registrations/w/rewind", body), http.StatusBadRequest, "invalid_argument", frags...)
	}
	wantError(t, h.do("POST", "/v1/registrations/missing/rewind", `{"seq":1}`), http.StatusNotFound, "not_found")
}

func TestPurge(t *testing.T) {
	h := newHarness(t)
	for i := range 5 {
		res := h.do("POST", "/v1/registrations", fmt.Sprintf(`{"id":"p%d","namespace":"a2a","taskId":"t%d","url":"https://agent.example/"}`, i, i),
			"Idempotency-Key", fmt.Sprintf("key-%d", i))
		if res.status != http.StatusCreated {
			t.Fatalf("create p%d: %d %s", i, res.status, res.body)
		}
	}
	h.create(`{"id":"parked","namespace":"outbox","subject":"journal.x","url":"https://a.example/"}`)
	if err := h.store.Park(t.Context(), "parked", "gone"); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		h.complete(fmt.Sprintf("p%d", i))
	}
	h.clock.advance(31 * 24 * time.Hour)

	rep := purge(t, h, `{"completedOlderThan":"720h","batchSize":3,"maxBatches":1,"idempotencyKeyMaxAge":"none"}`)
	if rep != (cursor.PurgeReport{RegistrationsDeleted: 3, Batches: 1, Complete: false}) {
		t.Errorf("bounded purge reported %+v, want 3 deleted in 1 batch, keys kept, incomplete", rep)
	}
	rep = purge(t, h, `{"completedOlderThan":"720h","idempotencyKeyMaxAge":"none"}`)
	if rep.RegistrationsDeleted != 1 || rep.IdempotencyKeysDeleted != 0 || !rep.Complete {
		t.Errorf("second purge reported %+v, want the last completed one, keys kept, complete", rep)
	}
	rep = purge(t, h, `{"completedOlderThan":"720h"}`)
	if rep.RegistrationsDeleted != 0 || rep.IdempotencyKeysDeleted == 0 || !rep.Complete {
		t.Errorf("purge with the default key age reported %+v, want old keys deleted", rep)
	}
	rows, _, _ := h.store.List(t.Context(), cursorListAll)
	if len(rows) != 2 {
		t.Errorf("%d registrations left, want the active p4 and the parked one", len(rows))
	}

	for body, frag := range map[string]string{
		`{}`:                           "completedOlderThan is required",
		`{"completedOlderThan":"30d"}`: `completedOlderThan must be a non-negative Go duration such as 720h, not "30d"`,
		`{"completedOlderThan":"-1h"}`: "completedOlderThan",
		`{"completedOlderThan":720}`:   "completedOlderThan must be a string",
		`{"completedOlderThan":"1h","idempotencyKeyMaxAge":"forever"}`: `idempotencyKeyMaxAge must be a non-negative Go duration such as 720h or "none"`,
		`{"completedOlderThan":"1h","batchSize":0}`:                    "batchSize must be at least 1",
		`{"completedOlderThan":"1h","maxBatches":-1}`:                  "maxBatches",
		`{"completedOlderThan":"1h","dryRun":true}`:                    `unknown field "dryRun"`,
	} {
		wantError(t, h.do("POST", "/v1/purge", body), http.StatusBadRequest, "invalid_argument", frag)
	}
}

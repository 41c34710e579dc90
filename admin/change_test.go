package admin

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jetstream-bridge/bridge/cursor"
)

const changeBody = `{"id":"c","namespace":"outbox","subject":"journal.x","url":"https://a.example/","secret":"` + goodSecret +
	`","headers":{"X-Team":"billing"},"start":{"seq":5}}`

func wantChange(t *testing.T, res response, status int, change string) Registration {
	t.Helper()
	if res.status != status {
		t.Fatalf("status %d, want %d: %s", res.status, status, res.body)
	}
	if got := res.header.Get("Bridge-Change"); got != change {
		t.Errorf("Bridge-Change %q, want %q", got, change)
	}
	return decodeView(t, res.body)
}

func TestCreateDryRunStoresNothing(t *testing.T) {
	h := newHarness(t)
	v := wantChange(t, h.do("POST", "/v1/registrations?dryRun=true", changeBody, "Idempotency-Key", "k1"), http.StatusOK, "create")
	if v.ID != "c" || v.NextSeq != 5 || !v.Signed || v.State != "active" {
		t.Errorf("dry run answered %+v; want the registration as the create would store it", v)
	}
	wantError(t, h.do("GET", "/v1/registrations/c", ""), http.StatusNotFound, "not_found")
	if w := h.waker.woken(); len(w) != 0 {
		t.Errorf("a dry run woke the worker for %v", w)
	}
	// The key of a dry run is not kept: the real create with it is new.
	made := h.create(changeBody)
	res := h.do("POST", "/v1/registrations", changeBody, "Idempotency-Key", "k1")
	wantError(t, res, http.StatusConflict, "already_exists", `"c"`)

	// Refused as the create is: the id taken, the body, the URL guard.
	wantError(t, h.do("POST", "/v1/registrations?dryRun=true", changeBody), http.StatusConflict, "already_exists", `"c"`)
	wantError(t, h.do("POST", "/v1/registrations?dryRun=true", strings.Replace(changeBody, "a.example", "refused.example", 1)),
		http.StatusBadRequest, "invalid_argument", "not granted")
	wantError(t, h.do("POST", "/v1/registrations?dryRun=true", `{"id":"d","namespace":"outbox","url":"https://a.example/"}`),
		http.StatusBadRequest, "invalid_argument", "subject")
	wantError(t, h.do("POST", "/v1/registrations?dryRun=yes", `{"id":"d"}`), http.StatusBadRequest, "invalid_argument", "dryRun", `"yes"`)
	if got, _ := h.store.Get(t.Context(), "c"); !got.UpdatedAt.Equal(made.UpdatedAt) {
		t.Errorf("a refused dry run touched the registration")
	}
}

func TestReplaceDryRunChangesNothing(t *testing.T) {
	h := newHarness(t)
	h.create(changeBody)
	before, _ := h.store.Get(t.Context(), "c")
	h.clock.advance(time.Hour)

	same := wantChange(t, h.do("PUT", "/v1/registrations/c?dryRun=true", changeBody), http.StatusOK, "unchanged")
	if !same.UpdatedAt.Equal(before.UpdatedAt) {
		t.Errorf("an unchanged dry run answered updatedAt %v, want %v", same.UpdatedAt, before.UpdatedAt)
	}
	// Another secret is a change, though no answer shows a secret.
	other := strings.Replace(changeBody, goodSecret, otherSecret, 1)
	next := wantChange(t, h.do("PUT", "/v1/registrations/c?dryRun=true", other), http.StatusOK, "update")
	if next.NextSeq != 5 || !next.UpdatedAt.Equal(h.clock.now()) {
		t.Errorf("an update's dry run answered %+v; want the cursor kept and updatedAt now", next)
	}
	wantChange(t, h.do("PUT", "/v1/registrations/c?dryRun=true", strings.Replace(changeBody, `"X-Team":"billing"`, `"X-Team":"sales"`, 1)),
		http.StatusOK, "update")
	wantError(t, h.do("PUT", "/v1/registrations/c?dryRun=true", `{"namespace":"a2a","taskId":"t","url":"https://a.example/"}`),
		http.StatusBadRequest, "invalid_argument", "namespace cannot change")
	wantError(t, h.do("PUT", "/v1/registrations/missing?dryRun=true", strings.Replace(changeBody, `"id":"c"`, `"id":"missing"`, 1)), http.StatusNotFound, "not_found", `"missing"`)
	wantError(t, h.do("PUT", "/v1/registrations/c?dryRun=1", changeBody), http.StatusBadRequest, "invalid_argument", "dryRun")

	after, _ := h.store.Get(t.Context(), "c")
	if after.Secret != goodSecret || !after.UpdatedAt.Equal(before.UpdatedAt) || after.Headers["X-Team"] != "billing" {
		t.Errorf("dry runs changed the registration: %+v", after)
	}
	if w := h.waker.woken(); slices.Contains(w[1:], "c") {
		t.Errorf("a dry run woke the worker: %v", w)
	}
}

// TestReplaceWithTheSameConfigurationWritesNothing: a PUT of what is
// stored leaves the row as it was, so applying a file twice moves no
// updatedAt; a changed secret is written, and then the same again is not,
// the rotation's previous secret notwithstanding.
func TestReplaceWithTheSameConfigurationWritesNothing(t *testing.T) {
	h := newHarness(t)
	made := h.create(changeBody)
	h.clock.advance(time.Hour)
	woken := len(h.waker.woken())

	v := wantChange(t, h.do("PUT", "/v1/registrations/c", changeBody), http.StatusOK, "unchanged")
	if !v.UpdatedAt.Equal(made.UpdatedAt) || v.NextSeq != 5 {
		t.Errorf("an unchanged PUT answered %+v, want updatedAt %v kept", v, made.UpdatedAt)
	}
	if stored, _ := h.store.Get(t.Context(), "c"); !stored.UpdatedAt.Equal(made.UpdatedAt) {
		t.Errorf("an unchanged PUT stored updatedAt %v", stored.UpdatedAt)
	}
	if len(h.waker.woken()) != woken {
		t.Errorf("an unchanged PUT woke the worker")
	}

	other := strings.Replace(changeBody, goodSecret, otherSecret, 1)
	v = wantChange(t, h.do("PUT", "/v1/registrations/c", other), http.StatusOK, "update")
	if !v.UpdatedAt.Equal(h.clock.now()) || v.NextSeq != 5 {
		t.Errorf("an update answered %+v; want updatedAt now and the cursor kept", v)
	}
	h.clock.advance(time.Minute)
	wantChange(t, h.do("PUT", "/v1/registrations/c", other), http.StatusOK, "unchanged")
	stored, _ := h.store.Get(t.Context(), "c")
	if stored.Secret != otherSecret || stored.PreviousSecret != goodSecret || !stored.UpdatedAt.Equal(v.UpdatedAt) {
		t.Errorf("after the same secret again: secret %q previous %q updatedAt %v", stored.Secret, stored.PreviousSecret, stored.UpdatedAt)
	}
}

// TestReplaceUnchangedStillResetsParking: §3's PUT resets attempts and
// parking whatever its body, so the same configuration on a parked
// registration is written; the configuration is still unchanged.
func TestReplaceUnchangedStillResetsParking(t *testing.T) {
	h := newHarness(t)
	h.create(changeBody)
	if err := h.store.Park(t.Context(), "c", "receiver answered 410"); err != nil {
		t.Fatal(err)
	}
	h.clock.advance(time.Hour)
	dry := wantChange(t, h.do("PUT", "/v1/registrations/c?dryRun=true", changeBody), http.StatusOK, "unchanged")
	if stored, _ := h.store.Get(t.Context(), "c"); dry.State != "active" || stored.State != cursor.Parked {
		t.Errorf("dry run: answered %s, stored %s; want active answered and parked kept", dry.State, stored.State)
	}
	v := wantChange(t, h.do("PUT", "/v1/registrations/c", changeBody), http.StatusOK, "unchanged")
	stored, _ := h.store.Get(t.Context(), "c")
	if v.State != "active" || v.Attempts != 0 || stored.State != cursor.Active || !stored.UpdatedAt.Equal(h.clock.now()) {
		t.Errorf("PUT on a parked registration: answered %s/%d, stored %s at %v", v.State, v.Attempts, stored.State, stored.UpdatedAt)
	}
}

// TestPlanAnswersEveryEntryAndChangesNothing: one plan of a file's
// entries names each one's change, or the refusal its write would get,
// and writes nothing.
func TestPlanAnswersEveryEntryAndChangesNothing(t *testing.T) {
	h := newHarness(t)
	h.create(changeBody)
	h.create(`{"id":"same","namespace":"outbox","subject":"journal.x","url":"https://a.example/"}`)
	h.create(`{"id":"ns","namespace":"outbox","subject":"journal.x","url":"https://a.example/"}`)
	before, _ := h.store.Get(t.Context(), "c")
	h.clock.advance(time.Hour)
	cases := []struct {
		entry, id, change string
		status            int
		fragment          string
	}{
		{`{"id":"same","namespace":"outbox","subject":"journal.x","url":"https://a.example/","start":"first"}`, "same", "unchanged", 0, ""},
		{strings.Replace(changeBody, goodSecret, otherSecret, 1), "c", "update", 0, ""},
		{`{"id":"new","namespace":"outbox","subject":"journal.y","url":"https://a.example/"}`, "new", "create", 0, ""},
		{`{"id":"refused","namespace":"outbox","subject":"journal.y","url":"https://refused.example/"}`, "refused", "", 400, "not granted"},
		{`{"id":"ns","namespace":"a2a","taskId":"t","url":"https://a.example/"}`, "ns", "", 400, "namespace cannot change"},
		{`{"namespace":"outbox","subject":"journal.y","url":"https://a.example/"}`, "", "", 400, "id is required"},
		{`{"id":"odd","namespace":"outbox","subject":"journal.y","url":"https://a.example/","colour":"red"}`, "odd", "", 400, `unknown field "colour"`},
		{`[]`, "", "", 400, "must be a JSON object"},
		{`{"id":"new","namespace":"outbox","subject":"journal.z","url":"https://a.example/"}`, "new", "", 400, "listed twice"},
	}
	entries := make([]string, len(cases))
	for i, c := range cases {
		entries[i] = c.entry
	}
	res := h.do("POST", "/v1/plan", `{"registrations":[`+strings.Join(entries, ",")+`]}`)
	if res.status != http.StatusOK {
		t.Fatalf("plan: %d %s", res.status, res.body)
	}
	var plan Plan
	if err := json.Unmarshal(res.body, &plan); err != nil || len(plan.Registrations) != len(cases) {
		t.Fatalf("plan answered %s (%v), want %d entries", res.body, err, len(cases))
	}
	for i, c := range cases {
		e := plan.Registrations[i]
		ok := e.ID == c.id && e.Change == c.change
		if c.status != 0 {
			ok = ok && e.Error != nil && e.Error.Status == c.status && strings.Contains(e.Error.Message, c.fragment)
		} else {
			ok = ok && e.Error == nil
		}
		if !ok {
			t.Errorf("entry %d: %+v (error %+v); want id %q change %q status %d %q", i, e, e.Error, c.id, c.change, c.status, c.fragment)
		}
	}
	if after, _ := h.store.Get(t.Context(), "c"); after.Secret != goodSecret || !after.UpdatedAt.Equal(before.UpdatedAt) {
		t.Errorf("a plan changed c: %+v", after)
	}
	wantError(t, h.do("GET", "/v1/registrations/new", ""), http.StatusNotFound, "not_found")

	wantError(t, h.do("POST", "/v1/plan", `{}`), http.StatusBadRequest, "invalid_argument", "registrations is required")
	many := `{"registrations":[` + strings.TrimSuffix(strings.Repeat(`{},`, maxPlanEntries+1), ",") + `]}`
	wantError(t, h.do("POST", "/v1/plan", many), http.StatusBadRequest, "invalid_argument", "at most 1000")
}

// TestPlanKeepsToATokensPrefix: an operator's plan refuses an entry
// outside its prefix as its create would, and says nothing of what is
// stored there.
func TestPlanKeepsToATokensPrefix(t *testing.T) {
	h, viewer, operator := scopedHarness(t)
	body := `{"registrations":[{"id":"team-a-1","namespace":"outbox","subject":"journal.>","url":"https://x.example/"},` +
		`{"id":"team-b-1","namespace":"outbox","subject":"journal.>","url":"https://x.example/"}]}`
	res := h.as(operator, "POST", "/v1/plan", body)
	var plan Plan
	if err := json.Unmarshal(res.body, &plan); err != nil || len(plan.Registrations) != 2 {
		t.Fatalf("plan: %d %s", res.status, res.body)
	}
	if e := plan.Registrations[0]; e.Change != "unchanged" {
		t.Errorf("team-a-1: %+v", e)
	}
	if e := plan.Registrations[1]; e.Error == nil || e.Error.Status != 400 || !strings.Contains(e.Error.Message, `id must start with "team-a-"`) {
		t.Errorf("team-b-1: %+v", e)
	}
	wantError(t, h.as(viewer, "POST", "/v1/plan", body), http.StatusForbidden, codePermissionDenied)
}

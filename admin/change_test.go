package admin

import (
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

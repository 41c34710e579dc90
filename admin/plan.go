package admin

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/jetstream-bridge/bridge/cursor"
)

// maxPlanEntries bounds one plan, so its answer stays small and its
// checks (each may resolve a URL's host) end within a client's timeout.
const maxPlanEntries = 1000

// planRequest is a batch of create bodies, each with its id: a file of
// registrations as `bridge apply` reads it.
type planRequest struct {
	Registrations []json.RawMessage `json:"registrations"`
}

// PlanEntry is what writing one entry of a plan would do: Change is
// create, update or unchanged, or Error says why the write would be
// refused, as the write itself would (Status is its HTTP status).
type PlanEntry struct {
	ID     string     `json:"id"`
	Change string     `json:"change,omitempty"`
	Error  *PlanError `json:"error,omitempty"`
}

// PlanError is a refusal within a plan's answer.
type PlanError struct {
	Status  int    `json:"status"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Plan is the answer of POST /v1/plan, entry for entry.
type Plan struct {
	Registrations []PlanEntry `json:"registrations"`
}

// plan answers POST /v1/plan: the dry run of a PUT, or of a create when
// the id is not found, for every entry at once, so a client can check a
// whole file in one call per thousand entries instead of one per entry.
// It changes nothing.
func (s *server) plan(w http.ResponseWriter, r *http.Request) error {
	var req planRequest
	if _, err := decodeBody(w, r, &req); err != nil {
		return err
	}
	switch {
	case req.Registrations == nil:
		return invalid("registrations is required: a list of create bodies, each with its id")
	case len(req.Registrations) > maxPlanEntries:
		return invalid("a plan holds at most %d registrations, not %d; send the rest in another", maxPlanEntries, len(req.Registrations))
	}
	out := Plan{Registrations: make([]PlanEntry, len(req.Registrations))}
	seen := make(map[string]bool, len(req.Registrations))
	for i, raw := range req.Registrations {
		e := &out.Registrations[i]
		change, err := s.planEntry(r, raw, e, seen)
		if err != nil {
			var ae *apiError
			if !errors.As(err, &ae) {
				return err // the store failing: the whole plan is unknown
			}
			e.Error = &PlanError{Status: ae.status, Code: ae.code, Message: ae.message}
			continue
		}
		e.Change = change
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// planEntry checks one entry as its PUT, or its create, would and names
// the change; e gets the entry's id as soon as it is known.
func (s *server) planEntry(r *http.Request, raw json.RawMessage, e *PlanEntry, seen map[string]bool) (string, error) {
	ctx := r.Context()
	var named struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(raw, &named) == nil { // the id of an entry that fails to decode, for its refusal
		e.ID = named.ID
	}
	var req registrationRequest
	if err := decodeStrict(raw, &req); err != nil {
		return "", err
	}
	switch c := callerOf(ctx); {
	case req.ID == "":
		return "", invalid("id is required in a plan: it names the registration the entry is")
	case validID(req.ID) != nil:
		return "", validID(req.ID)
	case seen[req.ID]:
		return "", invalid("registration %q is listed twice in the plan", req.ID)
	case !c.sees(req.ID):
		return "", invalid("id must start with %q: token %q reaches only the registrations whose id does", c.prefix, c.name)
	}
	seen[req.ID] = true
	old, err := s.store.Get(ctx, req.ID)
	switch {
	case errors.Is(err, cursor.ErrNotFound):
		_, err := s.newRegistration(ctx, &req)
		return changeCreate, err
	case err != nil:
		return "", storeError(err, req.ID, "reading the registration")
	}
	cfg, err := s.replacementOf(ctx, old, &req, s.now())
	if err != nil {
		return "", err
	}
	return change(old.Config, cfg), nil
}

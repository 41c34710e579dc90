package admin

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jetstream-bridge/bridge/attempt"
	"github.com/jetstream-bridge/bridge/cursor"
	"github.com/jetstream-bridge/bridge/events"
)

// accessCase is one /v1 route as the test calls it: its path and body
// with {id} for a registration id (or {name} for a token name), and who
// may call it. It is written independently of the route table, so a
// route added to the table must be added here, with what it should do.
type accessCase struct {
	path, body string
	want       access
}

var accessCases = map[string]accessCase{
	"POST /v1/registrations":              {"/v1/registrations", `{"id":"{id}","namespace":"outbox","subject":"journal.>","url":"https://x.example/"}`, write},
	"GET /v1/registrations":               {"/v1/registrations", "", read},
	"GET /v1/registrations/{id}":          {"/v1/registrations/{id}", "", read},
	"PUT /v1/registrations/{id}":          {"/v1/registrations/{id}", `{"namespace":"outbox","subject":"journal.>","url":"https://y.example/"}`, write},
	"DELETE /v1/registrations/{id}":       {"/v1/registrations/{id}", "", write},
	"POST /v1/registrations/{id}/unpark":  {"/v1/registrations/{id}/unpark", "", write},
	"POST /v1/registrations/{id}/rewind":  {"/v1/registrations/{id}/rewind", `{"seq":5}`, write},
	"GET /v1/registrations/{id}/attempts": {"/v1/registrations/{id}/attempts", "", read},
	"POST /v1/registrations/{id}/resend":  {"/v1/registrations/{id}/resend", `{"seq":3}`, write},
	"GET /v1/attempts":                    {"/v1/attempts?seq=3", "", read},
	"POST /v1/plan":                       {"/v1/plan", `{"registrations":[{"id":"{id}","namespace":"outbox","subject":"journal.>","url":"https://x.example/"}]}`, write},
	"POST /v1/purge":                      {"/v1/purge", `{"completedOlderThan":"1h"}`, rootOnly},
	"GET /v1/cluster":                     {"/v1/cluster", "", rootOnly},
	"POST /v1/tokens":                     {"/v1/tokens", `{"name":"another","idPrefix":"team-a-","role":"viewer"}`, rootOnly},
	"GET /v1/tokens":                      {"/v1/tokens", "", rootOnly},
	"DELETE /v1/tokens/{name}":            {"/v1/tokens/other-team", "", rootOnly},
	"GET /v1/whoami":                      {"/v1/whoami", "", read},
}

// TestEveryRouteDeclaresAccess: every /v1 route of the table has a case
// here, and the access the table declares is the one the case expects.
func TestEveryRouteDeclaresAccess(t *testing.T) {
	seen := map[string]bool{}
	for _, rt := range (&server{}).table() {
		if !strings.HasPrefix(rt.path, "/v1/") {
			if rt.access != public {
				t.Errorf("%s %s outside /v1 is not public", rt.method, rt.path)
			}
			continue
		}
		key := rt.method + " " + rt.path
		seen[key] = true
		c, ok := accessCases[key]
		switch {
		case rt.path == "/v1/openapi.json":
			if rt.access != public {
				t.Errorf("%s: the OpenAPI document is public, declared %d", key, rt.access)
			}
		case !ok:
			t.Errorf("%s has no case in accessCases: say who may call it, and TestRouteAccess checks the route", key)
		case c.want != rt.access:
			t.Errorf("%s declares access %d, the case expects %d", key, rt.access, c.want)
		}
	}
	for key := range accessCases {
		if !seen[key] {
			t.Errorf("accessCases has %s, which the table does not serve", key)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("a /v1 route without access was served")
		}
	}()
	s := &server{}
	s.serveTable([]route{{method: "GET", path: "/v1/new", h: http.NotFoundHandler()}})
}

// storeResender resends to what the store holds, as the daemon does.
type storeResender struct{ store cursor.Store }

func (r storeResender) Resend(ctx context.Context, id string, seq uint64) ([]attempt.Attempt, error) {
	if _, err := r.store.Get(ctx, id); err != nil {
		return nil, err
	}
	return []attempt.Attempt{{Registration: id, Seq: seq, Attempt: 2, Outcome: attempt.Outcome2xx, Status: 204, Trigger: attempt.TriggerResend}}, nil
}

// scopedHarness has team-a-1, team-a-2 and team-b-1, parked, a viewer and
// an operator token on team-a-, and attempts of seq 3 for both teams.
func scopedHarness(t *testing.T) (h *harness, viewer, operator string) {
	t.Helper()
	log := &fakeLog{byReg: []attempt.Attempt{
		{Registration: "team-a-1", Seq: 3, Attempt: 1, Outcome: attempt.Outcome2xx, Status: 204, Trigger: attempt.TriggerDelivery},
		{Registration: "team-b-1", Seq: 3, Attempt: 1, Outcome: attempt.Outcome2xx, Status: 204, Trigger: attempt.TriggerDelivery},
	}}
	h = newHarness(t, func(o *Options) { o.Attempts, o.Resender = log, storeResender{o.Store} })
	for _, id := range []string{"team-a-1", "team-a-2", "team-b-1"} {
		h.create(`{"id":"` + id + `","namespace":"outbox","subject":"journal.>","url":"https://x.example/","start":"first"}`)
		if err := h.store.Park(t.Context(), id, "503"); err != nil {
			t.Fatal(err)
		}
	}
	return h, h.token("viewer-a", "team-a-", "viewer"), h.token("operator-a", "team-a-", "operator")
}

// token makes a token with the root token and returns it.
func (h *harness) token(name, prefix, role string) string {
	h.t.Helper()
	res := h.do("POST", "/v1/tokens", `{"name":"`+name+`","idPrefix":"`+prefix+`","role":"`+role+`"}`)
	var tok Token
	if err := json.Unmarshal(res.body, &tok); res.status != http.StatusCreated || err != nil || tok.Secret == "" {
		h.t.Fatalf("create token %s: %d %s", name, res.status, res.body)
	}
	return tok.Secret
}

func (h *harness) as(token, method, path, body string) response {
	h.t.Helper()
	return h.do(method, path, body, "Authorization", "Bearer "+token)
}

// TestRouteAccess calls every /v1 route as no one, the root token, and
// a viewer and an operator of team-a-, on team-a- and team-b- ids.
func TestRouteAccess(t *testing.T) {
	for key, c := range accessCases {
		method, _, _ := strings.Cut(key, " ")
		t.Run(strings.ReplaceAll(key, "/", "_"), func(t *testing.T) {
			h, viewer, operator := scopedHarness(t)
			on := func(token, id string) response {
				p, b := strings.ReplaceAll(c.path, "{id}", id), strings.ReplaceAll(c.body, "{id}", id)
				if token == "" {
					return h.do(method, p, b, "Authorization", "")
				}
				return h.as(token, method, p, b)
			}
			wantError(t, on("", "team-a-1"), http.StatusUnauthorized, codeUnauthenticated)
			wantError(t, on("bst_not-a-token", "team-a-1"), http.StatusUnauthorized, codeUnauthenticated)
			for _, tok := range []string{viewer, operator} {
				switch {
				case c.want == rootOnly, c.want == write && tok == viewer:
					for _, id := range []string{"team-a-1", "team-b-1", "team-a-none"} {
						wantError(t, on(tok, id), http.StatusForbidden, codePermissionDenied)
					}
					continue
				case strings.Contains(key, "{id}"):
					// Another team's registration answers exactly as one
					// that does not exist, and is left as it was.
					out, missing := on(tok, "team-b-1"), on(tok, "team-a-none")
					if out.status != missing.status || strings.ReplaceAll(string(out.body), "team-b-1", "team-a-none") != string(missing.body) {
						t.Errorf("team-b-1: %d %s; a missing id: %d %s", out.status, out.body, missing.status, missing.body)
					}
					if out.status != http.StatusNotFound && out.status != http.StatusNoContent {
						t.Errorf("team-b-1 answered %d, want 404 or 204", out.status)
					}
					if got := get(t, h, "team-b-1"); got.State != "parked" || got.URL != "https://x.example/" || got.NextSeq != 1 {
						t.Errorf("team-b-1 changed: %+v", got)
					}
				}
				// Its own registration answers as the root token's twin.
				mine, roots := on(tok, "team-a-1"), on(testToken, "team-a-2")
				if mine.status != roots.status {
					t.Errorf("%s on team-a-1: %d %s; root on team-a-2: %d %s", tok[:8], mine.status, mine.body, roots.status, roots.body)
				}
			}
			if res := on(testToken, "team-b-2"); res.status == http.StatusUnauthorized || res.status == http.StatusForbidden {
				t.Errorf("root: %d %s", res.status, res.body)
			}
		})
	}
}

func get(t *testing.T, h *harness, id string) cursor.Registration {
	t.Helper()
	r, err := h.store.Get(t.Context(), id)
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return r
}

// TestScopedReadsAndCreates: a scoped token's listings and attempts hold
// only its registrations, and its creates must carry its prefix.
func TestScopedReadsAndCreates(t *testing.T) {
	h, viewer, operator := scopedHarness(t)
	for _, q := range []string{"", "?prefix=team-", "?prefix=team-a-1"} {
		var page Page
		res := h.as(viewer, "GET", "/v1/registrations"+q, "")
		if err := json.Unmarshal(res.body, &page); err != nil || res.status != 200 {
			t.Fatalf("list%s: %d %s", q, res.status, res.body)
		}
		for _, r := range page.Registrations {
			if !strings.HasPrefix(r.ID, "team-a-") {
				t.Errorf("list%s shows %s", q, r.ID)
			}
		}
		if len(page.Registrations) == 0 {
			t.Errorf("list%s shows nothing", q)
		}
	}
	if res := h.as(viewer, "GET", "/v1/registrations?prefix=team-b-", ""); string(res.body) != `{"registrations":[],"next":""}`+"\n" {
		t.Errorf("list of another team's prefix: %s", res.body)
	}
	var list AttemptList
	res := h.as(viewer, "GET", "/v1/attempts?seq=3", "")
	if err := json.Unmarshal(res.body, &list); err != nil || len(list.Attempts) != 1 || list.Attempts[0].Registration != "team-a-1" {
		t.Errorf("attempts of seq 3: %s", res.body)
	}
	body := `{"id":"%s","namespace":"outbox","subject":"journal.>","url":"https://x.example/"}`
	wantError(t, h.as(operator, "POST", "/v1/registrations", strings.Replace(body, "%s", "team-b-9", 1)), 400, codeInvalidArgument, `"team-a-"`, "id")
	wantError(t, h.as(operator, "POST", "/v1/registrations", `{"namespace":"outbox","subject":"journal.>","url":"https://x.example/"}`), 400, codeInvalidArgument, "id")
	if res := h.as(operator, "POST", "/v1/registrations", strings.Replace(body, "%s", "team-a-9", 1)); res.status != 201 {
		t.Errorf("operator's create of team-a-9: %d %s", res.status, res.body)
	}
	var who WhoAmI
	res = h.as(viewer, "GET", "/v1/whoami", "")
	if err := json.Unmarshal(res.body, &who); err != nil || who != (WhoAmI{Name: "viewer-a", Role: "viewer", IDPrefix: "team-a-"}) {
		t.Errorf("whoami: %s", res.body)
	}
	if res := h.do("GET", "/v1/whoami", ""); string(res.body) != `{"name":"root","role":"root","idPrefix":""}`+"\n" {
		t.Errorf("root's whoami: %s", res.body)
	}
}

// TestTokenLifecycle: a token shown once, listed without it, refused once
// revoked or expired; the log and answers never hold it.
func TestTokenLifecycle(t *testing.T) {
	h := newHarness(t)
	wantError(t, h.do("POST", "/v1/tokens", `{"name":"a b","idPrefix":"a-","role":"viewer"}`), 400, codeInvalidArgument, "name")
	wantError(t, h.do("POST", "/v1/tokens", `{"name":"root","idPrefix":"a-","role":"viewer"}`), 400, codeInvalidArgument, "name")
	wantError(t, h.do("POST", "/v1/tokens", `{"name":"a","idPrefix":"a/","role":"viewer"}`), 400, codeInvalidArgument, "idPrefix")
	wantError(t, h.do("POST", "/v1/tokens", `{"name":"a","idPrefix":"a-","role":"admin"}`), 400, codeInvalidArgument, "role")
	wantError(t, h.do("POST", "/v1/tokens", `{"name":"a","idPrefix":"a-","role":"viewer","expiresAt":"2020-01-01T00:00:00Z"}`), 400, codeInvalidArgument, "expiresAt")
	wantError(t, h.do("POST", "/v1/tokens", `{"name":"a","idPrefix":"a-","role":"viewer","expiresAt":"tomorrow"}`), 400, codeInvalidArgument, "expiresAt")

	exp := h.clock.now().Add(time.Hour).UTC()
	res := h.do("POST", "/v1/tokens", `{"name":"a","idPrefix":"a-","role":"viewer","expiresAt":"`+exp.Format(time.RFC3339)+`"}`)
	var tok Token
	if err := json.Unmarshal(res.body, &tok); err != nil || res.status != 201 || !strings.HasPrefix(tok.Secret, "bst_") || len(tok.Secret) < 4+43 ||
		tok.Name != "a" || tok.Role != "viewer" || tok.ExpiresAt == nil || !tok.ExpiresAt.Equal(exp) || !tok.CreatedAt.Equal(h.clock.now()) {
		t.Fatalf("create: %d %s", res.status, res.body)
	}
	wantError(t, h.do("POST", "/v1/tokens", `{"name":"a","idPrefix":"b-","role":"operator"}`), 409, codeAlreadyExists, `"a"`)
	res = h.do("GET", "/v1/tokens", "")
	if res.status != 200 || strings.Contains(string(res.body), tok.Secret) || !strings.Contains(string(res.body), `"name":"a"`) || strings.Contains(string(res.body), `"token"`) {
		t.Fatalf("list: %d %s", res.status, res.body)
	}
	if res := h.as(tok.Secret, "GET", "/v1/registrations", ""); res.status != 200 {
		t.Fatalf("the new token: %d %s", res.status, res.body)
	}
	h.clock.advance(time.Hour)
	wantError(t, h.as(tok.Secret, "GET", "/v1/registrations", ""), 401, codeUnauthenticated, "expired")

	second := h.token("b", "", "operator")
	if res := h.as(second, "GET", "/v1/whoami", ""); res.status != 200 {
		t.Fatalf("b: %d %s", res.status, res.body)
	}
	for range 2 {
		if res := h.do("DELETE", "/v1/tokens/b", ""); res.status != 204 {
			t.Fatalf("revoke: %d %s", res.status, res.body)
		}
	}
	wantError(t, h.as(second, "GET", "/v1/whoami", ""), 401, codeUnauthenticated)
	for _, secret := range []string{tok.Secret, second} {
		if strings.Contains(h.logs.String(), secret) {
			t.Errorf("the log holds a token")
		}
	}
	for _, line := range []string{"token created", "token revoked"} {
		if !strings.Contains(h.logs.String(), line) || !strings.Contains(h.logs.String(), "actor=root") {
			t.Errorf("the log lacks %q with its actor:\n%s", line, h.logs)
		}
	}
}

// TestActorOnEventsAndLog: what a scoped token changes is published and
// logged with its name.
func TestActorOnEventsAndLog(t *testing.T) {
	ev := &recordingEvents{}
	h := newHarness(t, func(o *Options) { o.Events = ev })
	op := h.token("ops-a", "a-", "operator")
	h.as(op, "POST", "/v1/registrations", `{"id":"a-1","namespace":"outbox","subject":"journal.>","url":"https://x.example/"}`)
	h.as(op, "DELETE", "/v1/registrations/a-1", "")
	h.do("DELETE", "/v1/tokens/ops-a", "")
	got := ev.all()
	want := []string{"token.created root", "registration.created ops-a", "registration.deleted ops-a", "token.revoked root"}
	var have []string
	for _, e := range got {
		have = append(have, string(e.Kind)+" "+e.Actor)
		if e.Token != nil && e.Token.Hash != nil {
			t.Errorf("%s carries the token's hash", e.Kind)
		}
	}
	if !slices.Equal(have, want) {
		t.Errorf("events %q, want %q", have, want)
	}
	if !strings.Contains(h.logs.String(), "actor=ops-a") {
		t.Errorf("the log does not name the actor:\n%s", h.logs)
	}
}

// recordingEvents keeps what the API publishes.
type recordingEvents struct {
	mu     sync.Mutex
	events []events.Event
}

func (r *recordingEvents) Publish(e events.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recordingEvents) all() []events.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

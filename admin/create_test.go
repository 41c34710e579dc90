package admin

import (
	"bytes"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// goodSecret is a valid Standard Webhooks key (32 bytes).
const goodSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwAAAAAAAAAAA="

func TestCreateOutboxDefaults(t *testing.T) {
	h := newHarness(t)
	v := h.create(`{"namespace":"outbox","subject":"journal.orders.>","url":"https://billing.example/hook"}`)

	if !regexp.MustCompile(`^[A-Za-z0-9._-]{1,128}$`).MatchString(v.ID) {
		t.Errorf("generated id %q does not match the id grammar", v.ID)
	}
	if v.Format != "binary" || v.State != "active" || v.Subject != "journal.orders.>" {
		t.Errorf("format %q state %q subject %q, want binary active journal.orders.>", v.Format, v.State, v.Subject)
	}
	// start "new" is fixed at creation: the stream's last sequence + 1.
	if v.NextSeq != h.journal.last+1 {
		t.Errorf("nextSeq %d, want %d", v.NextSeq, h.journal.last+1)
	}
	if v.Signed || v.HasToken || v.Authentication != nil || v.Attempts != 0 || v.Delivered != 0 {
		t.Errorf("fresh registration claims state it does not have: %+v", v)
	}
	if !v.CreatedAt.Equal(h.clock.now()) {
		t.Errorf("createdAt %v, want the clock's %v", v.CreatedAt, h.clock.now())
	}
	if got := h.waker.woken(); len(got) != 1 || got[0] != v.ID {
		t.Errorf("woken %v, want [%s]", got, v.ID)
	}
}

func TestCreateAnswerKeepsSubjectReadable(t *testing.T) {
	h := newHarness(t)
	res := h.do("POST", "/v1/registrations", `{"id":"r","namespace":"outbox","subject":"journal.>","url":"https://a.example/"}`)
	if !bytes.Contains(res.body, []byte(`"subject":"journal.>"`)) {
		t.Errorf("answer escapes the subject: %s", res.body)
	}
	if loc := res.header.Get("Location"); loc != "/v1/registrations/r" {
		t.Errorf("Location %q, want /v1/registrations/r", loc)
	}
}

func TestCreateA2ADefaults(t *testing.T) {
	h := newHarness(t)
	v := h.create(`{"id":"push-1","namespace":"a2a","taskId":"task-42","url":"https://agent.example/push","token":"tkn"}`)
	if v.Subject != "journal.a2a.task-42" || v.TaskID != "task-42" {
		t.Errorf("subject %q taskId %q, want journal.a2a.task-42 task-42", v.Subject, v.TaskID)
	}
	// a2a starts at the stream's first sequence by default.
	if v.NextSeq != h.journal.first {
		t.Errorf("nextSeq %d, want the first sequence %d", v.NextSeq, h.journal.first)
	}
	if !v.HasToken || v.Format != "" {
		t.Errorf("hasToken %v format %q, want true and no format", v.HasToken, v.Format)
	}
}

func TestCreateStart(t *testing.T) {
	h := newHarness(t)
	base := h.journal.base
	tests := []struct {
		start string
		want  uint64
	}{
		{`"new"`, 42},
		{`"first"`, 1},
		{`{"seq": 7}`, 7},
		{`{"seq": 42}`, 42},
		{`{"time": "` + base.Add(10*time.Second).Format(time.RFC3339) + `"}`, 11},
		{`{"time": "` + base.Add(-time.Hour).Format(time.RFC3339) + `"}`, 1},
	}
	for _, tt := range tests {
		v := h.create(`{"namespace":"outbox","subject":"journal.x","url":"https://a.example/","start":` + tt.start + `}`)
		if v.NextSeq != tt.want {
			t.Errorf("start %s: nextSeq %d, want %d", tt.start, v.NextSeq, tt.want)
		}
	}
}

func TestCreateFullConfiguration(t *testing.T) {
	h := newHarness(t)
	v := h.create(`{"id":"billing","namespace":"outbox","subject":"journal.orders.*","url":"https://billing.example/hook",
		"format":"structured","dataContentType":"application/json","secret":"` + goodSecret + `",
		"authentication":{"scheme":"Bearer","credentials":"c"},
		"batch":{"maxEvents":100,"maxBytes":1048576,"maxDelay":"50ms"}}`)
	if v.Format != "structured" || v.DataContentType != "application/json" || !v.Signed {
		t.Errorf("format %q dataContentType %q signed %v", v.Format, v.DataContentType, v.Signed)
	}
	if v.Authentication == nil || v.Authentication.Scheme != "Bearer" {
		t.Errorf("authentication %+v, want scheme Bearer", v.Authentication)
	}
	if b := v.Batch; b == nil || b.MaxEvents != 100 || b.MaxBytes != 1048576 || b.MaxDelay != "50ms" {
		t.Errorf("batch %+v, want 100 / 1048576 / 50ms", v.Batch)
	}
	stored, err := h.store.Get(t.Context(), "billing")
	if err != nil {
		t.Fatal(err)
	}
	if stored.Secret != goodSecret || stored.AuthCredentials != "c" || stored.Batch.MaxDelay != 50*time.Millisecond {
		t.Errorf("store did not receive the configuration: %+v", stored.Config)
	}
}

func TestCreateRefusesInvalid(t *testing.T) {
	const ok = `"namespace":"outbox","subject":"journal.x","url":"https://a.example/"`
	tests := []struct {
		name, body string
		status     int
		code       string
		fragments  []string
	}{
		{"empty body", ``, 400, "invalid_argument", []string{"empty"}},
		{"malformed", `{"namespace":`, 400, "invalid_argument", []string{"truncated"}},
		{"syntax", `{"namespace" "outbox"}`, 400, "invalid_argument", []string{"not valid JSON"}},
		{"not an object", `["outbox"]`, 400, "invalid_argument", []string{"JSON object", "array"}},
		{"unknown field", `{` + ok + `,"subjekt":"x"}`, 400, "invalid_argument", []string{`unknown field "subjekt"`}},
		{"unknown nested field", `{` + ok + `,"batch":{"maxEvent":1}}`, 400, "invalid_argument", []string{`"maxEvent"`}},
		{"wrong type", `{` + ok + `,"id":7}`, 400, "invalid_argument", []string{"id must be a string", "number"}},
		{"wrong nested type", `{` + ok + `,"batch":{"maxEvents":"10"}}`, 400, "invalid_argument", []string{"batch.maxEvents must be an integer"}},
		{"trailing data", `{` + ok + `} {}`, 400, "invalid_argument", []string{"after the JSON object"}},
		{"bad id", `{` + ok + `,"id":"a b"}`, 400, "invalid_argument", []string{"id", "letters, digits"}},
		{"dot id", `{` + ok + `,"id":".."}`, 400, "invalid_argument", []string{"path segment"}},
		{"long id", `{` + ok + `,"id":"` + strings.Repeat("x", 129) + `"}`, 400, "invalid_argument", []string{"at most 128"}},
		{"no namespace", `{"subject":"journal.x","url":"https://a.example/"}`, 400, "invalid_argument", []string{"namespace is required"}},
		{"bad namespace", `{"namespace":"inbox","subject":"journal.x","url":"https://a.example/"}`, 400, "invalid_argument", []string{"namespace", "inbox"}},
		{"no subject", `{"namespace":"outbox","url":"https://a.example/"}`, 400, "invalid_argument", []string{"subject is required"}},
		{"empty token", `{"namespace":"outbox","subject":"journal..x","url":"https://a.example/"}`, 400, "invalid_argument", []string{"empty token"}},
		{"gt not last", `{"namespace":"outbox","subject":"journal.>.x","url":"https://a.example/"}`, 400, "invalid_argument", []string{"'>' only as its last token"}},
		{"partial wildcard", `{"namespace":"outbox","subject":"journal.or*","url":"https://a.example/"}`, 400, "invalid_argument", []string{"whole tokens"}},
		{"space in subject", `{"namespace":"outbox","subject":"journal.a b","url":"https://a.example/"}`, 400, "invalid_argument", []string{"whitespace"}},
		{"no url", `{"namespace":"outbox","subject":"journal.x"}`, 400, "invalid_argument", []string{"url is required"}},
		{"refused url", `{"namespace":"outbox","subject":"journal.x","url":"https://refused.example/"}`, 400, "invalid_argument", []string{`url host "refused.example" is not granted`}},
		{"a2a plain http", `{"namespace":"a2a","taskId":"t1","url":"http://agent.example/"}`, 400, "invalid_argument", []string{"url must use https for a2a registrations"}},
		{"userinfo url", `{"namespace":"outbox","subject":"journal.x","url":"https://u:p@a.example/"}`, 400, "invalid_argument", []string{"userinfo"}},
		{"bad format", `{` + ok + `,"format":"json"}`, 400, "invalid_argument", []string{"format must be binary or structured"}},
		{"bad content type", `{` + ok + `,"dataContentType":"not a type"}`, 400, "invalid_argument", []string{"dataContentType"}},
		{"secret without prefix", `{` + ok + `,"secret":"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}`, 400, "invalid_argument", []string{"secret must be"}},
		{"secret too short", `{` + ok + `,"secret":"whsec_c2hvcnQ="}`, 400, "invalid_argument", []string{"24 to 64 byte"}},
		{"secret not base64", `{` + ok + `,"secret":"whsec_!!!!"}`, 400, "invalid_argument", []string{"base64"}},
		{"token on outbox", `{` + ok + `,"token":"t"}`, 400, "invalid_argument", []string{"token applies to a2a"}},
		{"task on outbox", `{` + ok + `,"taskId":"t"}`, 400, "invalid_argument", []string{"taskId applies to a2a"}},
		{"bad auth scheme", `{` + ok + `,"authentication":{"scheme":"Bear er","credentials":"c"}}`, 400, "invalid_argument", []string{"authentication.scheme"}},
		{"no credentials", `{` + ok + `,"authentication":{"scheme":"Bearer"}}`, 400, "invalid_argument", []string{"authentication.credentials is required"}},
		{"CRLF credentials", `{` + ok + `,"authentication":{"scheme":"Bearer","credentials":"a\r\nX-Evil: 1"}}`, 400, "invalid_argument", []string{"control characters"}},
		{"zero batch", `{` + ok + `,"batch":{"maxEvents":0}}`, 400, "invalid_argument", []string{"batch.maxEvents must be positive"}},
		{"bad batch delay", `{` + ok + `,"batch":{"maxDelay":"soon"}}`, 400, "invalid_argument", []string{"batch.maxDelay", "soon"}},
		{"a2a without task", `{"namespace":"a2a","url":"https://agent.example/"}`, 400, "invalid_argument", []string{"taskId is required"}},
		{"a2a dotted task", `{"namespace":"a2a","taskId":"a.b","url":"https://agent.example/"}`, 400, "invalid_argument", []string{"one subject token"}},
		{"a2a format", `{"namespace":"a2a","taskId":"t","url":"https://agent.example/","format":"binary"}`, 400, "invalid_argument", []string{"format applies to outbox"}},
		{"a2a batch", `{"namespace":"a2a","taskId":"t","url":"https://agent.example/","batch":{}}`, 400, "invalid_argument", []string{"batch applies to outbox"}},
		{"start word", `{` + ok + `,"start":"latest"}`, 400, "invalid_argument", []string{"start must be"}},
		{"start number", `{` + ok + `,"start":5}`, 400, "invalid_argument", []string{"start must be"}},
		{"start both", `{` + ok + `,"start":{"seq":1,"time":"2026-01-01T00:00:00Z"}}`, 400, "invalid_argument", []string{"start.seq or start.time", "exactly one"}},
		{"start empty", `{` + ok + `,"start":{}}`, 400, "invalid_argument", []string{"exactly one"}},
		{"start zero", `{` + ok + `,"start":{"seq":0}}`, 400, "invalid_argument", []string{"start.seq must be at least 1"}},
		{"start negative", `{` + ok + `,"start":{"seq":-3}}`, 400, "invalid_argument", []string{"start: seq must be a non-negative integer"}},
		{"start past end", `{` + ok + `,"start":{"seq":43}}`, 400, "invalid_argument", []string{"past the end", "last sequence 41"}},
		{"start bad time", `{` + ok + `,"start":{"time":"yesterday"}}`, 400, "invalid_argument", []string{"start.time must be an RFC 3339 time", "yesterday"}},
		{"start unknown", `{` + ok + `,"start":{"offset":1}}`, 400, "invalid_argument", []string{`unknown field "offset"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			wantError(t, h.do("POST", "/v1/registrations", tt.body), tt.status, tt.code, tt.fragments...)
			if rows, _, _ := h.store.List(t.Context(), cursorListAll); len(rows) != 0 {
				t.Errorf("a refused create stored %d registrations", len(rows))
			}
		})
	}
}

func TestCreateDuplicateID(t *testing.T) {
	h := newHarness(t)
	body := `{"id":"dup","namespace":"outbox","subject":"journal.x","url":"https://a.example/"}`
	h.create(body)
	wantError(t, h.do("POST", "/v1/registrations", body), http.StatusConflict, "already_exists", `"dup" already exists`)
}

func TestCreateOversizedBody(t *testing.T) {
	h := newHarness(t)
	body := `{"namespace":"outbox","subject":"journal.x","url":"https://a.example/","id":"` + strings.Repeat("a", maxBodyBytes) + `"}`
	wantError(t, h.do("POST", "/v1/registrations", body), http.StatusRequestEntityTooLarge, "payload_too_large", "exceeds")
}

func TestCreateIdempotencyKey(t *testing.T) {
	h := newHarness(t)
	body := `{"namespace":"outbox","subject":"journal.x","url":"https://a.example/"}`
	first := h.do("POST", "/v1/registrations", body, "Idempotency-Key", "k-1")
	if first.status != http.StatusCreated {
		t.Fatalf("first create: %d %s", first.status, first.body)
	}
	h.clock.advance(time.Minute)
	h.journal.last += 5 // a replay must not re-resolve "new"

	// The same body, spelt differently, is the same request.
	respelt := "{ \"url\": \"https://a.example/\",\n \"subject\": \"journal.x\", \"namespace\": \"outbox\" }"
	for _, b := range []string{body, respelt} {
		again := h.do("POST", "/v1/registrations", b, "Idempotency-Key", "k-1")
		if again.status != first.status || !bytes.Equal(again.body, first.body) {
			t.Errorf("replay answered %d %s, want %d %s", again.status, again.body, first.status, first.body)
		}
	}
	other := `{"namespace":"outbox","subject":"journal.y","url":"https://a.example/"}`
	wantError(t, h.do("POST", "/v1/registrations", other, "Idempotency-Key", "k-1"),
		http.StatusUnprocessableEntity, "idempotency_conflict", "Idempotency-Key")

	if rows, _, _ := h.store.List(t.Context(), cursorListAll); len(rows) != 1 {
		t.Errorf("%d registrations stored, want 1", len(rows))
	}
	wantError(t, h.do("POST", "/v1/registrations", body, "Idempotency-Key", strings.Repeat("k", 256)),
		http.StatusBadRequest, "invalid_argument", "Idempotency-Key must be")
}

// Member names are exact, as the OpenAPI document names them: one in
// another case is refused and named, also inside an object, so a body
// holding "url" and "URL" cannot be read two ways.
func TestMemberNamesAreExact(t *testing.T) {
	h := newHarness(t)
	wantError(t, h.do("POST", "/v1/registrations", `{"namespace":"outbox","subject":"journal.>","url":"https://a.example/","URL":"https://b.example/"}`),
		400, "invalid_argument", `"URL"`, `did you mean "url"`)
	wantError(t, h.do("POST", "/v1/registrations", `{"namespace":"outbox","subject":"journal.>","url":"https://a.example/","rateLimit":{"PerSecond":5}}`),
		400, "invalid_argument", `"rateLimit.PerSecond"`)
	wantError(t, h.do("POST", "/v1/registrations", `{"namespace":"outbox","subject":"journal.>","url":"https://a.example/","start":{"Seq":1}}`),
		400, "invalid_argument", `"Seq"`)
	h.create(`{"namespace":"outbox","subject":"journal.>","url":"https://a.example/","rateLimit":{"perSecond":5}}`)
}

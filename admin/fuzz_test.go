package admin

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jetstream-bridge/bridge/cursor"
)

// FuzzCreateRegistration sends arbitrary bodies to POST /v1/registrations
// of the real handler over a real store. Whatever the body, the handler
// must not panic; every answer but a 201 is a 4xx JSON error with a code
// and a message, and leaves nothing stored; a 201 comes only for a body
// the contract calls valid, and never echoes its secret.
//
// The seed corpus is in testdata/fuzz/FuzzCreateRegistration; run it
// longer with: go test ./admin -run '^$' -fuzz FuzzCreateRegistration.
func FuzzCreateRegistration(f *testing.F) {
	for _, seed := range []string{
		`{"namespace":"outbox","subject":"journal.orders.>","url":"https://billing.example/hook"}`,
		`{"id":"push-1","namespace":"a2a","taskId":"task-42","url":"https://agent.example/push","token":"tkn","start":{"seq":3}}`,
		`{"namespace":"outbox","subject":"journal.*.eu","url":"http://127.0.0.1:9/","format":"structured","dataContentType":"application/json; charset=utf-8","secret":"` + goodSecret + `","authentication":{"scheme":"Bearer","credentials":"c"},"start":{"time":"2026-03-01T11:00:05Z"},"batch":{"maxEvents":10,"maxBytes":1024,"maxDelay":"50ms"}}`,
		`{"namespace":"a2a","taskId":"t","url":"http://agent.example/"}`,
		`{"namespace":"outbox","subject":"journal.>.x","url":"https://a.example/"}`,
		`{"namespace":"outbox","subject":"journal.>","url":"https://a.example/","start":{"seq":1,"time":"x"}}`,
		`[{"namespace":"outbox"}]`,
		`{"id":"..","namespace":"outbox","subject":"journal.>","url":"https://a.example/"}`,
		`{"namespace":"outbox","subject":"journal.orders.>","url":"https://a.example/","ordering":{"key":"tokens:3,1","maxInFlight":256}}`,
		`{"namespace":"outbox","subject":"journal.orders.>","url":"https://a.example/","ordering":{"key":"header:Nats-Msg-Id"}}`,
		`{"namespace":"outbox","subject":"journal.>","url":"https://a.example/","ordering":{"key":"tokens:01,2","maxInFlight":0}}`,
		`{"namespace":"outbox","subject":"journal.>","url":"https://a.example/","ordering":{"key":"none"},"batch":{}}`,
		`{"namespace":"a2a","taskId":"t","url":"https://agent.example/","ordering":{"key":"subject"}}`,
	} {
		f.Add([]byte(seed))
	}
	store, err := cursor.Open(filepath.Join(f.TempDir(), "bridge.db"))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = store.Close() })
	journal := &fakeJournal{first: 1, last: 41, base: time.Date(2026, 3, 1, 11, 0, 0, 0, time.UTC)}
	h := New(Options{Store: store, Journal: journal, Guard: fakeGuard{}, Token: testToken})

	f.Fuzz(func(t *testing.T, body []byte) {
		res := serveFuzz(t, h, "POST", "/v1/registrations", body)
		verdict := contractValid(body, journal.last)
		if res.Code != http.StatusCreated {
			checkErrorAnswer(t, res)
			if verdict == nil {
				t.Errorf("%d for a body the contract calls valid: %s\nbody: %q", res.Code, res.Body.Bytes(), body)
			}
			if rows, _, err := store.List(t.Context(), cursor.ListOptions{Limit: 10}); err != nil || len(rows) != 0 {
				t.Fatalf("a refused create left %d registrations stored (err %v)", len(rows), err)
			}
			return
		}
		if verdict != nil {
			t.Errorf("201 for a body the contract refuses (%v)\nbody: %q\nanswer: %s", verdict, body, res.Body.Bytes())
		}
		var view struct {
			ID, Namespace, Subject, URL, State string
		}
		if err := json.Unmarshal(res.Body.Bytes(), &view); err != nil {
			t.Fatalf("the 201 answer is not a registration: %v\n%s", err, res.Body.Bytes())
		}
		if !idPattern.MatchString(view.ID) || view.State != "active" {
			t.Errorf("created id %q state %q", view.ID, view.State)
		}
		if s := secretOf(body); len(s) > 0 && bytes.Contains(res.Body.Bytes(), []byte(s)) {
			t.Errorf("the answer echoes the secret: %s", res.Body.Bytes())
		}
		// Leave the store empty for the next input.
		if del := serveFuzz(t, h, "DELETE", "/v1/registrations/"+url.PathEscape(view.ID), nil); del.Code != http.StatusNoContent {
			t.Fatalf("deleting %q: %d %s", view.ID, del.Code, del.Body.Bytes())
		}
	})
}

// serveFuzz serves one request and checks the exchange against the
// OpenAPI document.
func serveFuzz(t *testing.T, h http.Handler, method, path string, body []byte) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, path, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+testToken)
	res := httptest.NewRecorder()
	h.ServeHTTP(res, req)
	checkExchange(t, req, body, res)
	return res
}

// checkErrorAnswer requires a 4xx JSON error with a code and a message.
func checkErrorAnswer(t *testing.T, res *httptest.ResponseRecorder) {
	t.Helper()
	if res.Code < 400 || res.Code > 499 {
		t.Fatalf("status %d, want 201 or a 4xx: %s", res.Code, res.Body.Bytes())
	}
	if ct := res.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("error answer with Content-Type %q", ct)
	}
	var e errorBody
	dec := json.NewDecoder(bytes.NewReader(res.Body.Bytes()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
		t.Fatalf("error answer %d is not {\"error\":{\"code\",\"message\"}}: %v\n%s", res.Code, err, res.Body.Bytes())
	}
}

var idPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,128}$`)

// errTrailingUnicodeSpace marks a body followed by whitespace JSON does not
// know (U+0085, U+00A0, U+2028…): trailing data to be refused.
var errTrailingUnicodeSpace = errors.New("non-JSON whitespace after the object")

// contractRequest is CONTRACT.md §2 read afresh, independently of the
// handler's own request type.
type contractRequest struct {
	ID              *string         `json:"id"`
	Namespace       string          `json:"namespace"`
	Subject         *string         `json:"subject"`
	TaskID          string          `json:"taskId"`
	URL             string          `json:"url"`
	Format          *string         `json:"format"`
	DataContentType *string         `json:"dataContentType"`
	Secret          string          `json:"secret"`
	Token           *string         `json:"token"`
	Authentication  *contractAuth   `json:"authentication"`
	Start           json.RawMessage `json:"start"`
	Batch           *contractBatch  `json:"batch"`

	// CONTRACT.md §9.
	Headers   map[string]string  `json:"headers"`
	TLS       *contractTLS       `json:"tls"`
	RateLimit *contractRateLimit `json:"rateLimit"`

	// CONTRACT.md §12.
	Ordering *contractOrdering `json:"ordering"`
}

type contractAuth struct {
	Scheme      string `json:"scheme"`
	Credentials string `json:"credentials"`
}

type contractBatch struct {
	MaxEvents *json.Number `json:"maxEvents"`
	MaxBytes  *json.Number `json:"maxBytes"`
	MaxDelay  *string      `json:"maxDelay"`
}

// contractValid says why body is not a valid create under the contract,
// with the test's fake guard and a journal ending at last; nil when it is.
func contractValid(body []byte, last uint64) error {
	var r contractRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(&r); err != nil {
		return err
	}
	if rest := body[dec.InputOffset():]; len(bytes.Trim(rest, jsonSpace)) > 0 {
		if len(bytes.TrimSpace(rest)) == 0 {
			return errTrailingUnicodeSpace
		}
		return errors.New("data after the object")
	}
	if t := bytes.TrimSpace(body); len(t) == 0 || t[0] != '{' {
		return errors.New("not an object")
	}
	// Member names are exact: "URL" is not "url" (CONTRACT §3, camelCase).
	if err := exactNames(body, reflect.TypeFor[contractRequest]()); err != nil {
		return err
	}
	if r.ID != nil && *r.ID != "" && (!idPattern.MatchString(*r.ID) || *r.ID == "." || *r.ID == "..") {
		return fmt.Errorf("id %q", *r.ID)
	}
	switch r.Namespace {
	case "outbox":
		if r.TaskID != "" || r.Token != nil && *r.Token != "" {
			return errors.New("taskId or token on outbox")
		}
		if r.Subject == nil || !validSubject(*r.Subject) {
			return errors.New("outbox subject")
		}
		if r.Format != nil && *r.Format != "" && *r.Format != "binary" && *r.Format != "structured" {
			return errors.New("format")
		}
		if r.DataContentType != nil && *r.DataContentType != "" {
			if _, _, err := mime.ParseMediaType(*r.DataContentType); err != nil {
				return err
			}
		}
		if err := batchValid(r.Batch); err != nil {
			return err
		}
		if err := orderingValid(r.Ordering, r.Batch != nil); err != nil {
			return err
		}
	case "a2a":
		if r.Format != nil && *r.Format != "" || r.DataContentType != nil && *r.DataContentType != "" || r.Batch != nil || r.Ordering != nil {
			return errors.New("outbox-only field on a2a")
		}
		if r.TaskID == "" || strings.ContainsAny(r.TaskID, ".*>") || strings.ContainsFunc(r.TaskID, spaceOrControl) {
			return errors.New("taskId")
		}
		if r.Subject != nil && *r.Subject != "" && !validSubject(*r.Subject) {
			return errors.New("a2a subject")
		}
		if r.Token != nil && strings.ContainsFunc(*r.Token, control) {
			return errors.New("token")
		}
	default:
		return errors.New("namespace")
	}
	u, err := url.Parse(r.URL)
	switch {
	case r.URL == "" || err != nil || u.Host == "":
		return errors.New("url")
	case u.User != nil:
		return errors.New("userinfo")
	case r.Namespace == "a2a" && u.Scheme != "https":
		return errors.New("a2a without https")
	case u.Hostname() == "refused.example":
		return errors.New("host not granted")
	}
	if r.Secret != "" {
		key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(r.Secret, "whsec_"))
		if !strings.HasPrefix(r.Secret, "whsec_") || err != nil || len(key) < 24 || len(key) > 64 {
			return errors.New("secret")
		}
	}
	if a := r.Authentication; a != nil {
		if a.Scheme == "" || strings.ContainsFunc(a.Scheme, func(c rune) bool {
			return c > '~' || spaceOrControl(c) || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, c)
		}) {
			return errors.New("authentication scheme")
		}
		if a.Credentials == "" || strings.ContainsFunc(a.Credentials, control) {
			return errors.New("authentication credentials")
		}
	}
	if err := receiverOptionsValid(&r); err != nil {
		return err
	}
	return startValid(r.Start, last)
}

func startValid(raw json.RawMessage, last uint64) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var word string
	if json.Unmarshal(raw, &word) == nil {
		if word == "new" || word == "first" {
			return nil
		}
		return errors.New("start word")
	}
	var pos struct {
		Seq  *json.Number `json:"seq"`
		Time *string      `json:"time"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if raw[0] != '{' || dec.Decode(&pos) != nil {
		return errors.New("start shape")
	}
	switch {
	case (pos.Seq == nil) == (pos.Time == nil):
		return errors.New("start: exactly one of seq and time")
	case pos.Seq != nil:
		n, err := uintOf(*pos.Seq)
		if err != nil || n < 1 || n > last+1 {
			return fmt.Errorf("start.seq %s", *pos.Seq)
		}
	default:
		if _, err := time.Parse(time.RFC3339, *pos.Time); err != nil {
			return err
		}
	}
	return nil
}

func batchValid(b *contractBatch) error {
	if b == nil {
		return nil
	}
	for _, n := range []*json.Number{b.MaxEvents, b.MaxBytes} {
		if n == nil {
			continue
		}
		v, err := n.Int64()
		if err != nil || v <= 0 || v > math.MaxInt {
			return fmt.Errorf("batch number %s", *n)
		}
	}
	if b.MaxDelay != nil {
		if d, err := time.ParseDuration(*b.MaxDelay); err != nil || d <= 0 {
			return errors.New("batch.maxDelay")
		}
	}
	return nil
}

func uintOf(n json.Number) (uint64, error) {
	var v uint64
	if err := json.Unmarshal([]byte(n), &v); err != nil {
		return 0, err
	}
	return v, nil
}

// validSubject is the NATS subject filter grammar: non-empty tokens, no
// whitespace or control characters, '*' a whole token, '>' the whole
// last token.
func validSubject(s string) bool {
	toks := strings.Split(s, ".")
	for i, tok := range toks {
		switch {
		case tok == "" || strings.ContainsFunc(tok, spaceOrControl):
			return false
		case tok == "*":
		case tok == ">":
			if i != len(toks)-1 {
				return false
			}
		case strings.ContainsAny(tok, "*>"):
			return false
		}
	}
	return true
}

func spaceOrControl(r rune) bool { return r <= ' ' || r == 0x7f }

func control(r rune) bool { return r < ' ' || r == 0x7f }

// secretOf is the body's secret, unless it is short enough, or repeated
// in a field the answer shows, that finding it there proves nothing.
func secretOf(body []byte) string {
	var r contractRequest
	if json.Unmarshal(body, &r) != nil || len(r.Secret) < 16 {
		return ""
	}
	for _, shown := range []*string{r.ID, r.Subject, &r.TaskID, &r.URL, r.DataContentType, r.Format, &r.Namespace} {
		if shown != nil && strings.Contains(*shown, r.Secret) {
			return ""
		}
	}
	return r.Secret
}

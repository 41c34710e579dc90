package admin

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/jetstream-bridge/bridge/internal/openapitest"
)

// openAPIValidator is the validator of the embedded document, loaded
// once for the package's tests.
var openAPIValidator = sync.OnceValues(func() (*openapitest.Validator, error) {
	return openapitest.New(openAPIDocument)
})

func validator(t testing.TB) *openapitest.Validator {
	t.Helper()
	v, err := openAPIValidator()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// validated wraps the API so that every exchange of t's test with it is
// checked against the OpenAPI document, failing the test on a mismatch.
func validated(t testing.TB, h http.Handler) http.Handler {
	return validator(t).Handler(h, func(_ *http.Request, err error) { t.Error(err) })
}

// checkExchange checks one exchange served to a recorder.
func checkExchange(t testing.TB, req *http.Request, body []byte, res *httptest.ResponseRecorder) {
	t.Helper()
	if err := validator(t).Check(req, body, res.Code, res.Header(), res.Body.Bytes()); err != nil {
		t.Error(err)
	}
}

// Every /v1 route of the table is described by the document, and the
// document describes no route the API does not serve: a route added
// without its description fails here, by name.
func TestOpenAPIDescribesEveryRoute(t *testing.T) {
	v := validator(t)
	served := map[string]bool{}
	for _, rt := range (&server{}).table() {
		if !strings.HasPrefix(rt.path, openapitest.Prefix) {
			continue
		}
		served[rt.method+" "+rt.path] = true
		if !v.HasOperation(rt.method, rt.path) {
			t.Errorf("%s %s is served but not in openapi.json", rt.method, rt.path)
		}
	}
	for path, item := range v.Doc().Paths.Map() {
		for method := range item.Operations() {
			if !served[method+" "+path] {
				t.Errorf("openapi.json describes %s %s, which the API does not serve", method, path)
			}
		}
	}
}

// GET /v1/openapi.json needs no token and answers the embedded document,
// which the document itself describes.
func TestOpenAPIDocumentIsServedWithoutToken(t *testing.T) {
	h := newHarness(t)
	res := h.do("GET", "/v1/openapi.json", "", "Authorization", "")
	if res.status != http.StatusOK || res.header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /v1/openapi.json: %d %s", res.status, res.header.Get("Content-Type"))
	}
	if !bytes.Equal(res.body, OpenAPI()) {
		t.Error("the answer is not the embedded document")
	}
	var doc struct {
		OpenAPI string `json:"openapi"`
		Paths   map[string]any
	}
	if err := json.Unmarshal(res.body, &doc); err != nil || !strings.HasPrefix(doc.OpenAPI, "3.0.") || doc.Paths["/v1/registrations"] == nil {
		t.Errorf("not an OpenAPI 3.0 document of /v1: %v %q", err, doc.OpenAPI)
	}
}

// The validator finds what it is for: an answer with a field the document
// does not have, an undocumented status, a request the document refuses
// that the API accepted; and it lets a refused bad request pass.
func TestOpenAPIValidatorCatchesMismatches(t *testing.T) {
	v := validator(t)
	req := httptest.NewRequest("GET", "/v1/registrations/a", nil)
	h := newHarness(t)
	good := h.create(`{"id":"a","namespace":"outbox","subject":"journal.>","url":"https://a.example/"}`)
	body, _ := json.Marshal(good)
	if err := v.Check(req, nil, 200, jsonHeader(), body); err != nil {
		t.Fatalf("a registration as answered: %v", err)
	}
	extra := bytes.Replace(body, []byte(`{"id"`), []byte(`{"secretField":"x","id"`), 1)
	if err := v.Check(req, nil, 200, jsonHeader(), extra); err == nil || !strings.Contains(err.Error(), "secretField") {
		t.Errorf("an undescribed field passed: %v", err)
	}
	if err := v.Check(req, nil, 418, jsonHeader(), []byte(`{"error":{"code":"internal","message":"x"}}`)); err == nil {
		t.Error("an undescribed status passed")
	}
	post := httptest.NewRequest("POST", "/v1/registrations", nil)
	bad := []byte(`{"namespace":"outbox","url":"https://a.example/","colour":"red"}`)
	if err := v.Check(post, bad, 201, jsonHeader(), body); err == nil || !strings.Contains(err.Error(), "accepted a request") {
		t.Errorf("an accepted request with an undescribed field passed: %v", err)
	}
	refused := []byte(`{"error":{"code":"invalid_argument","message":"unknown field \"colour\""}}`)
	if err := v.Check(post, bad, 400, jsonHeader(), refused); err != nil {
		t.Errorf("a refused bad request: %v", err)
	}
}

func jsonHeader() http.Header { return http.Header{"Content-Type": {"application/json"}} }

// Empty query parameters are taken as absent, as the document says.
func TestOpenAPIEmptyQueryParameters(t *testing.T) {
	h := newHarness(t)
	h.create(`{"id":"a","namespace":"outbox","subject":"journal.>","url":"https://a.example/"}`)
	for _, path := range []string{
		"/v1/registrations?namespace=&state=&prefix=&after=&limit=",
		"/v1/registrations/a/attempts?limit=&before=",
	} {
		if res := h.do("GET", path, ""); res.status != http.StatusOK {
			t.Errorf("GET %s: %d %s", path, res.status, res.body)
		}
	}
}

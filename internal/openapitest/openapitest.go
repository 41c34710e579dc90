// Package openapitest holds an HTTP API to its OpenAPI document in tests:
// a Validator checks each exchange of a test with the API (the request
// and the answer) against the document with kin-openapi, and wraps a
// server's handler or a client's transport so that every exchange of a
// test is checked. It is for tests only: nothing the bridge's binary
// links imports it, so the validation costs the bridge nothing.
//
// The rules, for the routes under /v1/:
//   - every answer is one the document describes for its route: its
//     status, its headers, and a body valid against its schema;
//   - a request the API accepted (2xx) is one the document allows, so a
//     document stricter than the API is caught; a refused request may be
//     anything, since refusing bad input is what the tests show;
//   - a path or method the document does not have is answered 401, 404 or
//     405 with the error shape, as the API answers what it does not serve.
package openapitest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
)

// Prefix is the part of the URL space the document describes.
const Prefix = "/v1/"

// Validator checks exchanges against one document. It is safe for
// concurrent use.
type Validator struct {
	doc    *openapi3.T
	router routers.Router
	errRef *openapi3.SchemaRef
}

// New loads doc (JSON or YAML), checks that it is a valid OpenAPI 3
// document and returns its Validator.
func New(doc []byte) (*Validator, error) {
	loader := openapi3.NewLoader()
	t, err := loader.LoadFromData(doc)
	if err != nil {
		return nil, fmt.Errorf("loading the OpenAPI document: %w", err)
	}
	if err := t.Validate(loader.Context); err != nil {
		return nil, fmt.Errorf("the OpenAPI document is not valid: %w", err)
	}
	router, err := legacy.NewRouter(t)
	if err != nil {
		return nil, err
	}
	errRef := t.Components.Schemas["Error"]
	if errRef == nil {
		return nil, errors.New("the OpenAPI document has no Error schema")
	}
	return &Validator{doc: t, router: router, errRef: errRef}, nil
}

// Doc is the loaded document.
func (v *Validator) Doc() *openapi3.T { return v.doc }

// HasOperation reports whether the document describes method on path,
// a path as the route table writes it (/v1/registrations/{id}).
func (v *Validator) HasOperation(method, path string) bool {
	item := v.doc.Paths.Value(path)
	return item != nil && item.GetOperation(method) != nil
}

// Check validates one exchange: req as sent with its body reqBody, and
// the answer's status, header and body. It returns nil when it is as the
// document says (see the package rules), else an error naming the call
// and every mismatch.
func (v *Validator) Check(req *http.Request, reqBody []byte, status int, header http.Header, body []byte) error {
	if !strings.HasPrefix(req.URL.Path, Prefix) || req.Method == http.MethodHead {
		return nil
	}
	err := v.check(req, reqBody, status, header, body)
	if err != nil {
		return fmt.Errorf("%s %s answered %d, not as the OpenAPI document says: %w\nanswer: %s",
			req.Method, req.URL.RequestURI(), status, err, truncate(body, 2048))
	}
	return nil
}

func (v *Validator) check(req *http.Request, reqBody []byte, status int, header http.Header, body []byte) error {
	// The bridge reads every body as JSON whatever its Content-Type; the
	// document can only say application/json.
	req = req.Clone(context.Background())
	req.Body = io.NopCloser(bytes.NewReader(reqBody))
	if len(reqBody) > 0 && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	route, params, err := v.router.FindRoute(req)
	if err != nil {
		return v.undescribed(err, status, body)
	}
	opts := &openapi3filter.Options{
		AuthenticationFunc:                openapi3filter.NoopAuthenticationFunc,
		SkipSettingDefaults:               true,
		RejectWhenRequestBodyNotSpecified: true,
		IncludeResponseStatus:             true,
		MultiError:                        true,
	}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: opts}
	reqErr := openapi3filter.ValidateRequest(context.Background(), in)
	// ValidateRequest read the body; the answer's check reads nothing of it.
	req.Body = io.NopCloser(bytes.NewReader(reqBody))
	if reqErr != nil && status >= 200 && status < 300 {
		return fmt.Errorf("the API accepted a request the document refuses: %w", reqErr)
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 status,
		Header:                 header,
		Body:                   io.NopCloser(bytes.NewReader(body)),
		Options:                opts,
	}
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		return fmt.Errorf("the answer is not one the document describes: %w", err)
	}
	return nil
}

// undescribed checks the answer to a path or method the document does
// not have: refused, with the error shape.
func (v *Validator) undescribed(routeErr error, status int, body []byte) error {
	var re *routers.RouteError
	if !errors.As(routeErr, &re) {
		return routeErr
	}
	switch status {
	case http.StatusUnauthorized, http.StatusNotFound, http.StatusMethodNotAllowed:
	default:
		return fmt.Errorf("%v, yet the API answered it", routeErr)
	}
	var value any
	if err := decodeJSON(body, &value); err != nil {
		return fmt.Errorf("refusing an undescribed call: %w", err)
	}
	if err := v.errRef.Value.VisitJSON(value); err != nil {
		return fmt.Errorf("refusing an undescribed call, the answer is not an Error: %w", err)
	}
	return nil
}

// Handler wraps h so that every exchange under Prefix is checked once h
// has answered; report receives each mismatch (t.Error, say) with the
// request. Answers are buffered and then written as h wrote them.
func (v *Validator) Handler(h http.Handler, report func(*http.Request, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, Prefix) {
			h.ServeHTTP(w, r)
			return
		}
		reqBody, err := readAll(&r.Body)
		if err != nil {
			report(r, err)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		res := rec.Result()
		if err := v.Check(r, reqBody, res.StatusCode, res.Header, rec.Body.Bytes()); err != nil {
			report(r, err)
		}
		for k, vs := range res.Header {
			w.Header()[k] = vs
		}
		w.WriteHeader(res.StatusCode)
		_, _ = w.Write(rec.Body.Bytes())
	})
}

// Transport wraps rt (http.DefaultTransport when nil) so that every
// exchange under Prefix is checked; report receives each mismatch with
// the request. The answer's body is read whole and handed on unchanged.
func (v *Validator) Transport(rt http.RoundTripper, report func(*http.Request, error)) http.RoundTripper {
	if rt == nil {
		rt = http.DefaultTransport
	}
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		if !strings.HasPrefix(req.URL.Path, Prefix) {
			return rt.RoundTrip(req)
		}
		var reqBody []byte
		if req.Body != nil {
			var err error
			if reqBody, err = readAll(&req.Body); err != nil {
				return nil, err
			}
		}
		res, err := rt.RoundTrip(req)
		if err != nil {
			return res, err
		}
		body, err := readAll(&res.Body)
		if err != nil {
			// A cut connection is the test's to see, not a mismatch.
			return res, nil
		}
		if err := v.Check(req, reqBody, res.StatusCode, res.Header, body); err != nil {
			report(req, err)
		}
		return res, nil
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// readAll reads *rc whole and puts an unread copy in its place.
func readAll(rc *io.ReadCloser) ([]byte, error) {
	if *rc == nil || *rc == http.NoBody {
		return nil, nil
	}
	data, err := io.ReadAll(*rc)
	_ = (*rc).Close()
	*rc = io.NopCloser(bytes.NewReader(data))
	return data, err
}

func decodeJSON(body []byte, v any) error {
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("the answer is not JSON: %w", err)
	}
	return nil
}

func truncate(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + "…"
}

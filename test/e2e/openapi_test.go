package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"testing"

	"github.com/jetstream-bridge/bridge/admin"
	"github.com/jetstream-bridge/bridge/internal/openapitest"
)

// The admin calls of these tests go through http.DefaultClient, whose
// transport TestMain sets to checkOpenAPI: every request to a bridge's
// /v1 routes and every answer is checked against the OpenAPI document.
// A mismatch fails the test whose context the request carries (see
// withTest), and the whole run in TestMain in any case.

// testKey carries the test a request belongs to in its context.
type testKey struct{}

// withTest ties req to t, so a mismatch of its exchange fails t.
func withTest(t testing.TB, req *http.Request) *http.Request {
	return req.WithContext(context.WithValue(req.Context(), testKey{}, t))
}

// mismatches are the exchanges that were not as the document says.
var mismatches struct {
	sync.Mutex
	list []string
}

// checkOpenAPI wraps rt with the validator of the document the bridge
// binary embeds.
func checkOpenAPI(rt http.RoundTripper) (http.RoundTripper, error) {
	v, err := openapitest.New(admin.OpenAPI())
	if err != nil {
		return nil, err
	}
	return v.Transport(rt, func(req *http.Request, err error) {
		if t, ok := req.Context().Value(testKey{}).(testing.TB); ok {
			t.Error(err)
		}
		mismatches.Lock()
		mismatches.list = append(mismatches.list, err.Error())
		mismatches.Unlock()
	}), nil
}

// reportMismatches prints every mismatch of the run and says whether
// there was one.
func reportMismatches() bool {
	mismatches.Lock()
	defer mismatches.Unlock()
	for _, m := range mismatches.list {
		fmt.Fprintln(os.Stderr, "OpenAPI mismatch:", m)
	}
	return len(mismatches.list) > 0
}

// The bridge serves its OpenAPI document without a token: the document
// the binary embeds, itself valid (the validator loads and checks it).
func TestOpenAPIDocumentServed(t *testing.T) {
	d := newDaemon(t)
	d.start()
	req, _ := http.NewRequest("GET", "http://"+d.admin+"/v1/openapi.json", nil)
	resp, err := http.DefaultClient.Do(withTest(t, req))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !bytes.Equal(body, admin.OpenAPI()) {
		t.Fatalf("GET /v1/openapi.json without a token: %d, %d bytes; want 200 and the embedded document", resp.StatusCode, len(body))
	}
	if _, err := openapitest.New(body); err != nil {
		t.Fatal(err)
	}
}

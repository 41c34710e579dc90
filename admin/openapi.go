package admin

import (
	_ "embed"
	"net/http"
)

// openAPIDocument is the OpenAPI 3.0 description of every /v1 route,
// kept by hand beside the handlers it describes. The package's tests
// send every request of theirs through a validator of it, and list the
// route table against its paths, so an answer, a field or a route that
// drifts from it fails them.
//
//go:embed openapi.json
var openAPIDocument []byte

// OpenAPI returns the OpenAPI document GET /v1/openapi.json serves.
func OpenAPI() []byte { return append([]byte(nil), openAPIDocument...) }

// openAPI answers GET /v1/openapi.json without a token: a description of
// the API holds nothing a caller could not learn by calling it.
func (s *server) openAPI(w http.ResponseWriter, _ *http.Request) error {
	writeRaw(w, http.StatusOK, openAPIDocument)
	return nil
}

package admin

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/jetstream-bridge/bridge/console"
)

// handlerFunc is a handler that reports failure as an error; serve turns
// the error into the JSON error answer, so no handler writes one itself.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// route is one entry of the table. access says who may call it; gate
// enforces it for every route but the public ones.
type route struct {
	method, path string
	access       access
	h            http.Handler
}

// table is every route the API serves. The document of
// GET /v1/openapi.json describes each /v1 route of it (a test holds
// them together).
func (s *server) table() []route {
	return []route{
		{"POST", "/v1/registrations", write, s.serve(s.create)},
		{"GET", "/v1/registrations", read, s.serve(s.list)},
		{"GET", "/v1/registrations/{id}", read, s.serve(s.get)},
		{"PUT", "/v1/registrations/{id}", write, s.serve(s.replace)},
		{"DELETE", "/v1/registrations/{id}", write, s.serve(s.delete)},
		{"POST", "/v1/registrations/{id}/unpark", write, s.serve(s.unpark)},
		{"POST", "/v1/registrations/{id}/rewind", write, s.serve(s.rewind)},
		{"GET", "/v1/registrations/{id}/attempts", read, s.serve(s.registrationAttempts)},
		{"POST", "/v1/registrations/{id}/resend", write, s.serve(s.resend)},
		{"GET", "/v1/attempts", read, s.serve(s.sequenceAttempts)},
		{"POST", "/v1/plan", write, s.serve(s.plan)},
		{"POST", "/v1/purge", rootOnly, s.serve(s.purge)},
		{"GET", "/v1/cluster", rootOnly, s.serve(s.cluster)},
		{"POST", "/v1/tokens", rootOnly, s.serve(s.createToken)},
		{"GET", "/v1/tokens", rootOnly, s.serve(s.listTokens)},
		{"DELETE", "/v1/tokens/{name}", rootOnly, s.serve(s.revokeToken)},
		{"GET", "/v1/whoami", read, s.serve(s.whoami)},
		// The description of the API needs no token, so tools can fetch
		// it before they hold one.
		{"GET", "/v1/openapi.json", public, s.serve(s.openAPI)},
		{"GET", "/healthz", public, s.serve(s.healthz)},
		{"GET", "/readyz", public, s.serve(s.readyz)},
		{"GET", "/metrics", public, s.serve(s.serveMetrics)},
		// The console is static and loads without a token; everything it
		// shows it asks of /v1 with the token the operator types.
		{"GET", "/console/", public, http.StripPrefix("/console", console.Handler())},
		{"GET", "/console", public, http.RedirectHandler("/console/", http.StatusMovedPermanently)},
	}
}

// routes builds the mux. Every path also gets a method-less fallback, so
// a wrong method is a JSON 405 with an Allow header, and unknown paths are
// a JSON 404 — a client never has to parse a plain-text error. It panics
// on a /v1 route that declares no access: a wiring mistake, found at
// startup and by every test.
func (s *server) routes() http.Handler { return s.serveTable(s.table()) }

func (s *server) serveTable(table []route) http.Handler {
	mux := http.NewServeMux()
	allowed := map[string][]string{}
	for _, rt := range table {
		h := rt.h
		switch {
		case rt.access == undeclared:
			panic(fmt.Sprintf("admin: route %s %s declares no access", rt.method, rt.path))
		case rt.access != public:
			h = s.gate(rt.access, rt.path, h)
		}
		mux.Handle(rt.method+" "+rt.path, h)
		allowed[rt.path] = append(allowed[rt.path], rt.method)
	}
	for path, methods := range allowed {
		if slices.Contains(methods, "GET") {
			methods = append(methods, "HEAD")
		}
		allow := strings.Join(methods, ", ")
		wrong := s.serve(func(w http.ResponseWriter, _ *http.Request) error {
			w.Header().Set("Allow", allow)
			return errorf(http.StatusMethodNotAllowed, codeMethodNotAllowed, "method not allowed; use %s", allow)
		})
		if strings.HasPrefix(path, "/v1/") {
			wrong = s.gate(read, "", wrong)
		}
		mux.Handle(path, wrong)
	}
	notFound := s.serve(func(_ http.ResponseWriter, r *http.Request) error {
		return errorf(http.StatusNotFound, codeNotFound, "no such endpoint: %s", r.URL.Path)
	})
	mux.Handle("/v1/", s.gate(read, "", notFound))
	mux.Handle("/", notFound)
	return mux
}

// serve runs h and writes its error, if any, as the JSON error answer.
func (s *server) serve(h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			s.writeError(w, r, err)
		}
	})
}

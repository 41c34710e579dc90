package admin

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"slices"
	"strings"

	"github.com/jetstream-bridge/bridge/console"
)

// handlerFunc is a handler that reports failure as an error; serve turns
// the error into the JSON error answer, so no handler writes one itself.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

type route struct {
	method, path string
	h            http.Handler
}

// routes builds the mux. Every path also gets a method-less fallback, so
// a wrong method is a JSON 405 with an Allow header, and unknown paths are
// a JSON 404 — a client never has to parse a plain-text error.
func (s *server) routes() http.Handler {
	v1 := func(h handlerFunc) http.Handler { return s.serve(s.authenticated(h)) }
	table := []route{
		{"POST", "/v1/registrations", v1(s.create)},
		{"GET", "/v1/registrations", v1(s.list)},
		{"GET", "/v1/registrations/{id}", v1(s.get)},
		{"PUT", "/v1/registrations/{id}", v1(s.replace)},
		{"DELETE", "/v1/registrations/{id}", v1(s.delete)},
		{"POST", "/v1/registrations/{id}/unpark", v1(s.unpark)},
		{"POST", "/v1/registrations/{id}/rewind", v1(s.rewind)},
		{"GET", "/v1/registrations/{id}/attempts", v1(s.registrationAttempts)},
		{"POST", "/v1/registrations/{id}/resend", v1(s.resend)},
		{"GET", "/v1/attempts", v1(s.sequenceAttempts)},
		{"POST", "/v1/purge", v1(s.purge)},
		{"GET", "/v1/cluster", v1(s.cluster)},
		{"GET", "/healthz", s.serve(s.healthz)},
		{"GET", "/readyz", s.serve(s.readyz)},
		{"GET", "/metrics", s.serve(s.serveMetrics)},
		// The console is static and loads without a token; everything it
		// shows it asks of /v1 with the token the operator types.
		{"GET", "/console/", http.StripPrefix("/console", console.Handler())},
		{"GET", "/console", http.RedirectHandler("/console/", http.StatusMovedPermanently)},
	}
	mux := http.NewServeMux()
	allowed := map[string][]string{}
	for _, rt := range table {
		mux.Handle(rt.method+" "+rt.path, rt.h)
		allowed[rt.path] = append(allowed[rt.path], rt.method)
	}
	for path, methods := range allowed {
		if slices.Contains(methods, "GET") {
			methods = append(methods, "HEAD")
		}
		allow := strings.Join(methods, ", ")
		wrong := func(w http.ResponseWriter, _ *http.Request) error {
			w.Header().Set("Allow", allow)
			return errorf(http.StatusMethodNotAllowed, codeMethodNotAllowed, "method not allowed; use %s", allow)
		}
		h := s.serve(wrong)
		if strings.HasPrefix(path, "/v1/") {
			h = v1(wrong)
		}
		mux.Handle(path, h)
	}
	notFound := func(_ http.ResponseWriter, r *http.Request) error {
		return errorf(http.StatusNotFound, codeNotFound, "no such endpoint: %s", r.URL.Path)
	}
	mux.Handle("/v1/", v1(notFound))
	mux.Handle("/", s.serve(notFound))
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

// authenticated admits requests that carry the bearer token. It runs
// before the body is read, so an unauthenticated caller learns nothing
// about validation.
func (s *server) authenticated(h handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if err := s.authenticate(r); err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="bridge"`)
			return err
		}
		return h(w, r)
	}
}

func (s *server) authenticate(r *http.Request) error {
	h := r.Header.Get("Authorization")
	if h == "" {
		return errorf(http.StatusUnauthorized, codeUnauthenticated, "missing Authorization header; send Authorization: Bearer <admin token>")
	}
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return errorf(http.StatusUnauthorized, codeUnauthenticated, "Authorization header must use the Bearer scheme")
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(token)))
	if subtle.ConstantTimeCompare(sum[:], s.tokenSum[:]) != 1 || !s.hasToken {
		return errorf(http.StatusUnauthorized, codeUnauthenticated, "bearer token is not valid")
	}
	return nil
}

package admin

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
	"time"

	"github.com/jetstream-bridge/bridge/cursor"
)

// access is what a route asks of its caller. Every route of the table
// declares one; routes refuses a /v1 route that does not, so a route
// added later cannot skip the scope check by omission.
type access int

const (
	undeclared access = iota
	// public routes take no token (health, metrics, the console's files).
	public
	// read routes take any valid token; a scoped one sees only its
	// registrations.
	read
	// write routes take the root token or an operator's; a viewer is 403.
	write
	// rootOnly routes take the root token alone; a scoped one is 403.
	rootOnly
)

// rootName is the actor the root token's calls are audited as. No scoped
// token may take it (see validTokenRequest).
const rootName = "root"

// caller is who made a request: the root token, or a scoped token with
// its role and the prefix of the registration ids it reaches.
type caller struct {
	name      string
	role      cursor.Role // empty for root
	prefix    string
	expiresAt time.Time
}

func (c *caller) root() bool { return c.role == "" }

// sees reports whether the caller reaches the registration id.
func (c *caller) sees(id string) bool { return strings.HasPrefix(id, c.prefix) }

// narrow is the id prefix a listing asked with want may show the caller:
// the longer of the two when one begins the other; ok is false when they
// share no id, and the listing is empty.
func (c *caller) narrow(want string) (string, bool) {
	switch {
	case strings.HasPrefix(want, c.prefix):
		return want, true
	case strings.HasPrefix(c.prefix, want):
		return c.prefix, true
	}
	return "", false
}

type callerKey struct{}

// callerOf is the caller gate admitted; a request that passed no gate
// (a handler called directly) is root's.
func callerOf(ctx context.Context) *caller {
	if c, ok := ctx.Value(callerKey{}).(*caller); ok {
		return c
	}
	return &caller{name: rootName}
}

// gate is the one place every /v1 route's access is decided: it
// authenticates the bearer token, refuses what the caller's role may not
// do (403), and answers a call on a registration outside a scoped
// token's prefix exactly as the same call on one that does not exist —
// 404, or 204 for a DELETE — without running the handler, so nothing
// outside the scope is read, changed or probed. What a handler still
// filters (a listing, the attempts of a sequence, the id of a create)
// it reads from callerOf, which gate set.
func (s *server) gate(a access, pattern string, h http.Handler) http.Handler {
	byID := strings.Contains(pattern, "{id}")
	return s.serve(func(w http.ResponseWriter, r *http.Request) error {
		c, err := s.authenticate(r)
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="bridge"`)
			return err
		}
		if !c.root() {
			switch {
			case a == rootOnly:
				return errorf(http.StatusForbidden, codePermissionDenied, "token %q may not call %s %s: it needs the root token", c.name, r.Method, r.URL.Path)
			case a == write && c.role != cursor.Operator:
				return errorf(http.StatusForbidden, codePermissionDenied, "token %q is a %s: it may only read", c.name, c.role)
			case byID && !c.sees(r.PathValue("id")):
				if r.Method == http.MethodDelete {
					w.WriteHeader(http.StatusNoContent)
					return nil
				}
				return errorf(http.StatusNotFound, codeNotFound, "registration %q not found", truncate(r.PathValue("id"), maxIDLen))
			}
		}
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, c)))
		return nil
	})
}

// authenticate finds the caller of the bearer token. Only digests are
// compared, in constant time: the root token's, and the stored hash of
// the scoped token the digest's index entry names.
func (s *server) authenticate(r *http.Request) (*caller, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return nil, errorf(http.StatusUnauthorized, codeUnauthenticated, "missing Authorization header; send Authorization: Bearer <admin token>")
	}
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return nil, errorf(http.StatusUnauthorized, codeUnauthenticated, "Authorization header must use the Bearer scheme")
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(token)))
	if subtle.ConstantTimeCompare(sum[:], s.tokenSum[:]) == 1 && s.hasToken {
		return &caller{name: rootName}, nil
	}
	if s.tokens != nil {
		if t, ok := s.tokens.LookupToken(sum); ok && subtle.ConstantTimeCompare(t.Hash, sum[:]) == 1 {
			if t.Expired(s.now()) {
				return nil, errorf(http.StatusUnauthorized, codeUnauthenticated, "bearer token %q has expired", t.Name)
			}
			return &caller{name: t.Name, role: t.Role, prefix: t.IDPrefix, expiresAt: t.ExpiresAt}, nil
		}
	}
	return nil, errorf(http.StatusUnauthorized, codeUnauthenticated, "bearer token is not valid")
}

package admin

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/jetstream-bridge/bridge/cursor"
	"github.com/jetstream-bridge/bridge/events"
)

const (
	// tokenPrefix begins every scoped token, so a leaked one is easy to
	// recognise (secret scanners, logs) as a bridge token.
	tokenPrefix = "bst_"
	// tokenBytes of crypto/rand make a token: 256 bits, beyond guessing.
	tokenBytes = 32
)

// Token is a scoped access token as the API answers it. Secret is set in
// the answer to its create only; the store never had it.
type Token struct {
	Name      string     `json:"name"`
	IDPrefix  string     `json:"idPrefix"`
	Role      string     `json:"role"`
	CreatedAt time.Time  `json:"createdAt"`
	ExpiresAt *time.Time `json:"expiresAt"`
	Secret    string     `json:"token,omitempty"`
}

// TokenList is the answer of GET /v1/tokens.
type TokenList struct {
	Tokens []Token `json:"tokens"`
}

// WhoAmI is the answer of GET /v1/whoami: who the presented token is,
// never the token.
type WhoAmI struct {
	Name      string     `json:"name"`
	Role      string     `json:"role"`
	IDPrefix  string     `json:"idPrefix"`
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
}

type tokenRequest struct {
	Name      string  `json:"name"`
	IDPrefix  string  `json:"idPrefix"`
	Role      string  `json:"role"`
	ExpiresAt *string `json:"expiresAt"`
}

func tokenView(t cursor.Token) Token {
	return Token{Name: t.Name, IDPrefix: t.IDPrefix, Role: string(t.Role), CreatedAt: t.CreatedAt.UTC(), ExpiresAt: utcOrNil(t.ExpiresAt)}
}

// keepsTokens refuses the token routes of a bridge whose store has no
// place for tokens.
func (s *server) keepsTokens() error {
	if s.tokens == nil {
		return errorf(http.StatusNotImplemented, codeInternal, "this bridge's store keeps no access tokens")
	}
	return nil
}

// createToken answers POST /v1/tokens. The token is made here, shown in
// this answer alone, and only its SHA-256 is stored.
func (s *server) createToken(w http.ResponseWriter, r *http.Request) error {
	if err := s.keepsTokens(); err != nil {
		return err
	}
	var req tokenRequest
	if _, err := decodeBody(w, r, &req); err != nil {
		return err
	}
	now := s.now().UTC()
	t, err := validTokenRequest(req, now)
	if err != nil {
		return err
	}
	secret := newTokenSecret()
	sum := sha256.Sum256([]byte(secret))
	t.Hash = sum[:]
	switch err := s.tokens.CreateToken(r.Context(), t); {
	case errors.Is(err, cursor.ErrTokenExists):
		return errorf(http.StatusConflict, codeAlreadyExists, "token %q already exists; revoke it first to make a new one", t.Name)
	case errors.Is(err, cursor.ErrUnavailable):
		return errorf(http.StatusServiceUnavailable, codeUnavailable, "storing the token: %v; try again", err)
	case err != nil:
		return fmt.Errorf("storing the token: %w", err)
	}
	s.announceToken(r, events.TokenCreated, t)
	s.audit(r, "token created", slog.String("token", t.Name), slog.String("idPrefix", t.IDPrefix), slog.String("role", string(t.Role)))
	v := tokenView(t)
	v.Secret = secret
	writeJSON(w, http.StatusCreated, v)
	return nil
}

// validTokenRequest checks a create and names the field at fault.
func validTokenRequest(req tokenRequest, now time.Time) (cursor.Token, error) {
	t := cursor.Token{Name: req.Name, IDPrefix: req.IDPrefix, Role: cursor.Role(req.Role), CreatedAt: now}
	switch {
	case !cursor.ValidTokenName(req.Name):
		return t, invalid("name must be 1 to 128 letters, digits, '.', '_' and '-', not %q", truncate(req.Name, 128))
	case req.Name == rootName:
		return t, invalid("name %q is the admin token's in the audit trail; choose another", rootName)
	case !validPrefix(req.IDPrefix):
		return t, invalid("idPrefix must be the start of an id: at most %d letters, digits, '.', '_' and '-' (empty: every registration)", maxIDLen)
	case t.Role != cursor.Viewer && t.Role != cursor.Operator:
		return t, invalid("role must be viewer or operator, not %q", truncate(req.Role, 32))
	}
	if req.ExpiresAt != nil {
		at, err := time.Parse(time.RFC3339, *req.ExpiresAt)
		switch {
		case err != nil:
			return t, invalid("expiresAt must be an RFC 3339 time such as 2027-01-01T00:00:00Z, not %q", truncate(*req.ExpiresAt, 64))
		case !at.After(now):
			return t, invalid("expiresAt %s is not in the future", at.UTC().Format(time.RFC3339))
		}
		t.ExpiresAt = at.UTC()
	}
	return t, nil
}

// newTokenSecret is tokenPrefix and tokenBytes of crypto/rand, base64url.
func newTokenSecret() string {
	b := make([]byte, tokenBytes)
	_, _ = rand.Read(b) // crypto/rand.Read never fails; it crashes the process instead.
	return tokenPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// listTokens answers GET /v1/tokens, without the tokens themselves,
// which the bridge does not have.
func (s *server) listTokens(w http.ResponseWriter, r *http.Request) error {
	if err := s.keepsTokens(); err != nil {
		return err
	}
	all, err := s.tokens.ListTokens(r.Context())
	if err != nil {
		return fmt.Errorf("listing tokens: %w", err)
	}
	out := TokenList{Tokens: make([]Token, 0, len(all))}
	for _, t := range all {
		out.Tokens = append(out.Tokens, tokenView(t))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// revokeToken answers DELETE /v1/tokens/{name}: 204 whether or not the
// token existed, so a retried revoke cannot fail.
func (s *server) revokeToken(w http.ResponseWriter, r *http.Request) error {
	if err := s.keepsTokens(); err != nil {
		return err
	}
	name := r.PathValue("name")
	if cursor.ValidTokenName(name) {
		was, _ := s.lookupByName(r, name)
		found, err := s.tokens.DeleteToken(r.Context(), name)
		if err != nil {
			return storeError(err, name, "revoking the token")
		}
		if found {
			s.announceToken(r, events.TokenRevoked, was)
			s.audit(r, "token revoked", slog.String("token", name))
		}
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// lookupByName is the stored token named name, for the revoked event.
func (s *server) lookupByName(r *http.Request, name string) (cursor.Token, bool) {
	all, err := s.tokens.ListTokens(r.Context())
	if err != nil {
		return cursor.Token{Name: name}, false
	}
	for _, t := range all {
		if t.Name == name {
			return t, true
		}
	}
	return cursor.Token{Name: name}, false
}

// whoami answers GET /v1/whoami: the name, role and scope of the token
// presented, for the console to say who is signed in.
func (s *server) whoami(w http.ResponseWriter, r *http.Request) error {
	c := callerOf(r.Context())
	out := WhoAmI{Name: c.name, Role: string(c.role), IDPrefix: c.prefix, ExpiresAt: utcOrNil(c.expiresAt)}
	if c.root() {
		out.Role = rootName
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// announceToken publishes a token's creation or revocation, without its
// hash or secret.
func (s *server) announceToken(r *http.Request, kind events.Kind, t cursor.Token) {
	if s.events != nil {
		t.Hash = nil
		s.events.Publish(events.Event{Kind: kind, At: s.now(), Token: &t, Actor: callerOf(r.Context()).name})
	}
}

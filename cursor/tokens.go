package cursor

import (
	"context"
	"crypto/sha256"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"
)

// Role is what a scoped access token may do (CONTRACT §14).
type Role string

const (
	// Viewer may only read.
	Viewer Role = "viewer"
	// Operator may also create, replace, delete, unpark, rewind and
	// resend.
	Operator Role = "operator"
)

// ErrTokenExists means a token of that name is stored already.
var ErrTokenExists = errors.New("token already exists")

// Token is a scoped access token as a store keeps it: its name, scope and
// role, and the SHA-256 of the token, never the token itself, so a copy of
// the store or a backup cannot be used to call the admin API.
type Token struct {
	Name string `json:"name"`
	// IDPrefix is the start of every registration id the token reaches;
	// empty reaches them all.
	IDPrefix  string    `json:"idPrefix"`
	Role      Role      `json:"role"`
	CreatedAt time.Time `json:"createdAt"`
	// ExpiresAt is zero for a token that does not expire.
	ExpiresAt time.Time `json:"expiresAt,omitzero"`
	// Hash is the SHA-256 of the token.
	Hash []byte `json:"hash"`
}

// Expired reports whether t is refused at now.
func (t *Token) Expired(now time.Time) bool { return !t.ExpiresAt.IsZero() && !now.Before(t.ExpiresAt) }

// Tokens is where the scoped access tokens live, beside a Store and in the
// same place (a bolt file, kv buckets), so every bridge of a cluster
// honours the tokens any of them made. It is kept apart from Store: a
// token is no registration, and nothing that lists, exports or migrates
// registrations may meet one.
type Tokens interface {
	// CreateToken stores t; ErrTokenExists when its name is taken.
	CreateToken(ctx context.Context, t Token) error
	// ListTokens returns every token in name order.
	ListTokens(ctx context.Context) ([]Token, error)
	// DeleteToken removes the token named name; false when there was
	// none. From its return, LookupToken of this store no longer finds
	// it; other stores on the same data follow within LookupLag.
	DeleteToken(ctx context.Context, name string) (bool, error)
	// LookupToken finds the token whose SHA-256 is sum in memory, without
	// I/O: it runs on every admin request.
	LookupToken(sum [sha256.Size]byte) (Token, bool)
}

// LookupLag bounds how long a token made or revoked through one store
// takes to be found or refused by another store on the same data.
const LookupLag = 2 * time.Second

// ValidTokenName reports whether name can name a token: the characters
// of a registration id, 1 to 128 of them, so it reads safely in a path,
// a log line and an event subject.
func ValidTokenName(name string) bool {
	if name == "" || len(name) > 128 {
		return false
	}
	return !strings.ContainsFunc(name, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-')
	})
}

// TokenIndex is the in-memory index LookupToken answers from: every token
// by the hash of its secret, and by name for deletes. It is safe for
// concurrent use. A store keeps it equal to what it stores, updating it in
// the same call that writes (and, shared, from a watch of the others'
// writes).
type TokenIndex struct {
	mu     sync.RWMutex
	byHash map[[sha256.Size]byte]Token
	byName map[string][sha256.Size]byte
}

// NewTokenIndex returns an empty index.
func NewTokenIndex() *TokenIndex {
	return &TokenIndex{byHash: map[[sha256.Size]byte]Token{}, byName: map[string][sha256.Size]byte{}}
}

// Put adds t, replacing a token of the same name. A token whose Hash is
// not a SHA-256 is not added: it could never be presented.
func (x *TokenIndex) Put(t Token) {
	if len(t.Hash) != sha256.Size {
		return
	}
	sum := [sha256.Size]byte(t.Hash)
	x.mu.Lock()
	defer x.mu.Unlock()
	if old, ok := x.byName[t.Name]; ok {
		delete(x.byHash, old)
	}
	x.byHash[sum], x.byName[t.Name] = t, sum
}

// Remove drops the token named name, reporting whether there was one.
func (x *TokenIndex) Remove(name string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	sum, ok := x.byName[name]
	if ok {
		delete(x.byHash, sum)
		delete(x.byName, name)
	}
	return ok
}

// Lookup finds the token whose hash is sum.
func (x *TokenIndex) Lookup(sum [sha256.Size]byte) (Token, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	t, ok := x.byHash[sum]
	return t, ok
}

// All returns every token in name order.
func (x *TokenIndex) All() []Token {
	x.mu.RLock()
	out := make([]Token, 0, len(x.byHash))
	for _, t := range x.byHash {
		out = append(out, t)
	}
	x.mu.RUnlock()
	slices.SortFunc(out, func(a, b Token) int { return strings.Compare(a.Name, b.Name) })
	return out
}

package cursortest

import (
	"context"
	"crypto/sha256"
	"errors"
	"testing"
	"time"

	"github.com/jetstream-bridge/bridge/cursor"
)

// tokenCases hold every store to cursor.Tokens.
var tokenCases = []testCase{
	{"TokensCreateLookupListAndReopen", tokensCreateLookupListAndReopen},
	{"TokensTakenName", tokensTakenName},
	{"TokensDeleteRefusesAtOnce", tokensDeleteRefusesAtOnce},
	{"TokensOtherStoreFollows", tokensOtherStoreFollows},
}

// Tok is a token named name whose secret is "secret-"+name.
func Tok(name, prefix string, role cursor.Role) cursor.Token {
	sum := sha256.Sum256([]byte("secret-" + name))
	return cursor.Token{Name: name, IDPrefix: prefix, Role: role, CreatedAt: T0, Hash: sum[:]}
}

func sumOf(name string) [sha256.Size]byte { return sha256.Sum256([]byte("secret-" + name)) }

func tokensOf(t *testing.T, s cursor.Store) cursor.Tokens {
	t.Helper()
	ts, ok := s.(cursor.Tokens)
	if !ok {
		t.Fatalf("%T keeps no tokens (cursor.Tokens)", s)
	}
	return ts
}

func createToken(t *testing.T, s cursor.Store, tok cursor.Token) {
	t.Helper()
	if err := tokensOf(t, s).CreateToken(context.Background(), tok); err != nil {
		t.Fatalf("CreateToken(%q): %v", tok.Name, err)
	}
}

// waitLookup waits, at most cursor.LookupLag and a margin, until s finds
// (or, with !want, no longer finds) the token named name.
func waitLookup(t *testing.T, s cursor.Store, name string, want bool) {
	t.Helper()
	deadline := time.Now().Add(cursor.LookupLag + time.Second)
	for {
		_, ok := tokensOf(t, s).LookupToken(sumOf(name))
		if ok == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("LookupToken(%q) found=%v after %v, want %v", name, ok, cursor.LookupLag, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func tokensCreateLookupListAndReopen(e *env) {
	t := e.t
	exp := T0.Add(time.Hour)
	b := Tok("team-b", "team-b-", cursor.Operator)
	b.ExpiresAt = exp
	createToken(t, e.s, b)
	createToken(t, e.s, Tok("team-a", "team-a-", cursor.Viewer))
	got, ok := tokensOf(t, e.s).LookupToken(sumOf("team-b"))
	if !ok || got.Name != "team-b" || got.IDPrefix != "team-b-" || got.Role != cursor.Operator || !got.ExpiresAt.Equal(exp) {
		t.Fatalf("LookupToken(team-b) = %+v, %v", got, ok)
	}
	if _, ok := tokensOf(t, e.s).LookupToken(sha256.Sum256([]byte("secret-nobody"))); ok {
		t.Fatal("LookupToken found a token for a secret never stored")
	}
	rows, _, err := e.s.List(e.ctx, cursor.ListOptions{})
	if err != nil || len(rows) != 0 {
		t.Fatalf("List of registrations beside two tokens = %d rows, %v; want none", len(rows), err)
	}
	e.reopen(false, Options{})
	waitLookup(t, e.s, "team-a", true)
	list, err := tokensOf(t, e.s).ListTokens(e.ctx)
	if err != nil || len(list) != 2 || list[0].Name != "team-a" || list[1].Name != "team-b" {
		t.Fatalf("ListTokens after reopen = %+v, %v; want team-a, team-b", list, err)
	}
	if !list[1].ExpiresAt.Equal(exp) || !list[0].ExpiresAt.IsZero() || !list[0].CreatedAt.Equal(T0) {
		t.Fatalf("ListTokens after reopen lost times: %+v", list)
	}
}

func tokensTakenName(e *env) {
	t := e.t
	createToken(t, e.s, Tok("ops", "", cursor.Viewer))
	other := Tok("ops", "x-", cursor.Operator)
	other.Hash = make([]byte, sha256.Size)
	if err := tokensOf(t, e.s).CreateToken(e.ctx, other); !errors.Is(err, cursor.ErrTokenExists) {
		t.Fatalf("CreateToken of a taken name: %v, want ErrTokenExists", err)
	}
	s2 := e.other()
	if err := tokensOf(t, s2).CreateToken(e.ctx, other); !errors.Is(err, cursor.ErrTokenExists) {
		t.Fatalf("CreateToken of a name taken through another store: %v, want ErrTokenExists", err)
	}
	got, ok := tokensOf(t, s2).LookupToken(sumOf("ops"))
	if !ok || got.Role != cursor.Viewer {
		t.Fatalf("the first token of the name was replaced: %+v, %v", got, ok)
	}
}

func tokensDeleteRefusesAtOnce(e *env) {
	t := e.t
	createToken(t, e.s, Tok("gone", "g-", cursor.Operator))
	createToken(t, e.s, Tok("kept", "k-", cursor.Operator))
	ts := tokensOf(t, e.s)
	if found, err := ts.DeleteToken(e.ctx, "gone"); err != nil || !found {
		t.Fatalf("DeleteToken(gone) = %v, %v", found, err)
	}
	if _, ok := ts.LookupToken(sumOf("gone")); ok {
		t.Fatal("a deleted token is still found by the store that deleted it")
	}
	if found, err := ts.DeleteToken(e.ctx, "never"); err != nil || found {
		t.Fatalf("DeleteToken(never) = %v, %v; want false, nil", found, err)
	}
	e.reopen(false, Options{})
	waitLookup(t, e.s, "kept", true)
	if _, ok := tokensOf(t, e.s).LookupToken(sumOf("gone")); ok {
		t.Fatal("a deleted token came back after a reopen")
	}
	// The name is free again, for a new secret.
	createToken(t, e.s, Tok("gone", "g-", cursor.Viewer))
	waitLookup(t, e.s, "gone", true)
}

// tokensOtherStoreFollows: a token made or revoked through one store is
// found or refused by another on the same data within cursor.LookupLag
// (a second bridge of a cluster; a reopened file for a store alone).
func tokensOtherStoreFollows(e *env) {
	t := e.t
	first := e.s
	createToken(t, first, Tok("t1", "a-", cursor.Operator))
	second := e.other()
	waitLookup(t, second, "t1", true)
	if !e.o.Shared {
		first = second
	}
	if _, err := tokensOf(t, first).DeleteToken(e.ctx, "t1"); err != nil {
		t.Fatal(err)
	}
	waitLookup(t, second, "t1", false)
}

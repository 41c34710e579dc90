package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestTokenCreateListRevoke: a token printed once, on stdout alone; it
// works for its scope; listed without the token; refused once revoked.
func TestTokenCreateListRevoke(t *testing.T) {
	cleanEnv(t)
	api := startAPI(t)
	root := func(verb string, args ...string) cliResult {
		return cli(t, "", append([]string{"token", verb, "--admin-url", api.url, "--admin-token", testToken}, args...)...)
	}
	created := root("create", "--name", "team-a-ops", "--id-prefix", "team-a-", "--role", "operator", "--expires", "720h")
	created.want(t, 0, "created token team-a-ops: operator of ids starting with \"team-a-\", expires ")
	secret := strings.TrimSpace(created.out)
	if !strings.HasPrefix(secret, "bst_") || strings.Contains(secret, "\n") || strings.Contains(created.errOut, secret) {
		t.Fatalf("create printed stdout %q, stderr %q; want the token alone on stdout", created.out, created.errOut)
	}
	root("create", "--name", "readers", "--id-prefix", "", "--role", "viewer").want(t, 0, "viewer of every registration, never expires")
	root("create", "--name", "readers", "--id-prefix", "", "--role", "viewer").want(t, 1, `token "readers" already exists`)

	as := func(args ...string) cliResult {
		n := 1
		if args[0] == "token" {
			n = 2
		}
		return cli(t, "", append(append(args[:n:n], "--admin-url", api.url, "--admin-token", secret), args[n:]...)...)
	}
	as("register", "--id", "team-a-billing", "--namespace", "outbox", "--subject", "journal.>", "--url", "https://a.example/").want(t, 0, "registered team-a-billing")
	as("register", "--id", "team-b-billing", "--namespace", "outbox", "--subject", "journal.>", "--url", "https://a.example/").want(t, 1, `id must start with "team-a-"`)
	as("token", "list").want(t, 1, "needs the root token")

	list := root("list")
	list.want(t, 0, "NAME", "ROLE", "ID PREFIX", "team-a-ops", "operator", "team-a-", "readers", "(all)", "never")
	if strings.Contains(list.out, secret) {
		t.Fatalf("list printed the token:\n%s", list.out)
	}
	js := root("list", "--json")
	var got struct {
		Tokens []map[string]any `json:"tokens"`
	}
	if err := json.Unmarshal([]byte(js.out), &got); err != nil || len(got.Tokens) != 2 || got.Tokens[0]["token"] != nil {
		t.Fatalf("list --json: %s", js.out)
	}

	root("revoke", "team-a-ops").want(t, 0, "revoked team-a-ops")
	root("revoke", "team-a-ops").want(t, 0, "revoked team-a-ops")
	as("list").want(t, 1, "bearer token is not valid")
}

func TestTokenUsage(t *testing.T) {
	cleanEnv(t)
	cli(t, "", "token").want(t, 2, "missing create, list or revoke", "usage: bridge token create")
	cli(t, "", "token", "mint").want(t, 2, `unknown token subcommand "mint"`)
	cli(t, "", "token", "create", "--id-prefix", "a-", "--role", "viewer").want(t, 2, "--name is required")
	cli(t, "", "token", "create", "--name", "a", "--role", "viewer").want(t, 2, "--id-prefix is required")
	cli(t, "", "token", "create", "--name", "a", "--id-prefix", "a-").want(t, 2, "--role is required")
	cli(t, "", "token", "create", "--name", "a", "--id-prefix", "a-", "--role", "viewer", "--expires", "soon").want(t, 2, "--expires must be")
	cli(t, "", "token", "revoke").want(t, 2, "missing NAME")
	cli(t, "", "token", "-h").want(t, 0, "usage: bridge token")
	at, err := expiry("2030-01-02T03:04:05Z", time.Now())
	if err != nil || at.Format(time.RFC3339) != "2030-01-02T03:04:05Z" {
		t.Errorf("expiry of an RFC 3339 time: %v, %v", at, err)
	}
}

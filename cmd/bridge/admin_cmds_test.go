package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const testSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwAAAAAAAAAAA="

func TestUsageErrorsExitTwo(t *testing.T) {
	cleanEnv(t)
	cli(t, "").want(t, 2, "usage: bridge <subcommand>")
	cli(t, "", "frobnicate").want(t, 2, `unknown subcommand "frobnicate"`)
	cli(t, "", "show").want(t, 2, "missing ID", "usage: bridge show")
	cli(t, "", "show", "--colour", "x").want(t, 2, "flag provided but not defined: -colour", "usage: bridge show")
	cli(t, "", "show", "a", "--json").want(t, 2, `unexpected argument "--json"`)
	cli(t, "", "register", "--url", "https://a.example/", "--subject", "journal.x").want(t, 2, "--namespace is required")
	cli(t, "", "register", "--namespace", "outbox", "--url", "https://a.example/").want(t, 2, "--subject or --task-id")
	cli(t, "", "register", "--namespace", "outbox", "--subject", "s", "--url", "https://a.example/", "--auth-scheme", "Bearer").
		want(t, 2, "--auth-scheme and --auth-credentials go together")
	cli(t, "", "register", "--namespace", "outbox", "--subject", "s", "--url", "https://a.example/", "--start", "soon").
		want(t, 2, "--start must be")
	cli(t, "", "rewind", "x").want(t, 2, "exactly one of --seq or --time")
	cli(t, "", "rewind", "--seq", "1", "--time", "2026-01-01T00:00:00Z", "x").want(t, 2, "exactly one")
	cli(t, "", "rewind", "--time", "noon", "x").want(t, 2, "--time must be an RFC 3339 time")
	cli(t, "", "purge").want(t, 2, "--completed-older-than is required")
	cli(t, "", "list", "--parked", "--state", "active").want(t, 2, "contradict")
	cli(t, "", "listen", "--status", "99").want(t, 2, "--status must be")
	cli(t, "", "listen", "--secret", "whsec_short").want(t, 2, "--secret")
	cli(t, "", "publish").want(t, 2, "missing SUBJECT")
	cli(t, "", "list", "--admin-url", "ftp://x").want(t, 2, "--admin-url must be an http or https URL")
}

func TestHelpAndVersionExitZero(t *testing.T) {
	cleanEnv(t)
	help := cli(t, "", "help")
	help.want(t, 0, "register", "listen", "BRIDGE_<FLAG_IN_UPPER_SNAKE>")
	cli(t, "", "--help").want(t, 0, "subcommands:")
	cli(t, "", "show", "-h").want(t, 0, "usage: bridge show", "-admin-token")
	v := cli(t, "", "version")
	v.want(t, 0, "bridge dev go1.")
}

func TestRegisterShowListDelete(t *testing.T) {
	cleanEnv(t)
	api := startAPI(t)
	api.cli(t, "register", "--id", "billing", "--namespace", "outbox", "--subject", "journal.orders.>",
		"--url", "https://billing.example/hook", "--secret", testSecret, "--auth-scheme", "Bearer", "--auth-credentials", "hunter2",
		"--format", "structured", "--batch-max-events", "10").
		want(t, 0, "registered billing: outbox journal.orders.> -> billing.example, active, next sequence 42")

	show := api.cli(t, "show", "billing")
	show.want(t, 0, "subject:", "journal.orders.>", "signed:", "yes", "authentication:", "Bearer", "next sequence:", "42", "max events 10")
	if strings.Contains(show.out, "hunter2") || strings.Contains(show.out, testSecret) {
		t.Errorf("show printed a secret:\n%s", show.out)
	}

	js := api.cli(t, "show", "--json", "billing")
	js.want(t, 0)
	var got map[string]any
	if err := json.Unmarshal([]byte(js.out), &got); err != nil || got["id"] != "billing" || got["format"] != "structured" {
		t.Errorf("show --json printed %s (%v)", js.out, err)
	}

	api.cli(t, "register", "--id", "agent", "--namespace", "a2a", "--task-id", "task-42",
		"--url", "http://127.0.0.1:9/push", "--token", "tkn", "--start", "3").
		want(t, 0, "registered agent: a2a journal.a2a.task-42 -> 127.0.0.1:9, active, next sequence 3")

	list := api.cli(t, "list")
	list.want(t, 0, "ID", "NAMESPACE", "NEXT SEQ", "LAST ERROR")
	lines := strings.Split(strings.TrimSpace(list.out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[1], "agent ") || !strings.Contains(lines[2], "billing.example") {
		t.Errorf("list printed:\n%s", list.out)
	}
	api.cli(t, "list", "--namespace", "a2a").want(t, 0, "agent")
	if out := api.cli(t, "list", "--namespace", "a2a").out; strings.Contains(out, "billing") {
		t.Errorf("list --namespace a2a shows outbox rows:\n%s", out)
	}

	api.cli(t, "delete", "billing").want(t, 0, "deleted billing")
	api.cli(t, "delete", "billing").want(t, 0, "deleted billing")
	api.cli(t, "show", "billing").want(t, 1, `registration "billing" not found`)
}

func TestListFollowsPages(t *testing.T) {
	cleanEnv(t)
	api := startAPI(t)
	for i := range 5 {
		api.cli(t, "register", "--id", fmt.Sprintf("r%d", i), "--namespace", "outbox", "--subject", "journal.x",
			"--url", "https://a.example/").want(t, 0)
	}
	res := api.cli(t, "list", "--json", "--limit", "2")
	res.want(t, 0)
	var page struct {
		Registrations []struct{ ID string } `json:"registrations"`
		Next          string                `json:"next"`
	}
	if err := json.Unmarshal([]byte(res.out), &page); err != nil {
		t.Fatalf("list --json: %v\n%s", err, res.out)
	}
	var ids []string
	for _, r := range page.Registrations {
		ids = append(ids, r.ID)
	}
	if strings.Join(ids, ",") != "r0,r1,r2,r3,r4" || page.Next != "" {
		t.Errorf("list --json over pages of 2 gave %v next %q", ids, page.Next)
	}
	if table := api.cli(t, "list", "--limit", "2"); strings.Count(table.out, "\n") != 6 {
		t.Errorf("table over pages of 2:\n%s", table.out)
	}
	api.cli(t, "list", "--state", "completed").want(t, 0, "no registrations")
}

func TestAPIErrorsExitOne(t *testing.T) {
	cleanEnv(t)
	api := startAPI(t)
	reg := []string{"--namespace", "outbox", "--url", "https://a.example/"}
	api.cli(t, "register", append(reg, "--subject", "journal..x")...).want(t, 1, "empty token")
	api.cli(t, "register", append(reg, "--subject", "journal.x", "--id", "d")...).want(t, 0)
	api.cli(t, "register", append(reg, "--subject", "journal.x", "--id", "d")...).want(t, 1, `registration "d" already exists`)
	api.cli(t, "register", "--namespace", "a2a", "--task-id", "t", "--url", "http://10.0.0.1/").want(t, 1, "url")
	cli(t, "", "list", "--admin-url", api.url, "--admin-token", "wrong").want(t, 1, "bearer token is not valid")
	cli(t, "", "list", "--admin-url", "http://127.0.0.1:1", "--admin-token", "x").want(t, 1, "cannot reach the admin API at http://127.0.0.1:1")
	cli(t, "", "list", "--admin-url", api.url, "--data-dir", t.TempDir()).want(t, 1, "no admin token", "admin-token does not exist")
}

func TestIdempotencyKeyFlag(t *testing.T) {
	cleanEnv(t)
	api := startAPI(t)
	args := []string{"--namespace", "outbox", "--subject", "journal.x", "--url", "https://a.example/", "--idempotency-key", "k1", "--json"}
	first := api.cli(t, "register", args...)
	first.want(t, 0)
	again := api.cli(t, "register", args...)
	again.want(t, 0)
	if first.out != again.out {
		t.Errorf("replay printed\n%s\nwant\n%s", again.out, first.out)
	}
	args[3] = "journal.y"
	api.cli(t, "register", args...).want(t, 1, "Idempotency-Key")
}

func TestUnparkRewindPurge(t *testing.T) {
	cleanEnv(t)
	api := startAPI(t)
	api.cli(t, "register", "--id", "p", "--namespace", "outbox", "--subject", "journal.x", "--url", "https://a.example/").want(t, 0)
	api.cli(t, "unpark", "p").want(t, 1, `registration "p" is active, not parked`)
	if err := api.store.Park(t.Context(), "p", "receiver answered 410"); err != nil {
		t.Fatal(err)
	}
	api.cli(t, "list", "--parked").want(t, 0, "parked", "receiver answered 410")
	api.cli(t, "rewind", "--seq", "3", "p").want(t, 0, "rewound p: next sequence 3, parked", "bridge unpark p")
	api.cli(t, "rewind", "--time", "2026-01-01T00:00:00Z", "p").want(t, 0, "next sequence 1")
	api.cli(t, "rewind", "--seq", "99", "p").want(t, 1, "past the end")
	api.cli(t, "unpark", "p").want(t, 0, "unparked p: active, next sequence 1")

	api.cli(t, "purge", "--completed-older-than", "720h").
		want(t, 0, "purged 0 completed registrations and 0 idempotency keys in 0 batches; nothing eligible is left")
	js := api.cli(t, "purge", "--json", "--completed-older-than", "1h", "--batch-size", "10", "--max-batches", "2", "--idempotency-key-max-age", "none")
	js.want(t, 0, `"complete":true`)
	api.cli(t, "purge", "--completed-older-than", "30d").want(t, 1, "completedOlderThan must be a non-negative Go duration")
	api.cli(t, "purge", "--completed-older-than", "1h", "--idempotency-key-max-age", "forever").want(t, 1, "idempotencyKeyMaxAge")
}

func TestEnvironmentAndPrecedence(t *testing.T) {
	cleanEnv(t)
	api := startAPI(t)

	// The environment supplies what the command line does not.
	t.Setenv("BRIDGE_ADMIN_URL", api.url)
	t.Setenv("BRIDGE_ADMIN_TOKEN", testToken)
	cli(t, "", "list").want(t, 0, "no registrations")

	// The flag wins over the environment, both ways.
	cli(t, "", "list", "--admin-token", "wrong").want(t, 1, "bearer token is not valid")
	t.Setenv("BRIDGE_ADMIN_TOKEN", "wrong")
	cli(t, "", "list").want(t, 1, "bearer token is not valid")
	cli(t, "", "list", "--admin-token", testToken).want(t, 0)

	// Without a token anywhere else, the daemon's token file is read.
	t.Setenv("BRIDGE_ADMIN_TOKEN", "")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "admin-token"), []byte(testToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("BRIDGE_DATA_DIR", dir)
	cli(t, "", "list").want(t, 0)
	cli(t, "", "list", "--data-dir", t.TempDir()).want(t, 1, "no admin token")

	// A value the flag cannot take names its variable.
	t.Setenv("BRIDGE_JSON", "maybe")
	cli(t, "", "list").want(t, 2, "environment variable BRIDGE_JSON is not a valid --json")
	t.Setenv("BRIDGE_JSON", "true")
	cli(t, "", "list").want(t, 0, `"registrations":[]`)
}

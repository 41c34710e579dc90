package main

import (
	"strings"
	"testing"

	"github.com/jetstream-bridge/bridge/cursor"
)

// register --filter stores the filter; show prints it with its counts
// and the latest error; the API's refusal is CEL's message.
func TestRegisterShowFilter(t *testing.T) {
	cleanEnv(t)
	cli(t, "", "register", "-h").want(t, 0, "-filter", "[--filter EXPR]")
	api := startAPI(t)
	expr := `event.type == 'order.created' && data.total > 100`
	api.cli(t, "register", "--id", "big", "--namespace", "outbox", "--subject", "journal.orders.>",
		"--url", "https://a.example/", "--filter", expr).want(t, 0, "registered big:")
	api.cli(t, "register", "--id", "bad", "--namespace", "outbox", "--subject", "journal.x",
		"--url", "https://a.example/", "--filter", "data.total >").want(t, 1, "filter:1:13: Syntax error")
	api.cli(t, "register", "--id", "plain", "--namespace", "outbox", "--subject", "journal.x",
		"--url", "https://a.example/").want(t, 0)
	if show := api.cli(t, "show", "plain"); strings.Contains(show.out, "filter") {
		t.Errorf("show of a registration without a filter:\n%s", show.out)
	}
	if err := api.store.Advance(t.Context(), "big", cursor.Progress{NextSeq: 50, Filtered: 5, FilterErrors: 1,
		LastFilterError: "journal message 44: no such key: total"}); err != nil {
		t.Fatal(err)
	}
	show := api.cli(t, "show", "big")
	show.want(t, 0, expr, "journal message 44: no such key: total")
	for label, want := range map[string]string{"filtered:": "5", "filter errors:": "1"} {
		if f := strings.Fields(lineOf(show.out, label)); len(f) < 2 || f[len(f)-1] != want {
			t.Errorf("show: %q, want %s %s\n%s", f, label, want, show.out)
		}
	}
	api.cli(t, "show", "--json", "big").want(t, 0, `"filter":`, `"filtered":5`, `"filterErrors":1`)
}

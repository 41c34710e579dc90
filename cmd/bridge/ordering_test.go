package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/jetstream-bridge/bridge/cursor"
)

func TestRegisterOrderingUsage(t *testing.T) {
	cleanEnv(t)
	base := []string{"register", "--namespace", "outbox", "--subject", "journal.x", "--url", "https://a.example/"}
	cli(t, "", append(base, "--order-max-in-flight", "8")...).want(t, 2, "--order-max-in-flight needs --order-key")
	cli(t, "", append(base, "--order-key", "subject", "--order-max-in-flight", "many")...).
		want(t, 2, "-order-max-in-flight", `"many" is not an integer`)
	cli(t, "", "register", "-h").want(t, 0, "-order-key", "-order-max-in-flight", "[--order-key KEY [--order-max-in-flight N]]")
}

// register takes an ordering; show and list tell its key, its POSTs in
// flight and what its receiver acknowledged ahead of the cursor; --json
// prints the API's answer; the API's refusal names the field.
func TestRegisterShowListOrdering(t *testing.T) {
	cleanEnv(t)
	api := startAPI(t)
	api.cli(t, "register", "--id", "plain", "--namespace", "outbox", "--subject", "journal.x", "--url", "https://a.example/").want(t, 0)
	if list := api.cli(t, "list"); strings.Contains(list.out, "ORDER") || strings.Contains(list.out, "AHEAD") {
		t.Errorf("list without a keyed registration shows the ordering columns:\n%s", list.out)
	}
	if show := api.cli(t, "show", "plain"); strings.Contains(show.out, "ordering:") || strings.Contains(show.out, "in flight:") {
		t.Errorf("show of a registration without ordering:\n%s", show.out)
	}

	api.cli(t, "register", "--id", "customers", "--namespace", "outbox", "--subject", "journal.orders.>",
		"--url", "https://a.example/", "--order-key", "tokens:3", "--order-max-in-flight", "8").
		want(t, 0, "registered customers:", "next sequence 42, ordered by tokens:3, up to 8 in flight")
	api.cli(t, "register", "--id", "subjects", "--namespace", "outbox", "--subject", "journal.x",
		"--url", "https://a.example/", "--order-key", "subject").
		want(t, 0, "ordered by subject, up to 16 in flight")
	api.cli(t, "register", "--id", "bad", "--namespace", "outbox", "--subject", "journal.x",
		"--url", "https://a.example/", "--order-key", "tokens:0").want(t, 1, "ordering.key", "tokens are numbered from 1")
	api.cli(t, "register", "--id", "bad", "--namespace", "outbox", "--subject", "journal.x",
		"--url", "https://a.example/", "--order-key", "subject", "--order-max-in-flight", "300").want(t, 1, "ordering.maxInFlight must be 1 to 256")

	ahead := cursor.Ahead{44, 47}
	if err := api.store.Advance(t.Context(), "customers", cursor.Progress{NextSeq: 43, Delivered: 3, Window: true, Ahead: ahead}); err != nil {
		t.Fatal(err)
	}
	if err := api.store.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	show := api.cli(t, "show", "customers")
	show.want(t, 0, "tokens:3, up to 8 in flight")
	for label, want := range map[string]string{"ordering:": "tokens:3,", "next sequence:": "43", "in flight:": "0", "ahead:": "2"} {
		if f := strings.Fields(lineOf(show.out, label)); len(f) < 2 || f[len(strings.Fields(label))] != want {
			t.Errorf("show: %q, want %s %s\n%s", f, label, want, show.out)
		}
	}

	js := api.cli(t, "show", "--json", "customers")
	js.want(t, 0)
	var got struct {
		Ordering struct {
			Key         string `json:"key"`
			MaxInFlight int    `json:"maxInFlight"`
		} `json:"ordering"`
		InFlight *int `json:"inFlight"`
		Ahead    *int `json:"ahead"`
	}
	if err := json.Unmarshal([]byte(js.out), &got); err != nil || got.Ordering.Key != "tokens:3" || got.Ordering.MaxInFlight != 8 ||
		got.InFlight == nil || *got.InFlight != 0 || got.Ahead == nil || *got.Ahead != 2 {
		t.Errorf("show --json printed %s (%v)", js.out, err)
	}

	list := api.cli(t, "list")
	list.want(t, 0, "ORDER", "IN FLIGHT", "AHEAD")
	for id, want := range map[string][]string{
		"customers": {"tokens:3/8", "0", "2"},
		"subjects":  {"subject/16", "0", "0"},
		"plain":     {"-", "0", "0"},
	} {
		f := strings.Fields(lineOf(list.out, id+" "))
		if len(f) < 9 || strings.Join(f[6:9], " ") != strings.Join(want, " ") {
			t.Errorf("list row of %s: %q, want ORDER, IN FLIGHT, AHEAD %v\n%s", id, f, want, list.out)
		}
	}
}

// lineOf is the first line of out that starts with prefix.
func lineOf(out, prefix string) string {
	for l := range strings.SplitSeq(out, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

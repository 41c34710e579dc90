package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func env(vars map[string]string) lookupFunc {
	return func(name string) (string, bool) { v, ok := vars[name]; return v, ok }
}

func TestParseManifestYAMLAndJSON(t *testing.T) {
	yamlFile := `# the team's webhooks
registrations:
  - id: app-orders
    namespace: outbox
    subject: journal.orders.>
    url: https://orders.example/hook
    secret: ${ORDERS_SECRET}
    start: {seq: 7}
  - &base
    id: app-billing
    namespace: outbox
    subject: journal.billing.>
    url: https://billing.example/hook?sig=$${literal}
    headers: {X-Team: billing}
  - <<: *base
    id: app-refunds
`
	jsonFile := `{"registrations": [
  {"id": "app-orders", "namespace": "outbox", "subject": "journal.orders.>",
   "url": "https://orders.example/hook", "secret": "${ORDERS_SECRET}", "start": {"seq": 7}}
]}`
	lookup := env(map[string]string{"ORDERS_SECRET": `whsec_a"b: #c`})
	got, err := parseManifest("apps.yaml", []byte(yamlFile), lookup)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].id != "app-orders" || got[0].line != 3 || got[1].line != 9 || got[2].id != "app-refunds" {
		t.Fatalf("entries %+v", got)
	}
	var orders, refunds map[string]any
	if err := json.Unmarshal(got[0].body, &orders); err != nil {
		t.Fatal(err)
	}
	// A secret's characters are never read as YAML.
	if orders["secret"] != `whsec_a"b: #c` || orders["start"].(map[string]any)["seq"] != float64(7) {
		t.Errorf("app-orders body %s", got[0].body)
	}
	if err := json.Unmarshal(got[2].body, &refunds); err != nil {
		t.Fatal(err)
	}
	if refunds["url"] != "https://billing.example/hook?sig=${literal}" || refunds["subject"] != "journal.billing.>" {
		t.Errorf("app-refunds body %s: want the anchor merged and $${ kept as a literal ${", got[2].body)
	}
	fromJSON, err := parseManifest("apps.json", []byte(jsonFile), lookup)
	if err != nil || len(fromJSON) != 1 || string(fromJSON[0].body) != string(got[0].body) {
		t.Fatalf("the same entry in JSON: %v %+v", err, fromJSON)
	}
}

func TestParseManifestRefusals(t *testing.T) {
	for _, tc := range []struct{ name, file, want string }{
		{"syntax", "registrations:\n  - id: a\n    url: [x\n", "apps.yaml: line 3, column 10:"},
		{"bad indentation", "registrations:\n  - id: a\n   url: x\n", "line 3"},
		{"unclosed JSON", "{\"registrations\": [\n {\"id\": \"a\",\n  \"url\": \"x\"\n ]}\n", "line 4"},
		{"duplicate key", "registrations:\n  - id: a\n    url: x\n    url: y\n", `line 4, column 5: mapping key "url" already defined`},
		{"empty", "\n# nothing\n", "the file is empty"},
		{"no list", "regs: []\n", `no "registrations" list`},
		{"null list", "registrations:\n", "line 1: registrations must be a list"},
		{"unknown key", "registrations: []\nextra: 1\n", `line 2, column 1: unknown field "extra"`},
		{"not a mapping", "registrations:\n  - app-orders\n", "line 2"},
		{"no id", "registrations:\n  - url: x\n", `line 2: a registration has no "id"`},
		{"numeric id", "registrations:\n  - id: 42\n", `line 2: id 42 is not a string: quote it`},
		{"twice", "registrations:\n  - {id: a}\n  - id: a\n", `line 3: registration "a" is listed twice (first at line 2)`},
		{"unset", "registrations:\n  - id: a\n    secret: ${NOT_SET}\n", `line 2: registration "a": ${NOT_SET} is not set`},
		{"unclosed variable", "registrations:\n  - id: a\n    secret: ${OPEN\n", "without its closing }"},
		{"bad name", "registrations:\n  - id: a\n    secret: ${A-B}\n", "${A-B} is not a variable name"},
		{"two documents", "registrations: []\n---\nregistrations: []\n", "line 3: a second YAML document"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseManifest("apps.yaml", []byte(tc.file), env(nil))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestExpand(t *testing.T) {
	lookup := env(map[string]string{"A": "1", "EMPTY": ""})
	for in, want := range map[string]string{
		"plain $A and $":   "plain $A and $",
		"${A}${A}x":        "11x",
		"[${EMPTY}]":       "[]",
		"$${A} stays":      "${A} stays",
		"cost: $$5 ${A}":   "cost: $$5 1",
		"tail ${A}-${A}$$": "tail 1-1$$",
	} {
		got, err := expand(in, lookup)
		if err != nil || got != want {
			t.Errorf("expand(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// TestParseManifestJSONLines: strict JSON takes the fast path, with each
// entry's line and its numbers as written; JSON it refuses (a name twice)
// is read by the YAML parser, which names the line.
func TestParseManifestJSONLines(t *testing.T) {
	file := "{\n  \"registrations\": [\n    {\"id\": \"a\", \"start\": {\"seq\": 18446744073709551615}},\n\n    {\n      \"id\": \"b\"}\n  ]\n}\n"
	fields, lines, ok := jsonEntries([]byte(file))
	if !ok || len(fields) != 2 || !slices.Equal(lines, []int{3, 5}) {
		t.Fatalf("fast path: ok %v, %d entries, lines %v", ok, len(fields), lines)
	}
	got, err := parseManifest("apps.json", []byte(file), env(nil))
	if err != nil || !strings.Contains(string(got[0].body), `"seq":18446744073709551615`) || got[1].line != 5 {
		t.Fatalf("parsed %v: %+v", err, got)
	}
	twice := "{\"registrations\": [\n  {\"id\": \"a\",\n   \"id\": \"b\"}]}"
	if _, _, ok := jsonEntries([]byte(twice)); ok {
		t.Error("a name twice took the fast path")
	}
	if _, err := parseManifest("apps.json", []byte(twice), env(nil)); err == nil || !strings.Contains(err.Error(), "line 3") {
		t.Errorf("a name twice: %v, want its line", err)
	}
	flow := "{registrations: [{id: a}]}" // YAML's flow style, not JSON
	if got, err := parseManifest("apps.yaml", []byte(flow), env(nil)); err != nil || len(got) != 1 || got[0].id != "a" {
		t.Errorf("YAML flow style: %v %+v", err, got)
	}
}

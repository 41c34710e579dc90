package main

import (
	"encoding/json"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jetstream-bridge/bridge/cursor"
)

const otherTestSecret = "whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="

// appsFile is three registrations, app-orders signed with a secret from
// the environment.
const appsFile = `registrations:
  - id: app-orders
    namespace: outbox
    subject: journal.orders.>
    url: http://127.0.0.1:9/orders
    secret: ${APPS_ORDERS_SECRET}
    start: {seq: 5}
  - id: app-billing
    namespace: outbox
    subject: journal.billing.>
    url: http://127.0.0.1:9/billing
    headers: {X-Team: billing}
  - id: ops-audit
    namespace: outbox
    subject: journal.>
    url: http://127.0.0.1:9/audit
`

func writeFile(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "registrations.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// rows is every stored registration by id.
func (api *apiServer) rows(t *testing.T) map[string]cursor.Registration {
	t.Helper()
	list, _, err := api.store.List(t.Context(), cursor.ListOptions{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]cursor.Registration{}
	for _, r := range list {
		out[r.ID] = r
	}
	return out
}

func wantLines(t *testing.T, r cliResult, want ...string) {
	t.Helper()
	if got := strings.Split(strings.TrimSpace(r.out), "\n"); !slices.Equal(got, want) {
		t.Errorf("apply printed\n%s\nwant\n%s\nstderr: %s", r.out, strings.Join(want, "\n"), r.errOut)
	}
}

func TestApplyConverges(t *testing.T) {
	cleanEnv(t)
	api := startAPI(t)
	file := writeFile(t, appsFile)
	t.Setenv("APPS_ORDERS_SECRET", testSecret)

	first := api.cli(t, "apply", "-f", file)
	first.want(t, 0)
	wantLines(t, first, "+ create app-orders", "+ create app-billing", "+ create ops-audit")
	made := api.rows(t)
	if len(made) != 3 || made["app-orders"].Secret != testSecret || made["app-orders"].NextSeq != 5 || made["app-billing"].Headers["X-Team"] != "billing" {
		t.Fatalf("stored %+v", made)
	}

	again := api.cli(t, "apply", "-f", file)
	wantLines(t, again, "= unchanged app-orders", "= unchanged app-billing", "= unchanged ops-audit")
	for id, r := range api.rows(t) {
		if !r.UpdatedAt.Equal(made[id].UpdatedAt) {
			t.Errorf("%s: updatedAt moved from %v to %v on an unchanged apply", id, made[id].UpdatedAt, r.UpdatedAt)
		}
	}

	// A new secret in the environment: the plan says so, and a dry run
	// writes nothing.
	t.Setenv("APPS_ORDERS_SECRET", otherTestSecret)
	dry := api.cli(t, "apply", "--dry-run", "-f", file)
	wantLines(t, dry, "~ update app-orders", "= unchanged app-billing", "= unchanged ops-audit")
	if r := api.rows(t)["app-orders"]; r.Secret != testSecret || !r.UpdatedAt.Equal(made["app-orders"].UpdatedAt) {
		t.Errorf("a dry run changed app-orders: %+v", r)
	}
	time.Sleep(10 * time.Millisecond) // so a write shows in updatedAt
	wantLines(t, api.cli(t, "apply", "-f", file), "~ update app-orders", "= unchanged app-billing", "= unchanged ops-audit")
	if r := api.rows(t)["app-orders"]; r.Secret != otherTestSecret || r.NextSeq != 5 || r.UpdatedAt.Equal(made["app-orders"].UpdatedAt) {
		t.Errorf("after the update app-orders is %+v; want the new secret and the cursor 5 kept", r)
	}

	// --prune deletes only what starts with its prefix.
	two := strings.Join(strings.Split(appsFile, "\n")[:12], "\n") + "\n"
	js := api.cli(t, "apply", "--json", "--prune", "app-", "-f", writeFile(t, strings.Replace(two, "app-billing", "app-invoices", 1)))
	js.want(t, 0)
	var plan struct {
		DryRun        bool `json:"dryRun"`
		Registrations []struct{ ID, Change string }
	}
	if err := json.Unmarshal([]byte(js.out), &plan); err != nil {
		t.Fatalf("--json printed %s: %v", js.out, err)
	}
	got := []string{}
	for _, r := range plan.Registrations {
		got = append(got, r.Change+" "+r.ID)
	}
	if want := []string{"unchanged app-orders", "create app-invoices", "delete app-billing"}; plan.DryRun || !slices.Equal(got, want) {
		t.Errorf("--json plan %v, want %v", got, want)
	}
	rows := api.rows(t)
	if _, ok := rows["app-billing"]; ok || len(rows) != 3 || rows["ops-audit"].ID == "" || rows["app-invoices"].ID == "" {
		t.Errorf("after --prune app-: %v", slices.Sorted(maps.Keys(rows)))
	}
}

func TestApplyIsAllOrNothing(t *testing.T) {
	cleanEnv(t)
	api := startAPI(t)
	t.Setenv("APPS_ORDERS_SECRET", testSecret)

	// The second entry's URL is refused by the API: nothing is created,
	// the first entry included, and the refusal names the id.
	refused := strings.Replace(appsFile, "http://127.0.0.1:9/billing", "ftp://billing.example/", 1)
	r := api.cli(t, "apply", "-f", writeFile(t, refused))
	r.want(t, 1, `registration "app-billing" (line 8): url`, "nothing applied: 1 of 3 registrations refused")
	if r.out != "" || len(api.rows(t)) != 0 {
		t.Errorf("a refused entry still applied: stdout %q, stored %d", r.out, len(api.rows(t)))
	}

	bad := api.cli(t, "apply", "-f", writeFile(t, appsFile+"  - id: [broken\n"))
	bad.want(t, 1, "line 17")
	unset := api.cli(t, "apply", "-f", writeFile(t, strings.ReplaceAll(appsFile, "APPS_ORDERS_SECRET", "APPS_UNSET_SECRET")))
	unset.want(t, 1, `registration "app-orders": ${APPS_UNSET_SECRET} is not set`)
	if len(api.rows(t)) != 0 {
		t.Errorf("a file that does not parse applied %d registrations", len(api.rows(t)))
	}

	cli(t, "", "apply").want(t, 2, "-f FILE is required", "usage: bridge apply")
	cli(t, "", "apply", "-f", "x", "--prune", "").want(t, 2, "--prune needs a prefix")
	api.cli(t, "apply", "-f", filepath.Join(t.TempDir(), "missing.yaml")).want(t, 1, "missing.yaml")
	api.cli(t, "apply", "--prune", "not a prefix", "-f", writeFile(t, "registrations: []\n")).want(t, 1, "prefix")
}

func TestApplyReadsStandardInput(t *testing.T) {
	cleanEnv(t)
	api := startAPI(t)
	r := cli(t, `{"registrations": [{"id": "in-1", "namespace": "outbox", "subject": "journal.x", "url": "http://127.0.0.1:9/x"}]}`,
		"apply", "--admin-url", api.url, "--admin-token", testToken, "-f", "-")
	wantLines(t, r, "+ create in-1")
}

// TestApplyWithAnOperatorToken applies a team's file with the team's own
// token: its entries and its --prune stay within the token's prefix, and
// an entry outside it is refused before anything is written.
func TestApplyWithAnOperatorToken(t *testing.T) {
	cleanEnv(t)
	api := startAPI(t)
	api.cli(t, "register", "--id", "app-legacy", "--namespace", "outbox", "--subject", "journal.x", "--url", "http://127.0.0.1:9/x").want(t, 0)
	api.cli(t, "register", "--id", "ops-audit", "--namespace", "outbox", "--subject", "journal.x", "--url", "http://127.0.0.1:9/x").want(t, 0)
	res, err := (&adminClient{base: api.url, token: testToken, http: http.DefaultClient}).
		call(t.Context(), "POST", "/v1/tokens", map[string]string{"name": "apps", "idPrefix": "app-", "role": "operator"}, nil)
	var tok struct{ Token string }
	if err != nil || json.Unmarshal(res, &tok) != nil || tok.Token == "" {
		t.Fatalf("creating the token: %v %s", err, res)
	}
	t.Setenv("APPS_ORDERS_SECRET", testSecret)
	team := func(args ...string) cliResult {
		return cli(t, "", append([]string{"apply", "--admin-url", api.url, "--admin-token", tok.Token}, args...)...)
	}
	two := strings.Join(strings.Split(appsFile, "\n")[:12], "\n") + "\n"
	wantLines(t, team("--prune", "app-", "-f", writeFile(t, two)),
		"+ create app-orders", "+ create app-billing", "- delete app-legacy")
	wantLines(t, team("--prune", "app-", "-f", writeFile(t, two)), "= unchanged app-orders", "= unchanged app-billing")

	r := team("-f", writeFile(t, appsFile))
	r.want(t, 1, `registration "ops-audit"`, `id must start with "app-"`, "nothing applied")
	if rows := api.rows(t); len(rows) != 3 || rows["ops-audit"].URL != "http://127.0.0.1:9/x" {
		t.Errorf("after the refused file: %v", rows)
	}
}

// TestPlanChunks: a plan call holds at most maxPlanEntries entries and
// maxPlanBytes of them, and an entry larger than that goes alone.
func TestPlanChunks(t *testing.T) {
	sizes := func(steps []step) []int {
		var out []int
		for _, c := range planChunks(steps) {
			out = append(out, len(c))
		}
		return out
	}
	small := make([]step, 2500)
	for i := range small {
		small[i].body = json.RawMessage(`{"id":"x"}`)
	}
	if got := sizes(small); !slices.Equal(got, []int{1000, 1000, 500}) {
		t.Errorf("2,500 small entries in plans of %v", got)
	}
	big := make([]step, 5)
	for i := range big {
		big[i].body = json.RawMessage(strings.Repeat("x", maxPlanBytes/2))
	}
	big[2].body = json.RawMessage(strings.Repeat("x", 2*maxPlanBytes))
	if got := sizes(big); !slices.Equal(got, []int{1, 1, 1, 1, 1}) {
		t.Errorf("entries of half a plan and one of two plans in plans of %v", got)
	}
	if got := sizes(nil); len(got) != 0 {
		t.Errorf("no entries in plans of %v", got)
	}
}

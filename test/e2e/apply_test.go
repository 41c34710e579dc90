package e2e

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// rotatedSecret is the signing key the file's secret is changed to.
const rotatedSecret = "whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="

// appsFile is the file a team keeps in git: three registrations, the
// first signed with a secret its CI passes in the environment.
func appsFile(sinkURL string) string {
	return fmt.Sprintf(`# webhooks of the apps team
registrations:
  - id: app-orders
    namespace: outbox
    subject: journal.orders.>
    url: %[1]s/orders
    secret: ${APPS_ORDERS_SECRET}
  - id: app-billing
    namespace: outbox
    subject: journal.billing.>
    url: %[1]s/billing
  - id: ops-audit
    namespace: outbox
    subject: journal.audit.>
    url: %[1]s/audit
`, sinkURL)
}

// TestApplyRegistrationsAsCode applies a file the way CI does, with the
// real binary, to a bridge of each store: created, then unchanged (no
// updatedAt moves), a secret rotated in the environment (the cursor
// kept, deliveries signed with the new key), a dry run that changes
// nothing, --prune bounded to its prefix, and two bad files that apply
// nothing.
func TestApplyRegistrationsAsCode(t *testing.T) {
	for store, flags := range map[string][]string{
		"bolt": nil,
		"kv":   {"--store", "kv", "--kv-replicas", "1"},
	} {
		t.Run(store, func(t *testing.T) { applyRegistrationsAsCode(t, flags...) })
	}
}

func applyRegistrationsAsCode(t *testing.T, flags ...string) {
	d := newDaemon(t, flags...)
	d.start()
	s := newWholeRecorder(t)
	pub := newPublisher(t, "nats://"+d.natsAddr)
	dir := t.TempDir()
	write := func(name, body string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	apply := func(secret string, args ...string) (string, int) {
		t.Helper()
		return applyThrough(t, d, secret, args...)
	}
	wantPlan := func(out string, code int, lines ...string) {
		t.Helper()
		wantPlanLines(t, out, code, lines...)
	}
	file := write("apps.yaml", appsFile(s.URL))

	out, code := apply(secret, "-f", file)
	wantPlan(out, code, "+ create app-orders", "+ create app-billing", "+ create ops-audit")
	for i := range 3 {
		pub.publish(t, "journal.orders.eu", fmt.Sprintf("order-%d", i))
	}
	waitFor(t, 15*time.Second, "3 orders delivered", func() bool { return len(s.at("/orders")) >= 3 })
	verifyAll(t, secret, s.at("/orders"))
	// A delivery moves updatedAt too, when its cursor is stored.
	waitStored := func(n float64) {
		waitFor(t, 10*time.Second, "the deliveries' cursor to be stored", func() bool { return d.registration("app-orders")["delivered"] == n })
	}
	waitStored(3)

	before := d.registrations()
	out, code = apply(secret, "-f", file)
	wantPlan(out, code, "= unchanged app-orders", "= unchanged app-billing", "= unchanged ops-audit")
	for id, r := range d.registrations() {
		if r["updatedAt"] != before[id]["updatedAt"] {
			t.Errorf("%s: updatedAt moved from %v to %v on an unchanged apply", id, before[id]["updatedAt"], r["updatedAt"])
		}
	}

	out, code = apply(rotatedSecret, "-f", file)
	wantPlan(out, code, "~ update app-orders", "= unchanged app-billing", "= unchanged ops-audit")
	orders := d.registration("app-orders")
	if orders["nextSeq"] != before["app-orders"]["nextSeq"] || orders["updatedAt"] == before["app-orders"]["updatedAt"] {
		t.Errorf("after the secret changed: nextSeq %v (was %v), updatedAt %v; want the cursor kept and the update recorded",
			orders["nextSeq"], before["app-orders"]["nextSeq"], orders["updatedAt"])
	}
	for i := 3; i < 5; i++ {
		pub.publish(t, "journal.orders.eu", fmt.Sprintf("order-%d", i))
	}
	waitFor(t, 15*time.Second, "5 orders delivered", func() bool { return len(s.at("/orders")) >= 5 })
	waitStored(5)
	got := s.at("/orders")
	verifyAll(t, rotatedSecret, got[3:])
	if bodies := bodiesOf(got); !slices.Equal(bodies, []string{"order-0", "order-1", "order-2", "order-3", "order-4"}) {
		t.Errorf("orders delivered %q; want each once, in order: the update kept the cursor", bodies)
	}

	// The file loses app-billing and gains app-refunds: a dry run prints
	// the plan and changes nothing; the apply does it, within app- only.
	next := write("next.yaml", strings.Replace(appsFile(s.URL), "app-billing", "app-refunds", 1))
	before = d.registrations()
	out, code = apply(rotatedSecret, "--dry-run", "--prune", "app-", "-f", next)
	wantPlan(out, code, "= unchanged app-orders", "+ create app-refunds", "= unchanged ops-audit", "- delete app-billing")
	if after := d.registrations(); !sameRegistrations(before, after) {
		t.Errorf("a dry run changed the registrations:\nbefore %v\nafter  %v", before, after)
	}
	out, code = apply(rotatedSecret, "--prune", "app-", "-f", next)
	wantPlan(out, code, "= unchanged app-orders", "+ create app-refunds", "= unchanged ops-audit", "- delete app-billing")
	if ids := slices.Sorted(maps.Keys(d.registrations())); !slices.Equal(ids, []string{"app-orders", "app-refunds", "ops-audit"}) {
		t.Errorf("after --prune app-: %v", ids)
	}

	// A file that does not parse, and one whose second entry the API
	// refuses: exit 1 naming the line or the id, nothing applied.
	before = d.registrations()
	broken := write("broken.yaml", strings.Replace(appsFile(s.URL), "app-billing", "app-new", 1)+"  - id: [oops\n")
	out, code = apply(rotatedSecret, "--prune", "app-", "-f", broken)
	if code != 1 || !strings.Contains(out, "line 16") {
		t.Errorf("a YAML syntax error: exit %d, printed %q; want 1 and the line", code, out)
	}
	refused := write("refused.yaml", `registrations:
  - id: app-first
    namespace: outbox
    subject: journal.first.>
    url: `+s.URL+`/first
  - id: app-second
    namespace: outbox
    subject: journal..second
    url: `+s.URL+`/second
`)
	out, code = apply(rotatedSecret, "-f", refused)
	if code != 1 || !strings.Contains(out, `registration "app-second"`) || strings.Contains(out, "create") {
		t.Errorf("a refused second entry: exit %d, printed %q; want 1, its id, and no create", code, out)
	}
	if after := d.registrations(); !sameRegistrations(before, after) {
		t.Errorf("a refused file applied something:\nbefore %v\nafter  %v", before, after)
	}
}

// applyThrough runs bridge apply against d's admin API, with the apps
// file's secret in the environment.
func applyThrough(t *testing.T, d *daemon, secret string, args ...string) (string, int) {
	t.Helper()
	full := append([]string{"apply", "--admin-url", "http://" + d.admin, "--data-dir", d.dataDir}, args...)
	return runBridge(t, []string{"BRIDGE_ADMIN_TOKEN=", "APPS_ORDERS_SECRET=" + secret}, full...)
}

// wantPlanLines fails unless apply exited 0 having printed lines.
func wantPlanLines(t *testing.T, out string, code int, lines ...string) {
	t.Helper()
	if got := strings.Split(strings.TrimSpace(out), "\n"); code != 0 || !slices.Equal(got, lines) {
		t.Fatalf("apply exit %d, printed\n%s\nwant\n%s", code, out, strings.Join(lines, "\n"))
	}
}

// TestApplyThroughEveryBridgeOfACluster: a file applied through one
// bridge of a cluster is unchanged through another, secrets included,
// and a change applied through either is seen by the other.
func TestApplyThroughEveryBridgeOfACluster(t *testing.T) {
	c := newBridgeCluster(t, 2)
	b1, b2 := c.bridges[0].daemon, c.bridges[1].daemon
	file := filepath.Join(t.TempDir(), "apps.yaml")
	if err := os.WriteFile(file, []byte(appsFile(c.sink.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code := applyThrough(t, b1, secret, "-f", file)
	wantPlanLines(t, out, code, "+ create app-orders", "+ create app-billing", "+ create ops-audit")
	out, code = applyThrough(t, b2, secret, "-f", file)
	wantPlanLines(t, out, code, "= unchanged app-orders", "= unchanged app-billing", "= unchanged ops-audit")
	out, code = applyThrough(t, b2, rotatedSecret, "-f", file)
	wantPlanLines(t, out, code, "~ update app-orders", "= unchanged app-billing", "= unchanged ops-audit")
	out, code = applyThrough(t, b1, rotatedSecret, "--prune", "app-", "-f", file)
	wantPlanLines(t, out, code, "= unchanged app-orders", "= unchanged app-billing", "= unchanged ops-audit")
}

// registrations is every registration the daemon has, by id.
func (d *daemon) registrations() map[string]map[string]any {
	d.t.Helper()
	var page struct {
		Registrations []map[string]any `json:"registrations"`
	}
	if code := d.api("GET", "/v1/registrations?limit=1000", nil, &page); code != 200 {
		d.t.Fatalf("listing registrations: %d", code)
	}
	out := map[string]map[string]any{}
	for _, r := range page.Registrations {
		out[r["id"].(string)] = r
	}
	return out
}

// sameRegistrations compares what an apply may change: which exist and
// when each was last updated.
func sameRegistrations(a, b map[string]map[string]any) bool {
	if len(a) != len(b) {
		return false
	}
	for id, r := range a {
		if b[id] == nil || b[id]["updatedAt"] != r["updatedAt"] || b[id]["url"] != r["url"] {
			return false
		}
	}
	return true
}

func bodiesOf(reqs []received) []string {
	out := make([]string, len(reqs))
	for i, r := range reqs {
		out[i] = r.body
	}
	return out
}

// verifyAll checks each delivery's Standard Webhooks signature with key.
func verifyAll(t *testing.T, key string, reqs []received) {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(key)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range reqs {
		if err := wh.Verify([]byte(r.body), r.header); err != nil {
			t.Errorf("delivery %q does not verify with the key: %v", r.body, err)
		}
	}
}

package e2e

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// documentedPermissions is the account configuration of
// docs/deployment.md, the fenced block after its marker, as it stands.
func documentedPermissions(t *testing.T) string {
	t.Helper()
	doc, err := os.ReadFile("../../docs/deployment.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "<!-- permissions: the block below is tested as it stands -->")
	if !ok {
		t.Fatal("docs/deployment.md has no tested permissions block")
	}
	_, rest, _ = strings.Cut(rest, "```conf\n")
	block, _, ok := strings.Cut(rest, "```")
	if !ok || !strings.Contains(block, "user: bridge") {
		t.Fatalf("docs/deployment.md: the permissions block is not a ```conf block with the bridge's user:\n%s", block)
	}
	return block
}

// permissionedNATS is a nats-server process whose only account is the
// documented one, with an unrestricted user added beside the bridge's for
// what an operator and the publishers do (the journal stream, messages).
type permissionedNATS struct {
	*natsServer
	log string
}

const (
	bridgeNATSPassword = "bridge-secret"
	adminNATSUser      = "operator"
)

func startPermissionedNATS(t *testing.T, accounts string) *permissionedNATS {
	t.Helper()
	withAdmin := strings.Replace(accounts, "users: [", fmt.Sprintf("users: [\n      {user: %s, password: %s}", adminNATSUser, adminNATSUser), 1)
	if withAdmin == accounts {
		t.Fatal("the permissions block has no users list")
	}
	n := &permissionedNATS{natsServer: &natsServer{t: t, addr: freeAddr(t), dir: t.TempDir()}}
	n.log = filepath.Join(n.dir, "nats-server.log")
	host, port, _ := strings.Cut(n.addr, ":")
	conf := fmt.Sprintf("host: %s\nport: %s\nlogfile: %q\njetstream { store_dir: %q }\n%s",
		host, port, n.log, filepath.Join(n.dir, "js"), withAdmin)
	confPath := filepath.Join(n.dir, "nats.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	n.cmd = exec.Command(bin.natsServer, "-c", confPath)
	n.cmd.Env = append(os.Environ(), "BRIDGE_NATS_PASSWORD="+bridgeNATSPassword)
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.kill)
	waitFor(t, 10*time.Second, "nats-server to listen", func() bool {
		c, err := (&netDialer{}).dial(n.addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return n
}

func (n *permissionedNATS) adminURL() string {
	return fmt.Sprintf("nats://%s:%s@%s", adminNATSUser, adminNATSUser, n.addr)
}

// violations are the server's log lines of refused publishes and
// subscriptions.
func (n *permissionedNATS) violations() []string {
	b, _ := os.ReadFile(n.log)
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "Violation") {
			out = append(out, l)
		}
	}
	return out
}

// bridgeOn prepares a kv-store bridge that connects as the documented
// user, on a journal stream the operator created.
func bridgeOn(t *testing.T, n *permissionedNATS) *daemon {
	t.Helper()
	pub := newPublisher(t, n.adminURL())
	if _, err := pub.js.CreateStream(t.Context(), jetstream.StreamConfig{
		Name: "JOURNAL", Subjects: []string{"journal.>"}, AllowDirect: true,
	}); err != nil {
		t.Fatal(err)
	}
	return newDaemon(t, "--nats-url", "nats://"+n.addr, "--nats-user", "bridge", "--nats-password", bridgeNATSPassword,
		"--store", "kv", "--kv-replicas", "1", "--instance", "permitted")
}

// A bridge with exactly the documented NATS permissions creates its
// buckets, takes a registration (idempotently, twice), delivers a message
// stored before it started and one published after, answers as a NATS
// service, and stops cleanly; the server refused it nothing on the way.
func TestDocumentedPermissionsAreEnough(t *testing.T) {
	n := startPermissionedNATS(t, documentedPermissions(t))
	d := bridgeOn(t, n)
	pub := newPublisher(t, n.adminURL())
	pub.publish(t, "journal.orders.1", `{"order":1}`)
	d.start()
	s := newSink(t)
	register := []string{"register", "--id", "orders", "--namespace", "outbox", "--subject", "journal.orders.>",
		"--url", s.URL, "--start", "first", "--idempotency-key", "k1"}
	for range 2 {
		if out, code := d.cli(register...); code != 0 {
			t.Fatalf("register exit %d: %s", code, out)
		}
	}
	pub.publish(t, "journal.orders.2", `{"order":2}`)
	waitFor(t, 20*time.Second, "two deliveries", func() bool { return len(s.bodies()) >= 2 })
	if got := s.bodies(); !slices.Equal(got, []string{`{"order":1}`, `{"order":2}`}) {
		t.Fatalf("delivered %q", got)
	}
	waitFor(t, 10*time.Second, "the cursor to be stored past both messages", func() bool {
		return d.registration("orders")["nextSeq"] == float64(3)
	})
	if names, code := clusterInstances(d); code != http.StatusOK || !slices.Equal(names, []string{"permitted"}) {
		t.Fatalf("GET /v1/cluster: %d %q, want this bridge alone", code, names)
	}
	// The NATS service answers an operator's nats micro ping and status
	// request through the documented subscriptions and responses.
	if ids := pinged(t, n.adminURL()); len(ids) != 1 {
		t.Errorf("nats micro ping: %q, want the bridge", ids)
	}
	if st := statusOf(t, n.adminURL(), "permitted"); st.Instance != "permitted" || st.Registrations != 1 {
		t.Errorf("status: %+v, want instance permitted with 1 registration", st)
	}
	if code := d.stop(); code != 0 {
		t.Fatalf("SIGTERM: exit %d\n%s", code, d.logs.String())
	}
	if v := n.violations(); len(v) > 0 {
		t.Fatalf("the server refused the bridge with the documented permissions:\n%s", strings.Join(v, "\n"))
	}
}

// Without one of the documented permissions the bridge fails, and says
// which subject the server refused it: an operator reads the missing
// permission off the log.
func TestMissingPermissionIsNamed(t *testing.T) {
	const removed = `"$KV.BRIDGE_regs.>"`
	doc := documentedPermissions(t)
	line := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(removed) + `\n`)
	if !line.MatchString(doc) {
		t.Fatalf("the documented permissions have no %s line", removed)
	}
	n := startPermissionedNATS(t, line.ReplaceAllString(doc, ""))
	d := bridgeOn(t, n)
	d.start()
	out, code := d.cli("register", "--id", "orders", "--namespace", "outbox", "--subject", "journal.orders.>", "--url", "http://127.0.0.1:9/")
	if code == 0 {
		t.Fatalf("register succeeded without publish permission on $KV.BRIDGE_regs.>: %s", out)
	}
	want := `Permissions Violation for Publish to "$KV.BRIDGE_regs.`
	waitFor(t, 10*time.Second, "the bridge to log the refused subject", func() bool { return strings.Contains(d.logs.String(), want) })
	if code := d.stop(); code != 0 {
		t.Errorf("SIGTERM: exit %d", code)
	}
}

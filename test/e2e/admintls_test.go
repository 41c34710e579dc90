package e2e

import (
	"crypto/tls"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jetstream-bridge/bridge/internal/testutil"
)

// adminPKI writes a CA and a certificate for 127.0.0.1 it issued, and
// returns the files' paths.
func adminPKI(t *testing.T) (ca, cert, key string, pki *testutil.PKI) {
	t.Helper()
	dir := t.TempDir()
	pki = testutil.NewPKI(t, "bridge admin CA")
	leaf := pki.Server(t, "127.0.0.1")
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return write("ca.pem", pki.CAPEM), write("cert.pem", leaf.CertPEM), write("key.pem", leaf.KeyPEM), pki
}

func TestAdminTLSServesTheAPIOverHTTPSToACLITrustingItsCA(t *testing.T) {
	ca, cert, key, pki := adminPKI(t)
	d := newDaemon(t, "--admin-tls-cert", cert, "--admin-tls-key", key)
	d.launch()
	trusting := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pki.Pool}}}
	d.waitHealthy(trusting, "https://"+d.admin)
	if !strings.Contains(d.logs.String(), "admin=https://"+d.admin) {
		t.Errorf("the start-up log does not name the admin API as https://%s:\n%s", d.admin, d.logs.String())
	}

	base := []string{"--admin-url", "https://" + d.admin, "--data-dir", d.dataDir}
	list := func(env []string, extra ...string) (string, int) {
		return runBridge(t, append([]string{"BRIDGE_ADMIN_TOKEN=", "BRIDGE_ADMIN_CA="}, env...), append(append([]string{"list"}, base...), extra...)...)
	}
	if out, code := list(nil, "--admin-ca", ca); code != 0 || !strings.Contains(out, "no registrations") {
		t.Errorf("list --admin-ca: exit %d: %s", code, out)
	}
	if out, code := list([]string{"BRIDGE_ADMIN_CA=" + ca}); code != 0 || !strings.Contains(out, "no registrations") {
		t.Errorf("list with BRIDGE_ADMIN_CA: exit %d: %s", code, out)
	}
	if out, code := list(nil); code != 1 || !strings.Contains(out, "certificate signed by unknown authority") || !strings.Contains(out, "--admin-ca") {
		t.Errorf("list without the CA: exit %d: %s; want 1 and a hint at --admin-ca", code, out)
	}
	out, code := runBridge(t, []string{"BRIDGE_ADMIN_TOKEN="}, "list", "--admin-url", "http://"+d.admin, "--data-dir", d.dataDir)
	if code != 1 || !strings.Contains(out, "serves HTTPS: use --admin-url https://"+d.admin) {
		t.Errorf("list over plain HTTP: exit %d: %s", code, out)
	}
	if code := d.stop(); code != 0 {
		t.Errorf("exit %d after SIGTERM", code)
	}
}

func TestAdminTLSFlagsThatDoNotLoadExitOneNamingTheFlag(t *testing.T) {
	_, cert, key, _ := adminPKI(t)
	junk := filepath.Join(t.TempDir(), "junk.pem")
	if err := os.WriteFile(junk, []byte("junk"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--admin-tls-cert", cert}, "--admin-tls-cert needs --admin-tls-key"},
		{[]string{"--admin-tls-key", key}, "--admin-tls-key needs --admin-tls-cert"},
		{[]string{"--admin-tls-cert", junk, "--admin-tls-key", key}, "--admin-tls-cert " + junk},
		{[]string{"--admin-tls-cert", cert, "--admin-tls-key", junk}, "--admin-tls-key " + junk},
	} {
		args := append([]string{"run", "--data-dir", t.TempDir(), "--embedded-listen", freeAddr(t), "--admin-listen", freeAddr(t)}, tc.args...)
		if out, code := runBridge(t, []string{"NATS_URL="}, args...); code != 1 || !strings.Contains(out, tc.want) {
			t.Errorf("bridge run %v: exit %d: %s; want 1 saying %q", tc.args, code, out, tc.want)
		}
	}
}

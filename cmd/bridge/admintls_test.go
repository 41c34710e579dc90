package main

import (
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jetstream-bridge/bridge/admin"
	"github.com/jetstream-bridge/bridge/cursor"
	"github.com/jetstream-bridge/bridge/internal/testutil"
	"github.com/jetstream-bridge/bridge/netguard"
)

// writeFile writes text into dir/name and returns the path.
func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// A bad --admin-tls-* stops `bridge run` with exit 1 and a sentence
// naming the flag, before anything is started.
func TestRunRefusesBadAdminTLS(t *testing.T) {
	cleanEnv(t)
	files := t.TempDir()
	pki := testutil.NewPKI(t, "admin CA")
	leaf, other := pki.Server(t, "127.0.0.1"), pki.Server(t, "127.0.0.1")
	cert := writeFile(t, files, "cert.pem", leaf.CertPEM)
	key := writeFile(t, files, "key.pem", leaf.KeyPEM)
	otherKey := writeFile(t, files, "other-key.pem", other.KeyPEM)
	junk := writeFile(t, files, "junk.pem", "not a PEM file\n")
	missing := filepath.Join(files, "missing.pem")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--admin-tls-cert", cert}, "--admin-tls-cert needs --admin-tls-key"},
		{[]string{"--admin-tls-key", key}, "--admin-tls-key needs --admin-tls-cert"},
		{[]string{"--admin-tls-cert", missing, "--admin-tls-key", key}, "--admin-tls-cert: open " + missing},
		{[]string{"--admin-tls-cert", cert, "--admin-tls-key", missing}, "--admin-tls-key: open " + missing},
		{[]string{"--admin-tls-cert", junk, "--admin-tls-key", key}, "--admin-tls-cert " + junk + " holds no PEM certificate"},
		{[]string{"--admin-tls-cert", key, "--admin-tls-key", key}, "--admin-tls-cert " + key + " holds no PEM certificate"},
		{[]string{"--admin-tls-cert", cert, "--admin-tls-key", junk}, "--admin-tls-key " + junk},
		{[]string{"--admin-tls-cert", cert, "--admin-tls-key", otherKey}, "private key does not match public key"},
	} {
		wantRunRefused(t, 1, tc.want, tc.args...)
	}
}

// httpsAPI serves a real admin API the way `bridge run --admin-tls-cert
// --admin-tls-key` does, and returns its https:// URL.
func httpsAPI(t *testing.T, cert, key string) string {
	t.Helper()
	cfg, err := (&adminTLS{cert: cert, key: key}).config(slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	store, err := cursor.Open(filepath.Join(t.TempDir(), "bridge.db"))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{TLSConfig: cfg, ReadHeaderTimeout: 5 * time.Second, ErrorLog: log.New(io.Discard, "", 0), Handler: admin.New(admin.Options{
		Store:   store,
		Journal: fixedJournal{first: 1, last: 41},
		Guard:   netguard.NewPolicy(netguard.WithAllowLoopbackHTTP(true)),
		Token:   testToken,
	})}
	done := make(chan error, 1)
	go func() { done <- serveAdmin(srv, ln) }()
	t.Cleanup(func() {
		_ = srv.Close()
		<-done
		_ = store.Close()
	})
	return "https://" + ln.Addr().String()
}

func TestTheCLITrustsTheAdminCA(t *testing.T) {
	cleanEnv(t)
	files := t.TempDir()
	pki := testutil.NewPKI(t, "admin CA")
	leaf := pki.Server(t, "127.0.0.1")
	url := httpsAPI(t, writeFile(t, files, "cert.pem", leaf.CertPEM), writeFile(t, files, "key.pem", leaf.KeyPEM))
	ca := writeFile(t, files, "ca.pem", pki.CAPEM)
	list := func(args ...string) cliResult {
		return cli(t, "", append([]string{"list", "--admin-url", url, "--admin-token", testToken}, args...)...)
	}

	list("--admin-ca", ca).want(t, 0, "no registrations")
	list().want(t, 1, "cannot reach the admin API at "+url, "certificate signed by unknown authority", "pass --admin-ca")
	list("--admin-ca", writeFile(t, files, "other-ca.pem", testutil.NewPKI(t, "another CA").CAPEM)).
		want(t, 1, "certificate signed by unknown authority")
	list("--admin-ca", writeFile(t, files, "junk.pem", "junk")).want(t, 1, "--admin-ca "+files+"/junk.pem holds no PEM certificate")
	list("--admin-ca", filepath.Join(files, "none.pem")).want(t, 1, "--admin-ca: open ")
	cli(t, "", "list", "--admin-url", "http"+strings.TrimPrefix(url, "https"), "--admin-token", testToken).
		want(t, 1, "serves HTTPS: use --admin-url "+url)

	t.Setenv("BRIDGE_ADMIN_CA", ca)
	list().want(t, 0, "no registrations")
}

// A certificate renewed in place is served from the next handshake that
// looks at the files, without a restart; one that does not load leaves
// the previous one in service.
func TestTheAdminCertificateIsReloadedWhenItsFilesChange(t *testing.T) {
	files := t.TempDir()
	first, second := testutil.NewPKI(t, "first CA"), testutil.NewPKI(t, "second CA")
	leaf := first.Server(t, "127.0.0.1")
	cert, key := writeFile(t, files, "cert.pem", leaf.CertPEM), writeFile(t, files, "key.pem", leaf.KeyPEM)
	kp := &keyPair{certFile: cert, keyFile: key, log: slog.New(slog.DiscardHandler)}
	if err := kp.reload(time.Now()); err != nil {
		t.Fatal(err)
	}
	served := func() string {
		t.Helper()
		c, err := kp.get(nil)
		if err != nil {
			t.Fatal(err)
		}
		return c.Leaf.Issuer.CommonName
	}
	if got := served(); got != "first CA" {
		t.Fatalf("serving a certificate of %q", got)
	}

	renewed := second.Server(t, "127.0.0.1")
	writeFile(t, files, "cert.pem", renewed.CertPEM)
	writeFile(t, files, "key.pem", renewed.KeyPEM)
	later := time.Now().Add(time.Minute)
	for _, f := range []string{cert, key} {
		if err := os.Chtimes(f, later, later); err != nil {
			t.Fatal(err)
		}
	}
	if got := served(); got != "first CA" {
		t.Errorf("the files were looked at again within %v: serving %q", recheckEvery, got)
	}
	kp.checked = time.Time{}
	if got := served(); got != "second CA" {
		t.Errorf("after the renewal, serving a certificate of %q", got)
	}

	writeFile(t, files, "key.pem", "half-written")
	kp.checked = time.Time{}
	if got := served(); got != "second CA" {
		t.Errorf("a key that does not load replaced the certificate: serving %q", got)
	}
}

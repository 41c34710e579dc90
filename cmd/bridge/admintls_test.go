package main

import (
	"crypto/tls"
	"io"
	"log"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jetstream-bridge/bridge/admin"
	"github.com/jetstream-bridge/bridge/cursor"
	"github.com/jetstream-bridge/bridge/internal/testutil"
	"github.com/jetstream-bridge/bridge/netguard"
)

// A bad --admin-tls-* stops `bridge run` with exit 1 and a sentence
// naming the flag, before anything is started.
func TestRunRefusesBadAdminTLS(t *testing.T) {
	cleanEnv(t)
	files := t.TempDir()
	pki := testutil.NewPKI(t, "admin CA")
	leaf, other := pki.Server(t, "127.0.0.1"), pki.Server(t, "127.0.0.1")
	cert := testutil.WriteFile(t, files, "cert.pem", leaf.CertPEM)
	key := testutil.WriteFile(t, files, "key.pem", leaf.KeyPEM)
	otherKey := testutil.WriteFile(t, files, "other-key.pem", other.KeyPEM)
	junk := testutil.WriteFile(t, files, "junk.pem", "not a PEM file\n")
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
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
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
	go func() { done <- srv.ServeTLS(ln, "", "") }()
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
	url := httpsAPI(t, testutil.WriteFile(t, files, "cert.pem", leaf.CertPEM), testutil.WriteFile(t, files, "key.pem", leaf.KeyPEM))
	ca := testutil.WriteFile(t, files, "ca.pem", pki.CAPEM)
	list := func(args ...string) cliResult {
		return cli(t, "", append([]string{"list", "--admin-url", url, "--admin-token", testToken}, args...)...)
	}

	list("--admin-ca", ca).want(t, 0, "no registrations")
	list().want(t, 1, "cannot reach the admin API at "+url, "certificate signed by unknown authority", "pass --admin-ca")
	list("--admin-ca", testutil.WriteFile(t, files, "other-ca.pem", testutil.NewPKI(t, "another CA").CAPEM)).
		want(t, 1, "certificate signed by unknown authority")
	list("--admin-ca", testutil.WriteFile(t, files, "junk.pem", "junk")).want(t, 1, "--admin-ca "+files+"/junk.pem holds no PEM certificate")
	list("--admin-ca", filepath.Join(files, "none.pem")).want(t, 1, "--admin-ca: open ")
	cli(t, "", "list", "--admin-url", "http"+strings.TrimPrefix(url, "https"), "--admin-token", testToken).
		want(t, 1, "serves HTTPS: use --admin-url "+url)

	t.Setenv("BRIDGE_ADMIN_CA", ca)
	list().want(t, 0, "no registrations")
}

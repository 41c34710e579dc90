package daemon

import (
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/jetstream-bridge/bridge/internal/testutil"
)

// A certificate renewed in place is served from the next handshake that
// looks at the files, without a restart; one that does not load leaves
// the previous one in service.
func TestTheAdminCertificateIsReloadedWhenItsFilesChange(t *testing.T) {
	files := t.TempDir()
	first, second := testutil.NewPKI(t, "first CA"), testutil.NewPKI(t, "second CA")
	leaf := first.Server(t, "127.0.0.1")
	cert, key := testutil.WriteFile(t, files, "cert.pem", leaf.CertPEM), testutil.WriteFile(t, files, "key.pem", leaf.KeyPEM)
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
	testutil.WriteFile(t, files, "cert.pem", renewed.CertPEM)
	testutil.WriteFile(t, files, "key.pem", renewed.KeyPEM)
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

	testutil.WriteFile(t, files, "key.pem", "half-written")
	kp.checked = time.Time{}
	if got := served(); got != "second CA" {
		t.Errorf("a key that does not load replaced the certificate: serving %q", got)
	}
}

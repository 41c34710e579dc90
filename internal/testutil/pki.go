package testutil

import (
	"crypto/tls"
	"crypto/x509"
	"testing"

	"github.com/jetstream-bridge/bridge/internal/testpki"
)

// PKI is a certificate authority made for one test, issuing server and
// client certificates for loopback receivers (see testpki).
type PKI struct {
	// CAPEM is the authority's certificate, the text a registration's
	// tls.caCertificates carries.
	CAPEM string
	Pool  *x509.CertPool
	ca    *testpki.CA
}

// Leaf is an issued certificate and its key, as PEM and as a
// tls.Certificate for a server.
type Leaf = testpki.Leaf

// NewPKI makes a fresh authority; its name is cn.
func NewPKI(t testing.TB, cn string) *PKI {
	t.Helper()
	ca, err := testpki.New(cn)
	if err != nil {
		t.Fatal(err)
	}
	return &PKI{CAPEM: ca.PEM, Pool: ca.Pool, ca: ca}
}

// Server issues a server certificate for hosts: IP addresses and DNS
// names.
func (p *PKI) Server(t testing.TB, hosts ...string) Leaf {
	t.Helper()
	l, err := p.ca.Server(hosts...)
	return issued(t, l, err)
}

// Client issues a client certificate whose common name is cn.
func (p *PKI) Client(t testing.TB, cn string) Leaf {
	t.Helper()
	l, err := p.ca.Client(cn)
	return issued(t, l, err)
}

// ServerTLS is a server configuration presenting leaf that demands a
// client certificate issued by p.
func (p *PKI) ServerTLS(leaf Leaf) *tls.Config { return p.ca.ServerTLS(leaf) }

func issued(t testing.TB, l Leaf, err error) Leaf {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	return l
}

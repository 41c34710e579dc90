package testutil

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"testing"
	"time"
)

// PKI is a certificate authority made for one test, issuing server and
// client certificates for loopback receivers.
type PKI struct {
	// CAPEM is the authority's certificate, the text a registration's
	// tls.caCertificates carries.
	CAPEM string
	Pool  *x509.CertPool
	cert  *x509.Certificate
	key   *ecdsa.PrivateKey
}

// Leaf is an issued certificate and its key, as PEM and as a
// tls.Certificate for a server.
type Leaf struct {
	CertPEM, KeyPEM string
	TLS             tls.Certificate
}

// NewPKI makes a fresh authority; its name is cn.
func NewPKI(t testing.TB, cn string) *PKI {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &PKI{CAPEM: pemOf("CERTIFICATE", der), Pool: pool, cert: cert, key: key}
}

// Server issues a server certificate for hosts: IP addresses and DNS
// names.
func (p *PKI) Server(t testing.TB, hosts ...string) Leaf {
	t.Helper()
	tmpl := p.template(t, hosts[0], x509.ExtKeyUsageServerAuth)
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	return p.issue(t, tmpl)
}

// Client issues a client certificate whose common name is cn.
func (p *PKI) Client(t testing.TB, cn string) Leaf {
	t.Helper()
	return p.issue(t, p.template(t, cn, x509.ExtKeyUsageClientAuth))
}

func (p *PKI) template(t testing.TB, cn string, usage x509.ExtKeyUsage) *x509.Certificate {
	return &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
}

func (p *PKI) issue(t testing.TB, tmpl *x509.Certificate) Leaf {
	t.Helper()
	key := newKey(t)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.cert, &key.PublicKey, p.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	l := Leaf{CertPEM: pemOf("CERTIFICATE", der), KeyPEM: pemOf("PRIVATE KEY", keyDER)}
	if l.TLS, err = tls.X509KeyPair([]byte(l.CertPEM), []byte(l.KeyPEM)); err != nil {
		t.Fatal(err)
	}
	return l
}

// ServerTLS is a server configuration presenting leaf that demands a
// client certificate issued by p.
func (p *PKI) ServerTLS(leaf Leaf) *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{leaf.TLS},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    p.Pool,
	}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func serial(t testing.TB) *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func pemOf(typ string, der []byte) string {
	return string(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}))
}

// Package testpki is a certificate authority made for one test or one
// bench run, issuing server and client certificates for loopback
// receivers, so TLS is tested through a registration's own
// tls.caCertificates and never through the system's roots.
//
// It returns errors instead of taking a testing.TB, so the bench binary
// uses it as the tests do (internal/testutil wraps it for tests).
package testpki

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
	"time"
)

// CA is an authority; its certificates are valid for a day around now.
type CA struct {
	// PEM is the authority's certificate, the text a registration's
	// tls.caCertificates carries.
	PEM  string
	Pool *x509.CertPool
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// Leaf is an issued certificate and its key, as PEM and as a
// tls.Certificate for a server.
type Leaf struct {
	CertPEM, KeyPEM string
	TLS             tls.Certificate
}

// New makes a fresh authority whose name is cn.
func New(cn string) (*CA, error) {
	tmpl, key, err := template(cn)
	if err != nil {
		return nil, err
	}
	tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &CA{PEM: pemOf("CERTIFICATE", der), Pool: pool, cert: cert, key: key}, nil
}

// Server issues a server certificate for hosts, IP addresses and DNS
// names; its common name is the first.
func (c *CA) Server(hosts ...string) (Leaf, error) {
	cn := ""
	if len(hosts) > 0 {
		cn = hosts[0]
	}
	return c.issue(cn, x509.ExtKeyUsageServerAuth, hosts)
}

// Client issues a client certificate whose common name is cn.
func (c *CA) Client(cn string) (Leaf, error) {
	return c.issue(cn, x509.ExtKeyUsageClientAuth, nil)
}

func (c *CA) issue(cn string, usage x509.ExtKeyUsage, hosts []string) (Leaf, error) {
	tmpl, key, err := template(cn)
	if err != nil {
		return Leaf{}, err
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{usage}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		return Leaf{}, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return Leaf{}, err
	}
	l := Leaf{CertPEM: pemOf("CERTIFICATE", der), KeyPEM: pemOf("PRIVATE KEY", keyDER)}
	l.TLS, err = tls.X509KeyPair([]byte(l.CertPEM), []byte(l.KeyPEM))
	return l, err
}

// ServerTLS is a server configuration presenting leaf that demands a
// client certificate issued by c.
func (c *CA) ServerTLS(leaf Leaf) *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{leaf.TLS},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    c.Pool,
	}
}

// template is a certificate valid for a day around now, with a fresh
// P-256 key.
func template(cn string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, nil, err
	}
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
	}, key, nil
}

func pemOf(typ string, der []byte) string {
	return string(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}))
}

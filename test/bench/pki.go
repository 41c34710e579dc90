package main

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

// pki is a certificate authority made for one run, so the TLS receivers
// are trusted through a registration's tls.caCertificates, as a user's
// private receivers are, and never through the system's roots.
type pki struct {
	caPEM string
	pool  *x509.CertPool
	cert  *x509.Certificate
	key   *ecdsa.PrivateKey
}

// leaf is an issued certificate and its key, as PEM for a registration and
// as a tls.Certificate for a server.
type leaf struct {
	certPEM, keyPEM string
	pair            tls.Certificate
}

func newPKI(cn string) (*pki, error) {
	tmpl, key, err := certTemplate(cn)
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
	return &pki{caPEM: pemOf("CERTIFICATE", der), pool: pool, cert: cert, key: key}, nil
}

// server issues a certificate for the loopback receivers: SAN IP
// 127.0.0.1, the address in their URLs.
func (p *pki) server() (leaf, error) {
	return p.issue("127.0.0.1", x509.ExtKeyUsageServerAuth, net.IPv4(127, 0, 0, 1))
}

// client issues the certificate a registration presents to a receiver
// that demands one.
func (p *pki) client(cn string) (leaf, error) {
	return p.issue(cn, x509.ExtKeyUsageClientAuth)
}

func (p *pki) issue(cn string, usage x509.ExtKeyUsage, ips ...net.IP) (leaf, error) {
	tmpl, key, err := certTemplate(cn)
	if err != nil {
		return leaf{}, err
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{usage}
	tmpl.IPAddresses = ips
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.cert, &key.PublicKey, p.key)
	if err != nil {
		return leaf{}, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return leaf{}, err
	}
	l := leaf{certPEM: pemOf("CERTIFICATE", der), keyPEM: pemOf("PRIVATE KEY", keyDER)}
	l.pair, err = tls.X509KeyPair([]byte(l.certPEM), []byte(l.keyPEM))
	return l, err
}

// certTemplate is a certificate valid for a day around now, with a fresh
// P-256 key.
func certTemplate(cn string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
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

package webhook

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/jetstream-bridge/bridge/netguard"
	"github.com/jetstream-bridge/bridge/projection"
)

// TLS is a registration's own way of dialling its https:// receiver: the
// CAs trusted instead of the sender's roots, the client certificate
// presented, and the name verified and sent as SNI. The fields are PEM
// text; ClientKey is a secret and never reaches an Outcome.
type TLS struct {
	CACertificates    string
	ClientCertificate string
	ClientKey         string
	ServerName        string
}

// ParseTLS builds the client configuration t asks for on top of base. Its
// errors name the field and never quote PEM text, so a key cannot leak
// through a refusal.
func ParseTLS(base *tls.Config, t *TLS) (*tls.Config, error) {
	c := base.Clone()
	if t.CACertificates != "" {
		pool, err := certPool(t.CACertificates)
		if err != nil {
			return nil, fmt.Errorf("caCertificates: %w", err)
		}
		c.RootCAs = pool
	}
	switch {
	case (t.ClientCertificate == "") != (t.ClientKey == ""):
		return nil, errors.New("clientCertificate and clientKey come together")
	case t.ClientCertificate != "":
		if err := eachCertificate(t.ClientCertificate, func(*x509.Certificate) {}); err != nil {
			return nil, fmt.Errorf("clientCertificate: %w", err)
		}
		if b, _ := pem.Decode([]byte(t.ClientKey)); b == nil {
			return nil, errors.New("clientKey: no PEM block found")
		}
		pair, err := tls.X509KeyPair([]byte(t.ClientCertificate), []byte(t.ClientKey))
		if err != nil {
			return nil, errors.New("clientKey: not a private key, or not the one of clientCertificate")
		}
		c.Certificates = []tls.Certificate{pair}
	}
	if t.ServerName != "" {
		c.ServerName = t.ServerName
	}
	return c, nil
}

// certPool parses PEM text that must hold certificates only, at least one.
func certPool(text string) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	return pool, eachCertificate(text, pool.AddCert)
}

// eachCertificate calls fn for each certificate of PEM text and refuses
// anything else: no block at all, a block of another type, one that does
// not parse, or text beside the blocks that is not whitespace.
func eachCertificate(text string, fn func(*x509.Certificate)) error {
	rest := []byte(text)
	n := 0
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		n++
		if b.Type != "CERTIFICATE" {
			return fmt.Errorf("PEM block %d is a %q, not a CERTIFICATE", n, b.Type)
		}
		cert, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return fmt.Errorf("PEM block %d is not a valid certificate", n)
		}
		fn(cert)
	}
	switch {
	case n == 0:
		return errors.New("no PEM certificate found")
	case len(bytes.TrimSpace(rest)) > 0:
		return fmt.Errorf("text after PEM block %d is not a PEM block", n)
	}
	return nil
}

// tlsPoolSize bounds how many distinct TLS settings keep a transport, and
// so a connection pool, at once: more than the receivers with settings of
// their own that one bridge talks to in a while.
const tlsPoolSize = 64

// tlsPool holds one http.Transport per namespace and distinct TLS
// setting, not per registration and not per POST: registrations sharing a
// client certificate share its connections, and a handshake is paid per
// connection, not per message. The least recently used setting is dropped
// beyond tlsPoolSize, its idle connections closed; a request still in
// flight on it finishes.
//
// Every transport dials through its namespace's policy dial, so the guard
// judges each of their connections like the sender's own.
type tlsPool struct {
	newTransport func(netguard.DialFunc, *tls.Config) *http.Transport
	dial         map[projection.Namespace]netguard.DialFunc
	base         *tls.Config

	mu      sync.Mutex
	entries map[tlsKey]*tlsEntry
	closed  bool
}

// tlsKey names a namespace and a TLS setting. The map hashes the PEM
// text on each lookup, cheaper per POST than a cryptographic digest, and
// compares it whole on a hit: two settings never share a transport, so no
// registration is ever sent with another's client certificate.
type tlsKey struct {
	ns projection.Namespace
	TLS
}

type tlsEntry struct {
	tr   *http.Transport
	used time.Time
}

// transport returns the transport for ns and t, building it on first use.
// A setting that does not parse is refused for good: it was accepted by
// no admin API and no retry can mend it.
func (p *tlsPool) transport(ns projection.Namespace, t *TLS) (*http.Transport, error) {
	k := tlsKey{ns: ns, TLS: *t}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errors.New("sender is closed")
	}
	if e, ok := p.entries[k]; ok {
		e.used = time.Now()
		return e.tr, nil
	}
	cfg, err := ParseTLS(p.base, t)
	if err != nil {
		return nil, permanent("tls: %v", err)
	}
	if len(p.entries) >= tlsPoolSize {
		p.evictLocked()
	}
	tr := p.newTransport(p.dial[ns], cfg)
	p.entries[k] = &tlsEntry{tr: tr, used: time.Now()}
	return tr, nil
}

// evictLocked drops the least recently used transport.
func (p *tlsPool) evictLocked() {
	var (
		oldest tlsKey
		when   time.Time
	)
	for k, e := range p.entries {
		if when.IsZero() || e.used.Before(when) {
			oldest, when = k, e.used
		}
	}
	p.entries[oldest].tr.CloseIdleConnections()
	delete(p.entries, oldest)
}

// close drops every transport's idle connections; the pool builds no more.
func (p *tlsPool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for k, e := range p.entries {
		e.tr.CloseIdleConnections()
		delete(p.entries, k)
	}
}

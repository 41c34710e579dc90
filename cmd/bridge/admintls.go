package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// adminTLS are the flags of `bridge run` that serve the admin listener
// over HTTPS.
type adminTLS struct {
	cert, key string
}

func (a *adminTLS) register(fs *flag.FlagSet) {
	fs.StringVar(&a.cert, "admin-tls-cert", "", "PEM certificate (chain) file: serve the admin listener over HTTPS, with --admin-tls-key")
	fs.StringVar(&a.key, "admin-tls-key", "", "PEM private key file of --admin-tls-cert")
}

// config is the admin listener's TLS configuration, nil without the
// flags. Its errors name the flag at fault. The files are read again when
// they change, so a renewed certificate is served without a restart.
func (a *adminTLS) config(log *slog.Logger) (*tls.Config, error) {
	switch {
	case a.cert == "" && a.key == "":
		return nil, nil
	case a.key == "":
		return nil, errors.New("--admin-tls-cert needs --admin-tls-key: the admin listener serves HTTPS with both")
	case a.cert == "":
		return nil, errors.New("--admin-tls-key needs --admin-tls-cert: the admin listener serves HTTPS with both")
	}
	kp := &keyPair{certFile: a.cert, keyFile: a.key, log: log}
	if err := kp.reload(time.Now()); err != nil {
		return nil, err
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: kp.get}, nil
}

// adminScheme is the scheme of the admin API's URL.
func adminScheme(c *tls.Config) string {
	if c == nil {
		return "http"
	}
	return "https"
}

// serveAdmin serves the admin API on ln, over HTTPS when srv has a TLS
// configuration (ServeTLS also offers HTTP/2, as Serve with a TLS
// listener would not).
func serveAdmin(srv *http.Server, ln net.Listener) error {
	if srv.TLSConfig == nil {
		return srv.Serve(ln)
	}
	return srv.ServeTLS(ln, "", "")
}

// keyPair is the admin listener's certificate, read again from its files
// when either changes: certificates are renewed in place (cert-manager,
// certbot), and a bridge serving the old one until a restart fails its
// clients the day it expires.
type keyPair struct {
	certFile, keyFile string
	log               *slog.Logger

	mu      sync.Mutex
	cert    *tls.Certificate
	stamp   [2]fileStamp
	checked time.Time
}

// fileStamp tells a file rewritten from the one read.
type fileStamp struct {
	mod  time.Time
	size int64
}

// recheckEvery bounds how often a handshake looks at the files.
const recheckEvery = 10 * time.Second

func (k *keyPair) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := time.Now()
	if now.Sub(k.checked) >= recheckEvery {
		k.checked = now
		if s := stamps(k.certFile, k.keyFile); s != k.stamp {
			if err := k.reloadLocked(now); err != nil {
				k.log.Warn("admin TLS certificate changed but does not load; serving the previous one", "error", err)
			} else {
				k.log.Info("admin TLS certificate reloaded", "cert", k.certFile)
			}
		}
	}
	return k.cert, nil
}

func (k *keyPair) reload(now time.Time) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.checked = now
	return k.reloadLocked(now)
}

func (k *keyPair) reloadLocked(now time.Time) error {
	s := stamps(k.certFile, k.keyFile)
	cert, err := loadKeyPair(k.certFile, k.keyFile)
	if err != nil {
		return err
	}
	if now.After(cert.Leaf.NotAfter) {
		k.log.Warn("the admin TLS certificate has expired; clients will refuse it", "cert", k.certFile, "notAfter", cert.Leaf.NotAfter)
	}
	k.cert, k.stamp = cert, s
	return nil
}

func stamps(files ...string) [2]fileStamp {
	var out [2]fileStamp
	for i, f := range files[:2] {
		if fi, err := os.Stat(f); err == nil {
			out[i] = fileStamp{mod: fi.ModTime(), size: fi.Size()}
		}
	}
	return out
}

// loadKeyPair reads the certificate and its key, naming the flag of the
// file at fault: the certificate is checked on its own first, so an error
// of the pair is the key's.
func loadKeyPair(certFile, keyFile string) (*tls.Certificate, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("--admin-tls-cert: %w", err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("--admin-tls-key: %w", err)
	}
	var block *pem.Block
	for rest := certPEM; ; {
		if block, rest = pem.Decode(rest); block == nil || block.Type == "CERTIFICATE" {
			break
		}
	}
	if block == nil {
		return nil, fmt.Errorf("--admin-tls-cert %s holds no PEM certificate", certFile)
	}
	if _, err := x509.ParseCertificate(block.Bytes); err != nil {
		return nil, fmt.Errorf("--admin-tls-cert %s: %w", certFile, err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("--admin-tls-key %s (for --admin-tls-cert %s): %w", keyFile, certFile, err)
	}
	return &pair, nil
}

// adminCA is the client's trust for an https:// admin API: the roots of
// --admin-ca in place of the system's, nil without the flag.
func adminCA(file string) (*tls.Config, error) {
	if file == "" {
		return nil, nil
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("--admin-ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(raw) {
		return nil, fmt.Errorf("--admin-ca %s holds no PEM certificate", file)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// tlsHint says what to do about an admin API the client could not trust.
func tlsHint(err error) string {
	var unknown x509.UnknownAuthorityError
	var host x509.HostnameError
	switch {
	case errors.As(err, &unknown):
		return " (pass --admin-ca, or set BRIDGE_ADMIN_CA, with the CA certificate that signed the admin listener's)"
	case errors.As(err, &host):
		return " (use a host the certificate names in --admin-url)"
	}
	return ""
}

// plainToTLS recognises net/http's answer to plain HTTP sent to its
// HTTPS listener.
func plainToTLS(base string, status int, body []byte) error {
	if status != http.StatusBadRequest || !strings.HasPrefix(base, "http://") ||
		!bytes.Contains(body, []byte("HTTP request to an HTTPS server")) {
		return nil
	}
	return fmt.Errorf("the admin API at %s serves HTTPS: use --admin-url https://%s", base, strings.TrimPrefix(base, "http://"))
}

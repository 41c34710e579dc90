package daemon

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// adminTLSConfig is the admin listener's TLS configuration, nil without
// AdminTLSCert and AdminTLSKey. Its errors name the field at fault. The
// files are read again when they change, so a renewed certificate is
// served without a restart.
func adminTLSConfig(c *Config, log *slog.Logger) (*tls.Config, error) {
	switch {
	case c.AdminTLSCert == "" && c.AdminTLSKey == "":
		return nil, nil
	case c.AdminTLSKey == "":
		return nil, configErr("AdminTLSCert", "%s needs %s: the admin listener serves HTTPS with both", field("AdminTLSKey"))
	case c.AdminTLSCert == "":
		return nil, configErr("AdminTLSKey", "%s needs %s: the admin listener serves HTTPS with both", field("AdminTLSCert"))
	}
	kp := &keyPair{certFile: c.AdminTLSCert, keyFile: c.AdminTLSKey, log: log}
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

// loadKeyPair reads the certificate and its key, naming the field of the
// file at fault: the certificate is checked on its own first, so an error
// of the pair is the key's.
func loadKeyPair(certFile, keyFile string) (*tls.Certificate, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, configErr("AdminTLSCert", "%s: %v", err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, configErr("AdminTLSKey", "%s: %v", err)
	}
	var block *pem.Block
	for rest := certPEM; ; {
		if block, rest = pem.Decode(rest); block == nil || block.Type == "CERTIFICATE" {
			break
		}
	}
	if block == nil {
		return nil, configErr("AdminTLSCert", "%s %s holds no PEM certificate", certFile)
	}
	if _, err := x509.ParseCertificate(block.Bytes); err != nil {
		return nil, configErr("AdminTLSCert", "%s %s: %v", certFile, err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, configErr("AdminTLSKey", "%s %s (for %s %s): %v", keyFile, field("AdminTLSCert"), certFile, err)
	}
	return &pair, nil
}

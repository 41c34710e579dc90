package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
)

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

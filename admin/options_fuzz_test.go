package admin

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
)

// contractTLS and contractRateLimit are CONTRACT.md §9 read afresh, for
// FuzzCreateRegistration's oracle.
type contractTLS struct {
	CACertificates    string `json:"caCertificates"`
	ClientCertificate string `json:"clientCertificate"`
	ClientKey         string `json:"clientKey"`
	ServerName        string `json:"serverName"`
}

// contractOrdering is CONTRACT.md §12 read afresh.
type contractOrdering struct {
	Key         *string      `json:"key"`
	MaxInFlight *json.Number `json:"maxInFlight"`
}

type contractRateLimit struct {
	PerSecond *json.Number `json:"perSecond"`
	Burst     *json.Number `json:"burst"`
}

var (
	tokensKey  = regexp.MustCompile(`^tokens:[1-9][0-9]*(,[1-9][0-9]*)*$`)
	headerName = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
	hostLabel  = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$`)
)

// receiverOptionsValid says why r's headers, tls or rateLimit break §9.
// Beyond its letter, a header value with any control character but a tab
// is refused: no POST could carry it.
func receiverOptionsValid(r *contractRequest) error {
	seen := map[string]bool{}
	for name, value := range r.Headers {
		lower := strings.ToLower(name)
		switch {
		case !headerName.MatchString(name):
			return fmt.Errorf("header name %q", name)
		case strings.HasPrefix(lower, "webhook-") || strings.HasPrefix(lower, "ce-"):
			return fmt.Errorf("header %q is the bridge's", name)
		case strings.Contains(" content-type content-length host a2a-notification-token x-a2a-notification-token traceparent tracestate connection keep-alive proxy-connection te trailer transfer-encoding upgrade ", " "+lower+" "):
			return fmt.Errorf("header %q is the bridge's", name)
		case lower == "authorization" && r.Authentication != nil:
			return errors.New("authorization beside authentication")
		case seen[lower]:
			return fmt.Errorf("header %q twice", name)
		case strings.ContainsFunc(value, func(c rune) bool { return control(c) && c != '\t' }):
			return fmt.Errorf("header %q value", name)
		}
		seen[lower] = true
	}
	if err := tlsValid(r.TLS); err != nil {
		return err
	}
	return rateLimitValid(r.RateLimit)
}

func tlsValid(t *contractTLS) error {
	if t == nil {
		return nil
	}
	if t.CACertificates != "" && !onlyCertificates(t.CACertificates) {
		return errors.New("tls.caCertificates")
	}
	if (t.ClientCertificate == "") != (t.ClientKey == "") {
		return errors.New("tls: certificate and key apart")
	}
	if t.ClientCertificate != "" {
		if !onlyCertificates(t.ClientCertificate) {
			return errors.New("tls.clientCertificate")
		}
		if _, err := tls.X509KeyPair([]byte(t.ClientCertificate), []byte(t.ClientKey)); err != nil {
			return errors.New("tls.clientKey")
		}
	}
	if t.ServerName == "" || net.ParseIP(t.ServerName) != nil {
		return nil
	}
	if len(t.ServerName) > 253 {
		return errors.New("tls.serverName length")
	}
	for l := range strings.SplitSeq(t.ServerName, ".") {
		if !hostLabel.MatchString(l) {
			return fmt.Errorf("tls.serverName label %q", l)
		}
	}
	return nil
}

// onlyCertificates reports whether text is one or more PEM certificates
// and nothing else but whitespace.
func onlyCertificates(text string) bool {
	rest, n := []byte(text), 0
	for {
		b, r := pem.Decode(rest)
		if b == nil {
			return n > 0 && strings.TrimSpace(string(rest)) == ""
		}
		if _, err := x509.ParseCertificate(b.Bytes); b.Type != "CERTIFICATE" || err != nil {
			return false
		}
		rest, n = r, n+1
	}
}

func rateLimitValid(r *contractRateLimit) error {
	if r == nil {
		return nil
	}
	if r.PerSecond == nil {
		return errors.New("rateLimit.perSecond missing")
	}
	if p, err := r.PerSecond.Float64(); err != nil || !(p > 0 && p <= 10000) {
		return fmt.Errorf("rateLimit.perSecond %s", *r.PerSecond)
	}
	if r.Burst != nil {
		if b, err := r.Burst.Int64(); err != nil || b < 1 || b > 10000 {
			return fmt.Errorf("rateLimit.burst %s", *r.Burst)
		}
	}
	return nil
}

// orderingValid says why o breaks §12: a key of no known form, token
// positions that are not distinct numbers from 1 (written without sign or
// leading zero), a header name that is not one, a maxInFlight outside
// 1–256, or ordering beside batch.
func orderingValid(o *contractOrdering, batch bool) error {
	if o == nil {
		return nil
	}
	if batch {
		return errors.New("ordering with batch")
	}
	if o.MaxInFlight != nil {
		if n, err := o.MaxInFlight.Int64(); err != nil || n < 1 || n > 256 {
			return fmt.Errorf("ordering.maxInFlight %s", *o.MaxInFlight)
		}
	}
	if o.Key == nil {
		return errors.New("ordering.key missing")
	}
	key := *o.Key
	switch {
	case key == "registration" || key == "subject" || key == "none":
		return nil
	case strings.HasPrefix(key, "header:"):
		if !headerName.MatchString(strings.TrimPrefix(key, "header:")) {
			return fmt.Errorf("ordering.key %q", key)
		}
		return nil
	case !tokensKey.MatchString(key):
		return fmt.Errorf("ordering.key %q", key)
	}
	seen := map[int64]bool{}
	for _, tok := range strings.Split(strings.TrimPrefix(key, "tokens:"), ",") {
		n, err := strconv.ParseInt(tok, 10, 64)
		if err != nil || seen[n] {
			return fmt.Errorf("ordering.key %q", key)
		}
		seen[n] = true
	}
	return nil
}

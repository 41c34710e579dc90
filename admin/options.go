package admin

import (
	"crypto/tls"
	"maps"
	"net"
	"slices"
	"strings"

	"github.com/jetstream-bridge/bridge/cursor"
	"github.com/jetstream-bridge/bridge/webhook"
)

// Bounds of a rate limit: beyond them a limit is a typo, not a pace.
const (
	maxPerSecond = 10000
	maxBurst     = 10000
)

// rateLimitRequest uses pointers so an explicit zero is refused and an
// absent burst takes the default of 1.
type rateLimitRequest struct {
	PerSecond *float64 `json:"perSecond"`
	Burst     *int     `json:"burst"`
}

// TLS says what a registration's TLS settings hold, never the PEM text or
// the key.
type TLS struct {
	CACertificates    bool   `json:"caCertificates"`
	ClientCertificate bool   `json:"clientCertificate"`
	ServerName        string `json:"serverName,omitempty"`
}

// RateLimit is a registration's pace.
type RateLimit struct {
	PerSecond float64 `json:"perSecond"`
	Burst     int     `json:"burst"`
}

// receiverOptions checks the headers, tls and rateLimit of req into c. It
// runs after authentication and oauth2 are in c: Authorization is the
// registration's to set only when neither is.
func receiverOptions(c *cursor.Config, req *registrationRequest) error {
	h, err := validHeaders(req.Headers, c.AuthScheme != "" || c.OAuth2 != nil)
	if err != nil {
		return err
	}
	c.Headers = h
	if c.TLS, err = validTLS(req.TLS); err != nil {
		return err
	}
	c.RateLimit, err = validRateLimit(req.RateLimit)
	return err
}

// validHeaders refuses a header the bridge sets itself, a name that is
// not an HTTP token, two names for one header and a value that would
// break the header block. Messages name the header, never its value,
// which may be a credential.
func validHeaders(h map[string]string, authorizationTaken bool) (map[string]string, error) {
	if len(h) == 0 {
		return nil, nil
	}
	seen := make(map[string]string, len(h))
	for _, name := range slices.Sorted(maps.Keys(h)) {
		lower := strings.ToLower(name)
		switch {
		case !isHTTPToken(name):
			return nil, invalid("headers: %q is not an HTTP header name", name)
		case bridgeHeader(lower):
			return nil, invalid("headers: %q is set by the bridge", name)
		case lower == "authorization" && authorizationTaken:
			return nil, invalid("headers: %q is set by the bridge from authentication or oauth2", name)
		case seen[lower] != "":
			return nil, invalid("headers: %q and %q name the same header", seen[lower], name)
		case strings.ContainsAny(h[name], "\r\n\x00"):
			return nil, invalid("headers: the value of %q must not contain CR, LF or NUL", name)
		case hasControl(strings.ReplaceAll(h[name], "\t", " ")):
			return nil, invalid("headers: the value of %q must not contain control characters", name)
		}
		seen[lower] = name
	}
	return maps.Clone(h), nil
}

// bridgeHeader reports whether the bridge sets the header named lower
// itself: a registration's header by that name would forge or break a
// POST (a signature, a framing header, a hop-by-hop header the receiver
// never sees).
func bridgeHeader(lower string) bool {
	switch lower {
	case "content-type", "content-length", "host",
		"a2a-notification-token", "x-a2a-notification-token",
		"traceparent", "tracestate",
		"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade":
		return true
	}
	return strings.HasPrefix(lower, "webhook-") || strings.HasPrefix(lower, "ce-")
}

// validTLS parses the settings exactly as the sender will, so a setting
// accepted here dials as accepted. Its messages never quote PEM text.
func validTLS(r *cursor.TLS) (*cursor.TLS, error) {
	if r == nil || *r == (cursor.TLS{}) {
		return nil, nil
	}
	if _, err := webhook.ParseTLS(&tls.Config{}, (*webhook.TLS)(r)); err != nil {
		return nil, invalid("tls.%v", err)
	}
	if r.ServerName != "" && !validHostName(r.ServerName) {
		return nil, invalid("tls.serverName %q is not a host name", r.ServerName)
	}
	t := *r
	return &t, nil
}

// validHostName accepts an IP address or a DNS name: dot-separated labels
// of letters, digits and inner hyphens, each at most 63 bytes, at most 253
// in all.
func validHostName(s string) bool {
	if net.ParseIP(s) != nil {
		return true
	}
	if len(s) > 253 {
		return false
	}
	for label := range strings.SplitSeq(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			if b := label[i]; !(isIDByte(b) && b != '.' && b != '_') {
				return false
			}
		}
	}
	return true
}

func validRateLimit(r *rateLimitRequest) (*cursor.RateLimit, error) {
	if r == nil {
		return nil, nil
	}
	if r.PerSecond == nil || !(*r.PerSecond > 0 && *r.PerSecond <= maxPerSecond) {
		return nil, invalid("rateLimit.perSecond must be greater than 0 and at most %d", maxPerSecond)
	}
	burst := 1
	if r.Burst != nil {
		if burst = *r.Burst; burst < 1 || burst > maxBurst {
			return nil, invalid("rateLimit.burst must be 1 to %d, not %d", maxBurst, burst)
		}
	}
	return &cursor.RateLimit{PerSecond: *r.PerSecond, Burst: burst}, nil
}

// tlsView and rateLimitView are what answers show of a registration's
// options.
func tlsView(t *cursor.TLS) *TLS {
	if t == nil {
		return nil
	}
	return &TLS{CACertificates: t.CACertificates != "", ClientCertificate: t.ClientCertificate != "", ServerName: t.ServerName}
}

func rateLimitView(r *cursor.RateLimit) *RateLimit {
	if r == nil {
		return nil
	}
	return &RateLimit{PerSecond: r.PerSecond, Burst: max(r.Burst, 1)}
}

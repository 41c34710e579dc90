// Package netguard decides which webhook URLs the bridge may register and
// which addresses it may dial for them.
//
// A2A registrations are supplied by callers the operator does not control,
// so a URL is judged twice: once at registration (CheckURL), to refuse it
// with a message, and again at every connection (DialContext), on the very
// address being dialled, because DNS answers change between the two and a
// name that was public at registration can point at 127.0.0.1 at send time
// (DNS rebinding). Outbox URLs are the operator's own and pass with the
// basic checks only.
//
// The package only judges and dials; it must never send a request, follow a
// redirect or log, and its errors must never carry a URL's userinfo, path or
// query, which may hold credentials.
package netguard

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"time"
)

// DefaultResolveTimeout bounds one name resolution. A name that does not
// resolve within it is refused at registration ("does not resolve"), so a
// registration call cannot hang on a slow or hostile name server.
const DefaultResolveTimeout = 5 * time.Second

// MaxURLLength is the longest URL accepted, in bytes.
const MaxURLLength = 2048

// Resolver looks up the addresses of a host name. *net.Resolver satisfies
// it; tests inject their own to play DNS answers that change over time.
type Resolver interface {
	LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error)
}

// Policy is the set of rules for one bridge process. It is immutable once
// built by NewPolicy and safe for concurrent use.
type Policy struct {
	// allowHosts holds the normalised A2A host grants; empty grants any
	// public host.
	allowHosts        map[string]struct{}
	allowLoopbackHTTP bool
	resolver          Resolver
	resolveTimeout    time.Duration
	denied            []deniedRange
	global6           netip.Prefix
}

// Option configures a Policy.
type Option func(*Policy)

// WithAllowHosts grants A2A registrations only the given hosts: exact,
// case-insensitive matches on the URL's host, any port. Without it every
// public host is granted.
func WithAllowHosts(hosts ...string) Option {
	return func(p *Policy) {
		for _, h := range hosts {
			if h = normalizeGrant(h); h != "" {
				p.allowHosts[h] = struct{}{}
			}
		}
	}
}

// WithAllowLoopbackHTTP lets A2A registrations reach loopback addresses
// (127.0.0.0/8, ::1, localhost), over http:// as well as https://. Meant
// for tests and demos; every other private address stays refused.
func WithAllowLoopbackHTTP(allow bool) Option {
	return func(p *Policy) { p.allowLoopbackHTTP = allow }
}

// WithResolver replaces net.DefaultResolver.
func WithResolver(r Resolver) Option {
	return func(p *Policy) {
		if r != nil {
			p.resolver = r
		}
	}
}

// WithResolveTimeout replaces DefaultResolveTimeout; d <= 0 keeps it.
func WithResolveTimeout(d time.Duration) Option {
	return func(p *Policy) {
		if d > 0 {
			p.resolveTimeout = d
		}
	}
}

// NewPolicy builds a Policy. With no options it grants any public host over
// https for A2A and resolves names with net.DefaultResolver.
func NewPolicy(opts ...Option) *Policy {
	p := &Policy{
		allowHosts:     make(map[string]struct{}),
		resolver:       net.DefaultResolver,
		resolveTimeout: DefaultResolveTimeout,
		denied:         deniedRanges(),
		global6:        netip.MustParsePrefix("2000::/3"),
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

// AllowsLoopback reports whether A2A registrations may reach loopback
// addresses, so the daemon can warn about it at start.
func (p *Policy) AllowsLoopback() bool { return p.allowLoopbackHTTP }

// granted reports whether host may be used by an A2A registration.
func (p *Policy) granted(host string) bool {
	if len(p.allowHosts) == 0 {
		return true
	}
	_, ok := p.allowHosts[normalizeGrant(host)]
	return ok
}

// normalizeGrant lowercases a host and strips IPv6 brackets and a port, so
// "Hooks.Example:8443" and "hooks.example" name the same grant.
func normalizeGrant(h string) string {
	h = strings.TrimSpace(h)
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	}
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	return strings.ToLower(h)
}

// isLocalhostName reports whether host is the reserved name localhost
// (RFC 6761), which must only ever resolve to loopback addresses.
func isLocalhostName(host string) bool {
	return strings.EqualFold(strings.TrimSuffix(host, "."), "localhost")
}

package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"github.com/jetstream-bridge/bridge/projection"
)

// RefusedError is a URL or an address the policy refuses. Callers tell it
// apart with errors.As: the admin API answers it with 400, the sender
// classifies it as "refused".
//
// Permanent separates what can never pass (a bad scheme, a host not
// granted, a literal private address: the URL itself is wrong, so a
// delivery parks at once) from what may pass later (a name that resolves to
// a private address or not at all: DNS changes, and a blip must not park a
// registration on its first failure, so the sender retries until the
// attempt ceiling).
type RefusedError struct {
	// Host is the URL's host, or empty when the URL has none. Never the
	// userinfo, path or query.
	Host string
	// Reason is the whole message, e.g. "url must use https for a2a
	// registrations".
	Reason    string
	Permanent bool
}

func (e *RefusedError) Error() string { return e.Reason }

func refuse(host, format string, args ...any) *RefusedError {
	return &RefusedError{Host: host, Reason: fmt.Sprintf(format, args...), Permanent: true}
}

func refuseForNow(host, format string, args ...any) *RefusedError {
	return &RefusedError{Host: host, Reason: fmt.Sprintf(format, args...)}
}

// ParseURL parses raw and applies every rule that needs no DNS: for both
// namespaces an absolute http or https URL with a host, no userinfo and at
// most MaxURLLength bytes; for A2A in addition https (http only to
// loopback when allowed), a granted ASCII host, no non-canonical IPv4
// spelling and no literal private address. Every refusal is a permanent
// *RefusedError.
//
// The sender asks before every POST (remembering the verdict for as long
// as the policy, and so its grants, lives), so a URL that stopped passing
// because the grants changed is refused for good instead of retried.
func (p *Policy) ParseURL(ns projection.Namespace, raw string) (*url.URL, error) {
	if !ns.Valid() {
		return nil, refuse("", "namespace %q is neither outbox nor a2a", clip(string(ns)))
	}
	u, err := parseBasic(raw)
	if err != nil {
		return nil, err
	}
	if ns == projection.A2A {
		if err := p.checkA2AStatic(u); err != nil {
			return nil, err
		}
	}
	return u, nil
}

// parseBasic holds the rules both namespaces share.
func parseBasic(raw string) (*url.URL, error) {
	switch {
	case raw == "":
		return nil, refuse("", "url is empty")
	case len(raw) > MaxURLLength:
		return nil, refuse("", "url is %d bytes long; the limit is %d", len(raw), MaxURLLength)
	}
	u, err := url.Parse(raw)
	if err != nil {
		// The inner error only: url.Error quotes the whole URL, userinfo
		// and query included.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, refuse("", "url is not valid: %v", err)
	}
	if u.Scheme == "" || u.Opaque != "" {
		return nil, refuse("", "url must be absolute, starting with https:// or http://")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, refuse("", "url scheme %q is not allowed; use https or http", clip(u.Scheme))
	}
	if u.User != nil {
		return nil, refuse("", "url must not contain userinfo (user:password@); use authentication instead")
	}
	host := u.Hostname()
	if host == "" {
		return nil, refuse("", "url has no host")
	}
	if port := u.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return nil, refuse(host, "url port %q is not between 1 and 65535", clip(port))
		}
	}
	return u, nil
}

// checkA2AStatic holds the A2A rules that need no DNS.
func (p *Policy) checkA2AStatic(u *url.URL) error {
	host := u.Hostname()
	if !isASCII(host) {
		return refuse(host, "url host %q must be ASCII; use its punycode (xn--) form", clip(host))
	}
	if !p.granted(host) {
		return refuse(host, "url host %q is not granted for a2a registrations (see --a2a-allow-hosts)", host)
	}
	lit, isLit, err := literal(host)
	if err != nil {
		return err
	}
	if u.Scheme == "http" && !(p.allowLoopbackHTTP && (isLocalhostName(host) || isLit && lit.Unmap().IsLoopback())) {
		return refuse(host, "url must use https for a2a registrations")
	}
	if isLit {
		if why := p.judge(lit); why != "" {
			return refuse(host, "url host is a private address %s (%s)", lit, why)
		}
	}
	return nil
}

// literal parses host as an IP address. A host that ends in a number but
// is not canonical dotted-decimal IPv4 is refused outright: see
// looksLikeIPv4.
func literal(host string) (netip.Addr, bool, error) {
	if strings.Contains(host, ":") {
		a, err := netip.ParseAddr(host)
		if err != nil {
			return netip.Addr{}, false, refuse(host, "url host %q is not a valid IPv6 address", host)
		}
		return a, true, nil
	}
	if !looksLikeIPv4(host) {
		return netip.Addr{}, false, nil
	}
	a, ok := canonicalIPv4(host)
	if !ok {
		return netip.Addr{}, false, refuse(host, "url host %q is a non-canonical IPv4 address; write it as four decimal numbers (a.b.c.d)", host)
	}
	return a, true, nil
}

// CheckURL is the registration-time judgement: ParseURL, and for an A2A
// host name a resolution, bounded by the resolve timeout, in which every
// address must be public. A name that does not resolve, or resolves to a
// private address, is refused with a non-permanent *RefusedError: it may be
// registered once DNS says otherwise. A cancelled ctx is returned as is.
func (p *Policy) CheckURL(ctx context.Context, ns projection.Namespace, raw string) error {
	u, err := p.ParseURL(ns, raw)
	if err != nil || ns != projection.A2A {
		return err
	}
	host := u.Hostname()
	if _, isLit, _ := literal(host); isLit {
		return nil // judged by ParseURL
	}
	addrs, err := p.resolve(ctx, host)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("checking url host %q: %w", host, ctx.Err())
		}
		return refuseForNow(host, "url host %q does not resolve: %v", host, err)
	}
	return p.judgeResolved(host, addrs)
}

// judgeResolved refuses the whole name when any of its addresses is
// private: the dialler may pick any of them.
func (p *Policy) judgeResolved(host string, addrs []netip.Addr) error {
	for _, a := range addrs {
		if why := p.judge(a); why != "" {
			return refuseForNow(host, "url host %q resolves to a private address %s (%s)", host, a.WithZone(""), why)
		}
		if isLocalhostName(host) && !a.Unmap().IsLoopback() {
			return refuseForNow(host, "url host %q resolves to %s, which is not a loopback address", host, a.WithZone(""))
		}
	}
	return nil
}

// resolve looks host up within the resolve timeout. Its error says what
// went wrong without the name server's address.
func (p *Policy) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	rctx, cancel := context.WithTimeout(ctx, p.resolveTimeout)
	defer cancel()
	ips, err := p.resolver.LookupIPAddr(rctx, host)
	if err != nil {
		var de *net.DNSError
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case rctx.Err() != nil:
			return nil, fmt.Errorf("no answer within %s", p.resolveTimeout)
		case errors.As(err, &de) && de.Err != "":
			return nil, errors.New(de.Err)
		}
		return nil, err
	}
	addrs := make([]netip.Addr, 0, len(ips))
	for _, ip := range ips {
		// Unmap: resolvers hand IPv4 answers back in 16-byte form.
		if a, ok := netip.AddrFromSlice(ip.IP); ok {
			addrs = append(addrs, a.Unmap().WithZone(ip.Zone))
		}
	}
	if len(addrs) == 0 {
		return nil, errors.New("no addresses")
	}
	return addrs, nil
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// clip bounds what a refusal echoes of its input, so a 2 KiB scheme cannot
// fill a log line.
func clip(s string) string {
	const max = 256
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}

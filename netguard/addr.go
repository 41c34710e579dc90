package netguard

import (
	"net/netip"
	"strings"
)

// deniedRange is a block of addresses no A2A webhook may reach, with the
// name an operator reads in the refusal.
type deniedRange struct {
	prefix netip.Prefix
	name   string
}

// deniedRanges are the special-purpose blocks of the IANA registries that
// are not publicly routable. Each Policy keeps its own copy, built once by
// NewPolicy, so the package holds no mutable state.
func deniedRanges() []deniedRange {
	return []deniedRange{
		{netip.MustParsePrefix("0.0.0.0/8"), "this network"},
		{netip.MustParsePrefix("10.0.0.0/8"), "private-use"},
		{netip.MustParsePrefix("100.64.0.0/10"), "shared address space"},
		{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
		{netip.MustParsePrefix("169.254.0.0/16"), "link-local"},
		{netip.MustParsePrefix("172.16.0.0/12"), "private-use"},
		{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol assignments"},
		{netip.MustParsePrefix("192.0.2.0/24"), "documentation"},
		{netip.MustParsePrefix("192.88.99.0/24"), "6to4 relay anycast"},
		{netip.MustParsePrefix("192.168.0.0/16"), "private-use"},
		{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
		{netip.MustParsePrefix("198.51.100.0/24"), "documentation"},
		{netip.MustParsePrefix("203.0.113.0/24"), "documentation"},
		{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
		{netip.MustParsePrefix("240.0.0.0/4"), "reserved"},
		{netip.MustParsePrefix("::/128"), "unspecified"},
		{netip.MustParsePrefix("::1/128"), "loopback"},
		{netip.MustParsePrefix("64:ff9b::/96"), "NAT64"},
		{netip.MustParsePrefix("64:ff9b:1::/48"), "local-use NAT64"},
		{netip.MustParsePrefix("100::/64"), "discard-only"},
		{netip.MustParsePrefix("2001::/23"), "IETF protocol assignments"},
		{netip.MustParsePrefix("2001:db8::/32"), "documentation"},
		{netip.MustParsePrefix("2002::/16"), "6to4"},
		{netip.MustParsePrefix("3fff::/20"), "documentation"},
		{netip.MustParsePrefix("fc00::/7"), "unique local"},
		{netip.MustParsePrefix("fe80::/10"), "link-local"},
		{netip.MustParsePrefix("fec0::/10"), "site-local"},
		{netip.MustParsePrefix("ff00::/8"), "multicast"},
	}
}

// judge says why a is not public, or "" when it is. Loopback passes when
// the policy allows it. The zone is dropped first, because
// netip.Prefix.Contains never matches a zoned address and fe80::1%eth0
// would otherwise pass as public; IPv4-mapped addresses are unmapped, so
// ::ffff:10.0.0.1 is judged as 10.0.0.1.
func (p *Policy) judge(a netip.Addr) string {
	if !a.IsValid() {
		return "invalid"
	}
	a = a.WithZone("").Unmap()
	if p.allowLoopbackHTTP && a.IsLoopback() {
		return ""
	}
	for _, r := range p.denied {
		if r.prefix.Contains(a) {
			return r.name
		}
	}
	// 2000::/3 is the only IPv6 block allocated for public unicast: an
	// address outside it (IPv4-compatible ::a.b.c.d, unallocated space) is
	// not public whatever the list says.
	if a.Is6() && !p.global6.Contains(a) {
		return "not global unicast"
	}
	return ""
}

// looksLikeIPv4 reports whether host ends in a number, which is how the
// WHATWG URL standard (and so every browser and most HTTP stacks, and
// inet_aton beneath getaddrinfo) decides a host is an IPv4 address: its last
// label is all decimal digits or 0x followed by hex digits. Such a host that
// is not canonical dotted-decimal (2130706433, 0x7f.1, 0177.0.0.1, 127.1)
// means different addresses to different parsers, so it is refused rather
// than guessed at.
func looksLikeIPv4(host string) bool {
	host = strings.TrimSuffix(host, ".")
	last := host[strings.LastIndexByte(host, '.')+1:]
	if last == "" {
		return false
	}
	if allDigits(last) {
		return true
	}
	if len(last) >= 2 && last[0] == '0' && (last[1] == 'x' || last[1] == 'X') {
		return allHex(last[2:])
	}
	return false
}

// canonicalIPv4 parses host as dotted-decimal IPv4 with exactly four parts
// and no leading zeros; anything else is not canonical.
func canonicalIPv4(host string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(host)
	if err != nil || !a.Is4() {
		return netip.Addr{}, false
	}
	return a, true
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func allHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i] | 0x20
		if (s[i] < '0' || s[i] > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

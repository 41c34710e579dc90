package netguard

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jetstream-bridge/bridge/projection"
)

// secretMark stands for a credential a caller put in a URL; no refusal may
// repeat it.
const secretMark = "s3cr3t"

func testPolicy(opts ...Option) *Policy {
	base := []Option{WithResolver(newFakeDNS()), WithResolveTimeout(50 * time.Millisecond)}
	return NewPolicy(append(base, opts...)...)
}

type refusal struct {
	url       string
	want      string // in the message
	permanent bool
}

func a2aRefusals() []refusal {
	long := "https://public.test/" + strings.Repeat("a", MaxURLLength)
	return []refusal{
		// Shape.
		{"", "url is empty", true},
		{long, "bytes long; the limit is 2048", true},
		{"ftp://public.test/file", `scheme "ftp" is not allowed`, true},
		{"file:///etc/passwd", `scheme "file" is not allowed`, true},
		{"gopher://public.test/", `scheme "gopher" is not allowed`, true},
		{"javascript:alert(1)", "must be absolute", true},
		{"//public.test/hook", "must be absolute", true},
		{"/relative/hook", "must be absolute", true},
		{"https://user:" + secretMark + "@public.test/", "must not contain userinfo", true},
		{"https://" + secretMark + "@public.test/", "must not contain userinfo", true},
		{"https:///hook", "has no host", true},
		{"https://:443/hook", "has no host", true},
		{"https://public.test:0/", "not between 1 and 65535", true},
		{"https://public.test:65536/", "not between 1 and 65535", true},
		{"https://pub lic.test/", "url is not valid", true},
		{"https://[::1/", "url is not valid", true},
		{"https://public.test/%zz?token=" + secretMark, "url is not valid", true},
		{"http://public.test/hook?token=" + secretMark, "url must use https for a2a registrations", true},
		{"http://93.184.216.34/", "url must use https for a2a registrations", true},
		{"https://bücher.test/", "must be ASCII", true},
		// IPv4 in other spellings.
		{"https://2130706433/", "non-canonical IPv4 address", true},
		{"https://0x7f.0.0.1/", "non-canonical IPv4 address", true},
		{"https://0x7f000001/", "non-canonical IPv4 address", true},
		{"https://0177.0.0.1/", "non-canonical IPv4 address", true},
		{"https://127.1/", "non-canonical IPv4 address", true},
		{"https://127.0.1/", "non-canonical IPv4 address", true},
		{"https://127.0.0.1./", "non-canonical IPv4 address", true},
		{"https://1.2.3.4.5/", "non-canonical IPv4 address", true},
		{"https://256.1.1.1/", "non-canonical IPv4 address", true},
		{"https://0/", "non-canonical IPv4 address", true},
		{"https://0x/", "non-canonical IPv4 address", true},
		{"https://example.0x10/", "non-canonical IPv4 address", true},
		// Every IPv4 range, literal.
		{"https://0.0.0.0/", "private address 0.0.0.0 (this network)", true},
		{"https://10.0.0.1/", "private address 10.0.0.1 (private-use)", true},
		{"https://100.64.0.1/", "private address 100.64.0.1 (shared address space)", true},
		{"https://127.0.0.1:8443/", "private address 127.0.0.1 (loopback)", true},
		{"https://127.255.255.254/", "(loopback)", true},
		{"https://169.254.169.254/latest/meta-data/", "private address 169.254.169.254 (link-local)", true},
		{"https://172.16.0.1/", "private address 172.16.0.1 (private-use)", true},
		{"https://172.31.255.255/", "(private-use)", true},
		{"https://192.0.0.8/", "(IETF protocol assignments)", true},
		{"https://192.0.2.1/", "private address 192.0.2.1 (documentation)", true},
		{"https://192.88.99.1/", "(6to4 relay anycast)", true},
		{"https://192.168.1.1/", "private address 192.168.1.1 (private-use)", true},
		{"https://198.18.0.1/", "(benchmarking)", true},
		{"https://198.19.255.255/", "(benchmarking)", true},
		{"https://198.51.100.1/", "(documentation)", true},
		{"https://203.0.113.1/", "(documentation)", true},
		{"https://224.0.0.1/", "(multicast)", true},
		{"https://239.255.255.250/", "(multicast)", true},
		{"https://240.0.0.1/", "(reserved)", true},
		{"https://255.255.255.255/", "(reserved)", true},
		// Every IPv6 range, literal, and the mapped forms.
		{"https://[::]/", "private address :: (unspecified)", true},
		{"https://[::1]/", "private address ::1 (loopback)", true},
		{"https://[::ffff:127.0.0.1]/", "private address ::ffff:127.0.0.1 (loopback)", true},
		{"https://[::ffff:7f00:1]/", "(loopback)", true},
		{"https://[::ffff:a9fe:a9fe]/", "(link-local)", true},
		{"https://[::127.0.0.1]/", "(not global unicast)", true},
		{"https://[64:ff9b::a00:1]/", "(NAT64)", true},
		{"https://[64:ff9b:1::1]/", "(local-use NAT64)", true},
		{"https://[100::1]/", "(discard-only)", true},
		{"https://[2001::1]/", "(IETF protocol assignments)", true},
		{"https://[2001:db8::1]/", "(documentation)", true},
		{"https://[2002:c000:204::1]/", "(6to4)", true},
		{"https://[fc00::1]/", "(unique local)", true},
		{"https://[fd12:3456::1]/", "(unique local)", true},
		{"https://[fe80::1]/", "(link-local)", true},
		{"https://[fe80::1%25eth0]/", "(link-local)", true},
		{"https://[fec0::1]/", "(site-local)", true},
		{"https://[ff02::1]/", "(multicast)", true},
		{"https://[::1%25lo]:8443/", "(loopback)", true},
		// Names, through the resolver: DNS may change, so not permanent.
		{"https://loopback.test/hook", `"loopback.test" resolves to a private address 127.0.0.1 (loopback)`, false},
		{"https://localhost:8443/", "resolves to a private address 127.0.0.1 (loopback)", false},
		{"https://private.test/", "resolves to a private address 10.1.2.3", false},
		{"https://metadata.test/", "resolves to a private address 169.254.169.254", false},
		{"https://mixed.test/", "resolves to a private address 192.168.1.1", false},
		{"https://mapped.test/", "resolves to a private address 10.0.0.1", false},
		{"https://ula.test/", "resolves to a private address fd00::1", false},
		{"https://nxdomain.test/", `"nxdomain.test" does not resolve: no such host`, false},
		{"https://hang.test/?token=" + secretMark, `"hang.test" does not resolve: no answer within 50ms`, false},
	}
}

func TestCheckURLRefusesForA2A(t *testing.T) {
	p := testPolicy()
	cases := a2aRefusals()
	if len(cases) < 40 {
		t.Fatalf("battery has %d refusals, want at least 40", len(cases))
	}
	for _, c := range cases {
		t.Run(c.url, func(t *testing.T) {
			err := p.CheckURL(context.Background(), projection.A2A, c.url)
			assertRefused(t, err, c.want, c.permanent)
		})
	}
}

func assertRefused(t *testing.T, err error, want string, permanent bool) {
	t.Helper()
	var re *RefusedError
	if !errors.As(err, &re) {
		t.Fatalf("err = %v, want a *RefusedError", err)
	}
	if !strings.Contains(re.Error(), want) {
		t.Errorf("message %q does not say %q", re.Error(), want)
	}
	if re.Permanent != permanent {
		t.Errorf("Permanent = %t, want %t (%s)", re.Permanent, permanent, re)
	}
	if strings.Contains(re.Error(), secretMark) || strings.Contains(re.Host, secretMark) {
		t.Errorf("refusal repeats a credential from the URL: %q", re.Error())
	}
}

func TestCheckURLAcceptsPublicA2A(t *testing.T) {
	p := testPolicy()
	for _, u := range []string{
		"https://93.184.216.34/hook",
		"https://93.184.216.34:8443/hook",
		"https://[2606:2800:220:1:248:1893:25c8:1946]:8443/",
		"https://public.test/hook?x=1#frag",
		"HTTPS://PUBLIC.test/",
		"https://v6public.test/",
		"https://dual.test/",
	} {
		if err := p.CheckURL(context.Background(), projection.A2A, u); err != nil {
			t.Errorf("CheckURL(a2a, %q) = %v, want accepted", u, err)
		}
	}
}

func TestCheckURLOutboxAllowsAnyAddress(t *testing.T) {
	p := testPolicy()
	for _, u := range []string{
		"http://127.0.0.1:8080/hook",
		"http://10.0.0.1/",
		"http://[::1]:9000/",
		"http://localhost/",
		"http://2130706433/", // the operator's own business
		"https://private.test/",
		"http://nxdomain.test/", // outbox never resolves at registration
	} {
		if err := p.CheckURL(context.Background(), projection.Outbox, u); err != nil {
			t.Errorf("CheckURL(outbox, %q) = %v, want accepted", u, err)
		}
	}
	for _, c := range []refusal{
		{"ftp://127.0.0.1/", `scheme "ftp" is not allowed`, true},
		{"http://user:" + secretMark + "@127.0.0.1/", "must not contain userinfo", true},
		{"http:///x", "has no host", true},
		{"", "url is empty", true},
	} {
		assertRefused(t, p.CheckURL(context.Background(), projection.Outbox, c.url), c.want, c.permanent)
	}
}

func TestCheckURLUnknownNamespace(t *testing.T) {
	err := testPolicy().CheckURL(context.Background(), "inbox", "https://public.test/")
	assertRefused(t, err, `namespace "inbox" is neither outbox nor a2a`, true)
}

func TestCheckURLAllowHosts(t *testing.T) {
	p := testPolicy(WithAllowHosts("Public.Test:8443", "[2606:2800:220:1:248:1893:25c8:1946]"))
	for _, u := range []string{
		"https://public.test/",
		"https://PUBLIC.TEST:9999/hook",
		"https://[2606:2800:220:1:248:1893:25c8:1946]/",
	} {
		if err := p.CheckURL(context.Background(), projection.A2A, u); err != nil {
			t.Errorf("CheckURL(%q) = %v, want granted", u, err)
		}
	}
	for _, u := range []string{"https://v6public.test/", "https://sub.public.test/", "https://public.test./", "https://93.184.216.34/"} {
		assertRefused(t, p.CheckURL(context.Background(), projection.A2A, u), "is not granted for a2a registrations", true)
	}
	// Grants do not touch outbox.
	if err := p.CheckURL(context.Background(), projection.Outbox, "http://10.0.0.1/"); err != nil {
		t.Errorf("outbox refused under a2a grants: %v", err)
	}
}

func TestCheckURLLoopbackAllowed(t *testing.T) {
	p := testPolicy(WithAllowLoopbackHTTP(true))
	if !p.AllowsLoopback() {
		t.Fatal("AllowsLoopback() = false")
	}
	for _, u := range []string{
		"http://127.0.0.1:8080/hook",
		"http://127.9.9.9/",
		"http://[::1]:8080/",
		"http://localhost:8080/",
		"https://localhost/",
		"https://127.0.0.1/",
		"https://loopback.test/",
		"https://public.test/",
	} {
		if err := p.CheckURL(context.Background(), projection.A2A, u); err != nil {
			t.Errorf("CheckURL(%q) = %v, want accepted with loopback allowed", u, err)
		}
	}
	for _, c := range []refusal{
		{"http://public.test/", "url must use https", true},
		{"http://loopback.test/", "url must use https", true}, // a name other than localhost
		{"http://10.0.0.1/", "url must use https", true},
		{"https://10.0.0.1/", "private address 10.0.0.1", true},
		{"https://private.test/", "resolves to a private address 10.1.2.3", false},
		{"https://2130706433/", "non-canonical IPv4 address", true},
	} {
		assertRefused(t, p.CheckURL(context.Background(), projection.A2A, c.url), c.want, c.permanent)
	}
}

func TestCheckURLLocalhostMustBeLoopback(t *testing.T) {
	dns := newFakeDNS()
	dns.set("localhost", "93.184.216.34")
	p := NewPolicy(WithResolver(dns), WithAllowLoopbackHTTP(true))
	err := p.CheckURL(context.Background(), projection.A2A, "http://localhost:8080/")
	assertRefused(t, err, "not a loopback address", false)
}

func TestCheckURLCancelledContextIsNotARefusal(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := testPolicy().CheckURL(ctx, projection.A2A, "https://hang.test/")
	var re *RefusedError
	if errors.As(err, &re) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled and no refusal", err)
	}
}

func TestNewDefaults(t *testing.T) {
	p := NewPolicy()
	if p.resolveTimeout != DefaultResolveTimeout || DefaultResolveTimeout != 5*time.Second {
		t.Errorf("resolve timeout = %s, want 5s", p.resolveTimeout)
	}
	if p.resolver == nil || p.AllowsLoopback() || len(p.allowHosts) != 0 {
		t.Errorf("NewPolicy() = %+v, want default resolver, no loopback, no grants", p)
	}
	if got := p.String(); got != "a2a: any public host, loopback allowed: false" {
		t.Errorf("String() = %q", got)
	}
}

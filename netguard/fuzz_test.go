package netguard

import (
	"context"
	"net/netip"
	"net/url"
	"testing"
	"time"

	"github.com/jetstream-bridge/bridge/projection"
)

// FuzzCheckURL holds the guard to its promises on any input: no panic, a
// refusal always says something, and an accepted A2A URL is https, has a
// host, no userinfo, and no literal private or non-canonical address.
func FuzzCheckURL(f *testing.F) {
	for _, c := range a2aRefusals() {
		f.Add(c.url, true)
	}
	f.Add("https://public.test/hook", true)
	f.Add("http://127.0.0.1:8080/", false)
	strict := NewPolicy()
	p := NewPolicy(WithResolver(newFakeDNS()), WithResolveTimeout(10*time.Millisecond))
	f.Fuzz(func(t *testing.T, raw string, a2a bool) {
		ns := projection.Outbox
		if a2a {
			ns = projection.A2A
		}
		err := p.CheckURL(context.Background(), ns, raw)
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("refusal of %q has no message", raw)
			}
			return
		}
		u, perr := url.Parse(raw)
		if perr != nil || len(raw) > MaxURLLength || u.Hostname() == "" || u.User != nil {
			t.Fatalf("accepted %q: parse err %v, host %q, userinfo %v", raw, perr, u.Hostname(), u.User != nil)
		}
		if !a2a {
			return
		}
		if u.Scheme != "https" {
			t.Fatalf("a2a accepted scheme %q in %q", u.Scheme, raw)
		}
		host := u.Hostname()
		if a, err := netip.ParseAddr(host); err == nil && strict.judge(a) != "" {
			t.Fatalf("a2a accepted private literal %s in %q", a, raw)
		}
		if looksLikeIPv4(host) {
			if _, ok := canonicalIPv4(host); !ok {
				t.Fatalf("a2a accepted non-canonical IPv4 %q", host)
			}
		}
	})
}

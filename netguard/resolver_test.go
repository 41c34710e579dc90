package netguard

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeDNS answers from a table the test can change between calls, which is
// how DNS rebinding looks from the bridge: the same name, a new answer.
type fakeDNS struct {
	mu      sync.Mutex
	answers map[string][]string
	calls   int
}

func newFakeDNS() *fakeDNS {
	return &fakeDNS{answers: map[string][]string{
		"public.test":   {"93.184.216.34"},
		"v6public.test": {"2606:2800:220:1:248:1893:25c8:1946"},
		"dual.test":     {"93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946"},
		"loopback.test": {"127.0.0.1"},
		"private.test":  {"10.1.2.3"},
		"metadata.test": {"169.254.169.254"},
		"mixed.test":    {"93.184.216.34", "192.168.1.1"},
		"mapped.test":   {"::ffff:10.0.0.1"},
		"ula.test":      {"fd00::1"},
		"localhost":     {"127.0.0.1", "::1"},
	}}
}

func (f *fakeDNS) set(host string, addrs ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answers[host] = addrs
}

func (f *fakeDNS) LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error) {
	f.mu.Lock()
	f.calls++
	addrs, ok := f.answers[strings.ToLower(host)]
	f.mu.Unlock()
	switch {
	case host == "hang.test":
		<-ctx.Done()
		return nil, ctx.Err()
	case !ok:
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	out := make([]net.IPAddr, 0, len(addrs))
	for _, a := range addrs {
		out = append(out, net.IPAddr{IP: net.ParseIP(a)})
	}
	return out, nil
}

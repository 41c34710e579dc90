package netguard

import (
	"context"
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jetstream-bridge/bridge/projection"
)

// listen opens a loopback listener and reports, on the returned function,
// whether anything connected to it.
func listen(t *testing.T) (port string, connected func() bool) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan struct{}, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- struct{}{}
			_ = c.Close()
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); <-done })
	_, port, _ = net.SplitHostPort(ln.Addr().String())
	return port, func() bool {
		// The dial under test has returned by now: a connection it made
		// was completed by the kernel before it returned, and Accept
		// picks it up well within this grace.
		select {
		case <-accepted:
			return true
		case <-time.After(200 * time.Millisecond):
			return false
		}
	}
}

func TestDialRefusesDNSRebinding(t *testing.T) {
	dns := newFakeDNS()
	dns.set("rebind.test", "93.184.216.34")
	p := NewPolicy(WithResolver(dns), WithAllowHosts("rebind.test"))
	port, connected := listen(t)

	if err := p.CheckURL(context.Background(), projection.A2A, "https://rebind.test:"+port+"/hook"); err != nil {
		t.Fatalf("registration refused while the name was public: %v", err)
	}
	dns.set("rebind.test", "127.0.0.1")

	conn, err := p.DialContext(projection.A2A, nil)(context.Background(), "tcp", "rebind.test:"+port)
	if err == nil {
		_ = conn.Close()
		t.Fatal("dial to a name rebound to 127.0.0.1 succeeded")
	}
	var re *RefusedError
	if !errors.As(err, &re) || re.Permanent {
		t.Fatalf("err = %v, want a non-permanent *RefusedError", err)
	}
	if !strings.Contains(err.Error(), `"rebind.test" resolves to a private address 127.0.0.1 (loopback)`) {
		t.Errorf("message %q does not name the private address", err)
	}
	if connected() {
		t.Error("the guard refused, yet a connection reached the private listener")
	}
}

func TestDialReachesLoopbackWhenAllowed(t *testing.T) {
	dns := newFakeDNS()
	dns.set("hook.test", "127.0.0.1")
	p := NewPolicy(WithResolver(dns), WithAllowLoopbackHTTP(true))
	port, connected := listen(t)
	dial := p.DialContext(projection.A2A, nil)

	for _, addr := range []string{"hook.test:" + port, "127.0.0.1:" + port, "localhost:" + port} {
		conn, err := dial(context.Background(), "tcp", addr)
		if err != nil {
			t.Fatalf("dial %s: %v", addr, err)
		}
		_ = conn.Close()
		if !connected() {
			t.Errorf("dial %s returned a connection the listener never saw", addr)
		}
	}
}

func TestDialRefusesForGood(t *testing.T) {
	p := NewPolicy(WithResolver(newFakeDNS()), WithAllowHosts("public.test", "10.0.0.1", "2130706433"))
	dial := p.DialContext(projection.A2A, nil)
	for addr, want := range map[string]string{
		"other.test:443": `host "other.test" is not granted`,
		"10.0.0.1:80":    "host is a private address 10.0.0.1 (private-use)",
		"2130706433:80":  "non-canonical IPv4 address",
		"public.test":    "dial address is not host:port",
	} {
		_, err := dial(context.Background(), "tcp", addr)
		var re *RefusedError
		if !errors.As(err, &re) || !re.Permanent || !strings.Contains(err.Error(), want) {
			t.Errorf("dial %s = %v, want a permanent refusal saying %q", addr, err, want)
		}
	}
}

func TestDialNameFailureIsATransportError(t *testing.T) {
	p := NewPolicy(WithResolver(newFakeDNS()), WithResolveTimeout(50*time.Millisecond))
	dial := p.DialContext(projection.A2A, nil)
	for addr, want := range map[string]string{
		"nxdomain.test:443": "lookup nxdomain.test: no such host",
		"hang.test:443":     "lookup hang.test: no answer within 50ms",
	} {
		_, err := dial(context.Background(), "tcp", addr)
		var re *RefusedError
		var de *net.DNSError
		if errors.As(err, &re) || !errors.As(err, &de) || !de.IsTemporary || err.Error() != want {
			t.Errorf("dial %s = %v, want a temporary DNS error %q", addr, err, want)
		}
	}
}

func TestDialOutboxIsUnguarded(t *testing.T) {
	p := NewPolicy(WithResolver(newFakeDNS()))
	port, connected := listen(t)
	conn, err := p.DialContext(projection.Outbox, nil)(context.Background(), "tcp", "127.0.0.1:"+port)
	if err != nil {
		t.Fatalf("outbox dial to loopback: %v", err)
	}
	_ = conn.Close()
	if !connected() {
		t.Error("outbox dial never reached the listener")
	}
}

// The control hook is the last line: it judges the socket's real peer, and
// its refusal survives net's error wrapping.
func TestControlJudgesTheRealPeer(t *testing.T) {
	p := NewPolicy()
	port, connected := listen(t)
	var chained bool
	base := &net.Dialer{Control: func(string, string, syscall.RawConn) error { chained = true; return nil }}
	d := &net.Dialer{ControlContext: p.controlContext(base)}

	_, err := d.DialContext(context.Background(), "tcp", "127.0.0.1:"+port)
	var re *RefusedError
	if !errors.As(err, &re) || re.Permanent || !strings.Contains(err.Error(), "dial to a private address 127.0.0.1 (loopback) refused") {
		t.Fatalf("err = %v, want a non-permanent refusal of 127.0.0.1", err)
	}
	if chained || connected() {
		t.Errorf("refused dial still ran the base hook (%t) or connected", chained)
	}

	allowed := NewPolicy(WithAllowLoopbackHTTP(true))
	d = &net.Dialer{ControlContext: allowed.controlContext(base)}
	conn, err := d.DialContext(context.Background(), "tcp", "127.0.0.1:"+port)
	if err != nil {
		t.Fatalf("loopback allowed, dial: %v", err)
	}
	_ = conn.Close()
	if !chained {
		t.Error("the dialer's own Control hook was not run")
	}
}

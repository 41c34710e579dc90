package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"time"

	"github.com/jetstream-bridge/bridge/projection"
)

// DialFunc has the shape of http.Transport.DialContext.
type DialFunc func(ctx context.Context, network, address string) (net.Conn, error)

// DialContext returns the dial function for the transport of one namespace.
// Outbox dials anything through d. A2A dials through the guard:
//
//   - the host being dialled (the request's, since no proxy and no redirect
//     stand between) must be granted;
//   - a name is resolved once, with the policy's resolver, and every answer
//     must be public, or the dial is refused with a non-permanent
//     *RefusedError (a rebinding attack and a DNS blip look the same);
//   - only the checked addresses are dialled, as literals, and a control
//     hook judges the socket's actual peer again just before connect, so no
//     second resolution can slip a private address in.
//
// A nil d means a dialer with a 10 s connect timeout and 30 s keep-alive.
func (p *Policy) DialContext(ns projection.Namespace, d *net.Dialer) DialFunc {
	if d == nil {
		d = &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	}
	if ns != projection.A2A {
		return d.DialContext
	}
	guarded := *d
	guarded.Control = nil
	guarded.ControlContext = p.controlContext(d)
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		return p.dialA2A(ctx, &guarded, network, address)
	}
}

func (p *Policy) dialA2A(ctx context.Context, d *net.Dialer, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, refuse("", "dial address is not host:port: %v", err)
	}
	addrs, err := p.dialTargets(ctx, host)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, a := range addrs {
		conn, err := d.DialContext(ctx, network, net.JoinHostPort(a.String(), port))
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, errors.Join(errs...)
}

// dialTargets re-applies the registration rules to the host at dial time
// and returns the addresses that may be dialled.
func (p *Policy) dialTargets(ctx context.Context, host string) ([]netip.Addr, error) {
	if !p.granted(host) {
		return nil, refuse(host, "host %q is not granted for a2a registrations (see --a2a-allow-hosts)", host)
	}
	lit, isLit, err := literal(host)
	if err != nil {
		return nil, err
	}
	if isLit {
		if why := p.judge(lit); why != "" {
			return nil, refuse(host, "host is a private address %s (%s)", lit, why)
		}
		return []netip.Addr{lit}, nil
	}
	addrs, err := p.resolve(ctx, host)
	if err != nil {
		return nil, &net.DNSError{Err: err.Error(), Name: host, IsTemporary: true}
	}
	if err := p.judgeResolved(host, addrs); err != nil {
		return nil, err
	}
	return addrs, nil
}

// controlContext judges the peer address of every socket just before it
// connects, then runs the dialer's own hook, if it had one.
func (p *Policy) controlContext(d *net.Dialer) func(context.Context, string, string, syscall.RawConn) error {
	return func(ctx context.Context, network, address string, c syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return refuseForNow("", "dial address %q is not an IP address and port", address)
		}
		if why := p.judge(ap.Addr()); why != "" {
			return refuseForNow("", "dial to a private address %s (%s) refused", ap.Addr().WithZone(""), why)
		}
		switch {
		case d.ControlContext != nil:
			return d.ControlContext(ctx, network, address, c)
		case d.Control != nil:
			return d.Control(network, address, c)
		}
		return nil
	}
}

// String describes the policy for a start-up log line.
func (p *Policy) String() string {
	grants := "any public host"
	if len(p.allowHosts) > 0 {
		grants = fmt.Sprintf("%d granted hosts", len(p.allowHosts))
	}
	return fmt.Sprintf("a2a: %s, loopback allowed: %t", grants, p.allowLoopbackHTTP)
}

// Package daemon is the bridge that `bridge run` runs, as a Go API: a
// Config in, Run until the context ends, so a Go program can embed the
// bridge beside its own work and `bridge run` is one user of it.
//
// A Daemon starts what its Config names: an embedded nats-server with
// JetStream (or a connection to an existing NATS, or the host's own
// connection), the journal stream, the cursor store (a bbolt file, or the
// kv store shared by several bridges), the attempt log, the operational
// events, the delivery workers and the admin API. Run stops them in the
// reverse order when its context ends, as `bridge run` does on SIGTERM:
// in-flight POSTs finish or are abandoned within 10 s, every acknowledged
// cursor is flushed, the leases of the kv store are released, the store
// and the embedded server are closed. Nothing is left running after Run
// returns.
//
// The package must never read the process's flags or signals, nor exit:
// those are the command's. It reads the environment only for the OTEL_*
// variables, and only when Config.TracerProvider is nil.
package daemon

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
)

// Daemon is one bridge: made by New, run once by Run.
type Daemon struct {
	cfg     Config
	running atomic.Bool
	ready   chan struct{}

	mu       sync.Mutex // guards what ready announces
	addr     net.Addr
	adminURL string
	token    string
	natsURL  string
}

// New checks cfg (see Config.Validate) and returns a Daemon that Run
// starts; New itself starts nothing and touches no file.
func New(cfg Config) (*Daemon, error) {
	cfg = cfg.withDerived()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Daemon{cfg: cfg, ready: make(chan struct{})}, nil
}

// Run starts the daemon and serves until ctx ends, then stops as `bridge
// run` does on SIGTERM and returns nil. An error means the daemon could
// not start, or stopped without flushing every cursor; everything it had
// started is stopped either way. Run may be called once.
func Run(ctx context.Context, cfg Config) error {
	d, err := New(cfg)
	if err != nil {
		return err
	}
	return d.Run(ctx)
}

// ErrRunTwice is Run's error when the Daemon already ran: its data
// directory and listeners are its first run's.
var ErrRunTwice = errors.New("daemon: Run called twice; make a new Daemon with New")

// Run starts the daemon and serves until ctx ends (see the package Run).
func (d *Daemon) Run(ctx context.Context) error {
	if !d.running.CompareAndSwap(false, true) {
		return ErrRunTwice
	}
	return serve(ctx, d)
}

// Ready is closed once the admin API listens, as delivery starts;
// from then on AdminAddr, AdminURL, AdminToken and NATSURL answer. A Run
// that fails to start never closes it: wait on Run's return as well.
func (d *Daemon) Ready() <-chan struct{} { return d.ready }

// AdminAddr is the address the admin API listens on, with the port
// chosen when Config.AdminListen asked for port 0; nil before Ready.
func (d *Daemon) AdminAddr() net.Addr {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.addr
}

// AdminURL is the admin API's base URL, http:// or https://; empty
// before Ready.
func (d *Daemon) AdminURL() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.adminURL
}

// AdminToken is the bearer token of the admin API's /v1/* routes: the
// configured one, or the one read or generated in the data directory;
// empty before Ready.
func (d *Daemon) AdminToken() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.token
}

// NATSURL is the URL of the NATS server the daemon uses: the embedded
// server's client URL (with the port chosen when Config.EmbeddedListen
// asked for port 0), else the configured or connected one; empty before
// Ready. Secrets in it are never shown.
func (d *Daemon) NATSURL() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.natsURL
}

// announce records what Ready promises and closes it.
func (d *Daemon) announce(addr net.Addr, adminURL, token, natsURL string) {
	d.mu.Lock()
	d.addr, d.adminURL, d.token, d.natsURL = addr, adminURL, token, natsURL
	d.mu.Unlock()
	close(d.ready)
}

package webhook

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/jetstream-bridge/bridge/netguard"
)

// plainClient is the http.RoundTripper for http:// receivers. It writes
// each request and reads each answer's head on the caller's goroutine,
// over kept-alive HTTP/1.1 connections of its own.
//
// Why not http.Transport: it hands every request to a writer goroutine
// and every answer back from a reader goroutine of the connection's. For
// a sequential drain to a nearby receiver those hand-offs cost a fifth of
// each POST (docs/performance.md, "Where the rest goes"), and a webhook
// POST needs nothing they buy: no pipelining, no HTTP/2 over cleartext,
// no Expect: 100-continue. HTTPS keeps the Transport, for HTTP/2 and its
// TLS handling.
//
// Invariants:
//   - every connection is dialled through the namespace's dial function,
//     the guard for A2A;
//   - a connection goes back to the pool only when its answer was read to
//     the end, with no Connection: close, no byte beyond it, and no
//     deadline or cancel fired on it; anything else closes it, so a
//     half-read answer is never taken for the next one's;
//   - a request is sent a second time only when it failed on a reused
//     connection before any byte of an answer came back (the receiver
//     most likely closed it while idle), and only once, on a new
//     connection. Delivery is at least once: a receiver that did read the
//     first copy deduplicates by webhook-id.
type plainClient struct {
	dial        netguard.DialFunc
	maxPerHost  int
	maxIdle     int
	idleTimeout time.Duration

	mu     sync.Mutex
	idle   map[string][]*plainConn // by host:port, most recently used last
	nIdle  int
	closed bool
}

// plainConn is one kept-alive connection and its buffers.
type plainConn struct {
	client *plainClient
	addr   string
	conn   net.Conn
	// limit sits between conn and br: it caps the bytes read for an
	// answer's head, as Transport.MaxResponseHeaderBytes does.
	limit  io.LimitedReader
	br     *bufio.Reader
	bw     *bufio.Writer
	idleAt time.Time
	expiry *time.Timer // closes the connection after idleTimeout unused
}

// max1xx bounds the informational answers skipped before the final one.
const max1xx = 5

func newPlainClient(dial netguard.DialFunc, maxPerHost, maxIdle int, idleTimeout time.Duration) *plainClient {
	return &plainClient{
		dial:        dial,
		maxPerHost:  maxPerHost,
		maxIdle:     maxIdle,
		idleTimeout: idleTimeout,
		idle:        make(map[string][]*plainConn),
	}
}

// RoundTrip sends req and reads the head of its answer. The answer's Body
// must be closed; closing it after reading to EOF returns the connection
// to the pool.
func (p *plainClient) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := checkHeaderFields(req.Header); err != nil {
		closeBody(req)
		return nil, err
	}
	if req.URL.Scheme != "http" {
		closeBody(req)
		return nil, fmt.Errorf("plain HTTP client asked to send to a %q URL", req.URL.Scheme)
	}
	ctx, addr := req.Context(), hostPort(req.URL)
	c, reused, err := p.conn(ctx, addr, true)
	if err != nil {
		closeBody(req)
		return nil, err
	}
	resp, err := c.exchange(ctx, req)
	var na noAnswerError
	if !errors.As(err, &na) || !reused || ctx.Err() != nil || req.GetBody == nil {
		return resp, err
	}
	// The receiver closed the kept-alive connection while it was idle.
	if req.Body, err = req.GetBody(); err != nil {
		return nil, err
	}
	if c, _, err = p.conn(ctx, addr, false); err != nil {
		closeBody(req)
		return nil, err
	}
	return c.exchange(ctx, req)
}

// conn takes an idle connection to addr, when pooled is true and one is
// there, or dials a new one.
func (p *plainClient) conn(ctx context.Context, addr string, pooled bool) (c *plainConn, reused bool, err error) {
	if pooled {
		if c := p.take(addr); c != nil {
			return c, true, nil
		}
	}
	nc, err := p.dial(ctx, "tcp", addr)
	if err != nil {
		return nil, false, err
	}
	c = &plainConn{client: p, addr: addr, conn: nc}
	c.limit.R, c.limit.N = nc, math.MaxInt64
	c.br = bufio.NewReader(&c.limit)
	c.bw = bufio.NewWriter(nc)
	return c, false, nil
}

// take removes the most recently used idle connection to addr from the
// pool.
func (p *plainClient) take(addr string) *plainConn {
	p.mu.Lock()
	defer p.mu.Unlock()
	cs := p.idle[addr]
	if len(cs) == 0 {
		return nil
	}
	c := cs[len(cs)-1]
	cs[len(cs)-1] = nil
	if len(cs) == 1 {
		delete(p.idle, addr)
	} else {
		p.idle[addr] = cs[:len(cs)-1]
	}
	p.nIdle--
	c.expiry.Stop()
	return c
}

// put pools c, or closes it when the pool is full or closed.
func (p *plainClient) put(c *plainConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || len(p.idle[c.addr]) >= p.maxPerHost || p.nIdle >= p.maxIdle {
		c.conn.Close()
		return
	}
	p.idle[c.addr] = append(p.idle[c.addr], c)
	p.nIdle++
	c.idleAt = time.Now()
	if c.expiry == nil {
		c.expiry = time.AfterFunc(p.idleTimeout, func() { p.expire(c) })
	} else {
		c.expiry.Reset(p.idleTimeout)
	}
}

// expire closes c if it is still pooled and has been idle for the whole
// timeout: a timer that fired while c was taken and pooled again finds it
// freshly idle and leaves it.
func (p *plainClient) expire(c *plainConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if time.Since(c.idleAt) < p.idleTimeout {
		return
	}
	cs := p.idle[c.addr]
	for i, ic := range cs {
		if ic == c {
			p.idle[c.addr] = append(cs[:i:i], cs[i+1:]...)
			if len(p.idle[c.addr]) == 0 {
				delete(p.idle, c.addr)
			}
			p.nIdle--
			c.conn.Close()
			return
		}
	}
}

// Close closes the idle connections; a connection in use is closed when
// its answer is done instead of pooled.
func (p *plainClient) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for addr, cs := range p.idle {
		for _, c := range cs {
			c.expiry.Stop()
			c.conn.Close()
		}
		delete(p.idle, addr)
	}
	p.nIdle = 0
}

// noAnswerError is a failure before any byte of an answer arrived: the
// one kind of failure that may be retried on a new connection.
type noAnswerError struct{ err error }

func (e noAnswerError) Error() string { return e.err.Error() }
func (e noAnswerError) Unwrap() error { return e.err }

// exchange writes req and reads the head of its answer on c. A deadline
// or cancel of ctx interrupts any read or write at once, through the
// connection's deadline, and its error is the context's.
func (c *plainConn) exchange(ctx context.Context, req *http.Request) (*http.Response, error) {
	// A deadline in the past makes a blocked read or write return at once.
	stop := context.AfterFunc(ctx, func() { _ = c.conn.SetDeadline(time.Unix(1, 0)) })
	resp, err := c.roundTrip(req)
	if err != nil {
		stop()
		c.conn.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	keep := !resp.Close
	if resp.Body == http.NoBody {
		c.release(stop, keep)
		return resp, nil
	}
	resp.Body = &plainBody{c: c, rc: resp.Body, stop: stop, keep: keep}
	return resp, nil
}

// roundTrip writes the request and reads answers until a final one. When
// the write fails, an answer the receiver sent before it stopped reading
// (a 413 for a body it will not take) is still read and returned.
func (c *plainConn) roundTrip(req *http.Request) (*http.Response, error) {
	werr := req.Write(c.bw)
	if werr == nil {
		werr = c.bw.Flush()
	}
	if _, err := c.br.Peek(1); err != nil {
		switch {
		case werr != nil:
			err = werr
		case errors.Is(err, io.EOF):
			err = fmt.Errorf("receiver closed the connection without an answer: %w", err)
		}
		return nil, noAnswerError{err}
	}
	resp, err := c.readAnswer(req)
	if err != nil {
		return nil, err
	}
	resp.Close = resp.Close || werr != nil
	return resp, nil
}

// readAnswer reads the head of the final answer to req, skipping
// informational ones, with each head capped at maxResponseHeaderBytes.
func (c *plainConn) readAnswer(req *http.Request) (*http.Response, error) {
	for range max1xx + 1 {
		c.limit.N = maxResponseHeaderBytes
		resp, err := http.ReadResponse(c.br, req)
		switch {
		case err != nil && c.limit.N <= 0:
			return nil, fmt.Errorf("response headers exceed %d bytes", maxResponseHeaderBytes)
		case err != nil:
			return nil, err
		case resp.StatusCode == http.StatusSwitchingProtocols:
			return nil, errors.New("receiver answered 101 Switching Protocols to a POST")
		case resp.StatusCode >= 200:
			c.limit.N = math.MaxInt64
			return resp, nil
		}
	}
	return nil, fmt.Errorf("receiver sent more than %d informational answers", max1xx)
}

// release pools c if its exchange ended cleanly, and closes it otherwise.
// stop is the exchange's AfterFunc stop: false means the deadline or
// cancel fired, and the connection's deadline is spent.
func (c *plainConn) release(stop func() bool, keep bool) {
	if stop() && keep && c.br.Buffered() == 0 {
		c.client.put(c)
		return
	}
	c.conn.Close()
}

// plainBody is an answer's body. It notes whether it was read to the end,
// which decides on Close whether the connection can carry another request.
// Close never drains: what was not read is not worth reading.
type plainBody struct {
	c    *plainConn
	rc   io.ReadCloser
	stop func() bool
	keep bool
	eof  bool
	done bool
}

func (b *plainBody) Read(p []byte) (int, error) {
	if b.done {
		return 0, errors.New("read on a closed answer body")
	}
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

func (b *plainBody) Close() error {
	if b.done {
		return nil
	}
	b.done = true
	b.c.release(b.stop, b.keep && b.eof)
	return nil
}

// hostPort is the address to dial for an http:// URL.
func hostPort(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "80"
	}
	return net.JoinHostPort(u.Hostname(), port)
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// checkHeaderFields refuses what http.Transport refuses: a field name
// that is not an RFC 9110 token, or a value with control characters
// (which Request.Write would otherwise quietly rewrite).
func checkHeaderFields(h http.Header) error {
	for k, vs := range h {
		if !isToken(k) {
			return fmt.Errorf("invalid header field name %q", k)
		}
		for _, v := range vs {
			if !validHeaderValue(v) {
				return fmt.Errorf("invalid header field value for %q", k)
			}
		}
	}
	return nil
}

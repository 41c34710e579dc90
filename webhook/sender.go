// Package webhook makes one webhook POST: it signs the message the
// Standard Webhooks way, adds the authentication the registration asked
// for, sends it through the client of its namespace and scheme (both dial
// A2A receivers through the netguard guard) and classifies the answer for
// the retry decision.
//
// It decides nothing about retries and keeps no state about
// registrations. It must never follow a redirect, read an unbounded
// response, use a proxy from the environment, or put a secret, token,
// credential or the URL's userinfo, path or query into an Outcome.
package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jetstream-bridge/bridge/internal/gencache"
	"github.com/jetstream-bridge/bridge/netguard"
	"github.com/jetstream-bridge/bridge/projection"
)

// Defaults of a Sender.
const (
	DefaultTimeout         = 15 * time.Second
	DefaultMaxBodyRead     = 64 << 10
	DefaultExcerptLen      = 256
	DefaultMaxIdlePerHost  = 64
	DefaultVersion         = "dev"
	userAgentProduct       = "jetstream-bridge/"
	maxResponseHeaderBytes = 64 << 10
	// minSecretSegment is the length from which a URL path segment is
	// treated as a possible capability token (Slack-style hook paths).
	minSecretSegment = 16
)

// Request is one message for one registration.
type Request struct {
	Namespace projection.Namespace
	URL       string
	Message   projection.Message
	// Secrets are "whsec_" keys, current first, then the previous one
	// during a rotation; the message is signed with each, so a receiver
	// holding either verifies it.
	Secrets []string
	// Token is the A2A notification token.
	Token           string
	AuthScheme      string
	AuthCredentials string
	// OAuth2, when set, authorizes the POST with a client-credentials
	// token instead of AuthScheme and AuthCredentials.
	OAuth2 OAuth2
	// Pace, when set, is waited on before the POST Send makes again after
	// a 401 renewed the OAuth 2.0 token, so a rate limit counts that POST
	// too; its error ends the Send as a transport failure.
	Pace func(context.Context) error
	// At is the attempt's time: webhook-timestamp, and the origin of a
	// Retry-After date. Zero means now.
	At time.Time
	// TraceParent and TraceState, when TraceParent is set, are the W3C
	// trace context of the span that traces this POST; they replace the
	// message's traceparent and tracestate headers.
	TraceParent, TraceState string
	// Headers are the registration's own, sent on every POST under the
	// sender's and the message's: neither can be overridden by them,
	// except User-Agent.
	Headers map[string]string
	// TLS, when set, dials an https:// receiver with the registration's
	// own CAs, client certificate and server name; an http:// one ignores
	// it.
	TLS *TLS
}

// Sender POSTs messages. It is safe for concurrent use; keep one per
// process so connections are reused, and Close it on shutdown.
type Sender struct {
	timeout        time.Duration
	maxBody        int64
	excerptLen     int
	keepBody       int
	userAgent      []string // one value, shared by every request's header map
	policy         *netguard.Policy
	tlsConfig      *tls.Config
	maxIdlePerHost int
	a2a, outbox    roundTrippers
	urls           *gencache.Cache[urlKey, *url.URL]
	tokens         *tokenCache
	// ownTLS holds the transports of registrations with TLS settings of
	// their own.
	ownTLS *tlsPool
}

// roundTrippers are one namespace's clients, one per scheme, both dialling
// through the namespace's dial function.
type roundTrippers struct {
	tls   *http.Transport
	plain *plainClient
}

// urlCacheSize bounds how many URLs the guard's verdicts are remembered
// for: more than the receivers one fan-out talks to in a while.
const urlCacheSize = 4096

// urlKey names one URL as one namespace's guard judged it.
type urlKey struct {
	ns  projection.Namespace
	raw string
}

// Option configures a Sender.
type Option func(*Sender)

// WithTimeout bounds one Send, from dial to the last byte read.
func WithTimeout(d time.Duration) Option {
	return func(s *Sender) {
		if d > 0 {
			s.timeout = d
		}
	}
}

// WithPolicy sets the URL and dial guard; the default is netguard.NewPolicy().
func WithPolicy(p *netguard.Policy) Option {
	return func(s *Sender) {
		if p != nil {
			s.policy = p
		}
	}
}

// WithMaxBodyRead caps the bytes of a response read; a longer answer's
// connection is closed rather than drained.
func WithMaxBodyRead(n int64) Option {
	return func(s *Sender) {
		if n > 0 {
			s.maxBody = n
		}
	}
}

// WithExcerptLen bounds Outcome.Excerpt, in bytes.
func WithExcerptLen(n int) Option {
	return func(s *Sender) {
		if n >= 0 {
			s.excerptLen = n
		}
	}
}

// WithResponseBody keeps the first n bytes of every answer's body, 2xx
// included, in Outcome.Response, for a log of attempts. Off (0) by
// default: a 2xx body is then discarded unread into memory.
func WithResponseBody(n int) Option {
	return func(s *Sender) {
		if n >= 0 {
			s.keepBody = n
		}
	}
}

// WithVersion sets the version in the User-Agent "jetstream-bridge/<v>".
func WithVersion(v string) Option {
	return func(s *Sender) {
		if v != "" {
			s.userAgent = []string{userAgentProduct + v}
		}
	}
}

// WithTLSConfig sets the client TLS configuration (private roots, client
// certificates). It is cloned; TLS below 1.2 is never offered.
func WithTLSConfig(c *tls.Config) Option {
	return func(s *Sender) {
		if c != nil {
			s.tlsConfig = c.Clone()
		}
	}
}

// WithMaxIdleConnsPerHost sizes the keep-alive pool per receiver host, for
// fan-out to many registrations on one host.
func WithMaxIdleConnsPerHost(n int) Option {
	return func(s *Sender) {
		if n > 0 {
			s.maxIdlePerHost = n
		}
	}
}

// NewSender builds a Sender with one HTTP client per namespace.
func NewSender(opts ...Option) *Sender {
	s := &Sender{
		timeout:        DefaultTimeout,
		maxBody:        DefaultMaxBodyRead,
		excerptLen:     DefaultExcerptLen,
		userAgent:      []string{userAgentProduct + DefaultVersion},
		policy:         netguard.NewPolicy(),
		tlsConfig:      &tls.Config{},
		maxIdlePerHost: DefaultMaxIdlePerHost,
	}
	for _, o := range opts {
		o(s)
	}
	s.tlsConfig.MinVersion = max(s.tlsConfig.MinVersion, tls.VersionTLS12)
	s.ownTLS = &tlsPool{newTransport: s.newTransport, base: s.tlsConfig, entries: make(map[tlsKey]*tlsEntry)}
	s.ownTLS.dial = make(map[projection.Namespace]netguard.DialFunc, 2)
	s.a2a = s.newRoundTrippers(projection.A2A)
	s.outbox = s.newRoundTrippers(projection.Outbox)
	s.urls = gencache.New[urlKey, *url.URL](urlCacheSize)
	s.tokens = newTokenCache(s)
	return s
}

// newRoundTrippers builds the clients of one namespace. They dial through
// the policy (the guard for A2A), ignore proxy settings from the
// environment (a proxy would dial on the bridge's behalf, out of the
// guard's sight) and are used without an http.Client, so a redirect is
// never followed: a 3xx is the receiver's answer, classified like any
// other, and cannot lead a request to an address the guard never judged.
// (A client would also copy every request's headers for redirects that
// never happen.)
func (s *Sender) newRoundTrippers(ns projection.Namespace) roundTrippers {
	dial := s.policy.DialContext(ns, &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second})
	s.ownTLS.dial[ns] = dial
	return roundTrippers{
		tls:   s.newTransport(dial, s.tlsConfig),
		plain: newPlainClient(dial, s.maxIdlePerHost, maxIdleConns*s.maxIdlePerHost, idleConnTimeout),
	}
}

// Keep-alive bounds of both clients: idle connections per receiver host
// are WithMaxIdleConnsPerHost's, in all this many times that.
const (
	maxIdleConns    = 16
	idleConnTimeout = 90 * time.Second
)

// newTransport builds a client for https:// receivers.
func (s *Sender) newTransport(dial netguard.DialFunc, c *tls.Config) *http.Transport {
	return &http.Transport{
		Proxy:                  nil,
		DialContext:            dial,
		TLSClientConfig:        c.Clone(),
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           maxIdleConns * s.maxIdlePerHost,
		MaxIdleConnsPerHost:    s.maxIdlePerHost,
		IdleConnTimeout:        idleConnTimeout,
		TLSHandshakeTimeout:    10 * time.Second,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: maxResponseHeaderBytes,
		// No Accept-Encoding the receiver did not ask for, and no
		// transparent inflation of a body the read cap is meant to bound.
		DisableCompression: true,
	}
}

// Close drops the idle keep-alive connections of both namespaces and of
// every registration's own TLS setting.
func (s *Sender) Close() {
	for _, rt := range []roundTrippers{s.a2a, s.outbox} {
		rt.tls.CloseIdleConnections()
		rt.plain.Close()
	}
	s.tokens.close()
	s.ownTLS.close()
}

// Send POSTs one message and says how it ended. It never retries: the
// caller owns the schedule. A message sent again gives the same body and
// webhook-id; only the timestamp and signatures follow At.
func (s *Sender) Send(ctx context.Context, r Request) Outcome {
	start := time.Now()
	o := s.authorized(ctx, r)
	o.Duration = time.Since(start)
	return o
}

func (s *Sender) send(ctx context.Context, r Request) Outcome {
	if r.At.IsZero() {
		r.At = time.Now()
	}
	tctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	req, err := s.newRequest(tctx, r)
	if err != nil {
		return refused(err)
	}
	rt, err := s.roundTripper(&r, req.URL.Scheme)
	if err != nil {
		return refused(err)
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return s.failed(ctx, err)
	}
	defer resp.Body.Close()
	return s.answered(resp, r, req.URL)
}

// roundTripper is the client for r and a URL scheme the guard accepted:
// http or https. Only an https:// receiver with TLS settings of its own
// leaves the namespace's shared clients; headers do not, so a
// registration with headers keeps the plain client's fast path.
func (s *Sender) roundTripper(r *Request, scheme string) (http.RoundTripper, error) {
	rt := s.outbox
	if r.Namespace == projection.A2A {
		rt = s.a2a
	}
	switch {
	case scheme == "http":
		return rt.plain, nil
	case r.TLS != nil:
		return s.ownTLS.transport(r.Namespace, r.TLS)
	}
	return rt.tls, nil
}

// newRequest builds the signed request, refusing what can never be sent.
func (s *Sender) newRequest(ctx context.Context, r Request) (*http.Request, error) {
	u, err := s.parseURL(r.Namespace, r.URL)
	if err != nil {
		return nil, err
	}
	h, err := s.headers(r)
	if err != nil {
		return nil, err
	}
	// The URL judged is the URL sent: no second parse that could read it
	// differently.
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "/", bytes.NewReader(r.Message.Body))
	if err != nil {
		return nil, err
	}
	req.URL, req.Host, req.Header = u, u.Host, h
	return req, nil
}

// parseURL is the guard's ParseURL, remembered: its verdict depends only
// on the URL and the policy, which does not change while the sender lives,
// and parsing a registration's URL again on every POST showed in a
// fan-out's profile. Refusals are not remembered (they end a registration
// anyway), and the dial guard still judges every connection. Each request
// gets its own copy of the URL.
func (s *Sender) parseURL(ns projection.Namespace, raw string) (*url.URL, error) {
	k := urlKey{ns: ns, raw: raw}
	u, ok := s.urls.Get(k)
	if !ok {
		var err error
		if u, err = s.policy.ParseURL(ns, raw); err != nil {
			return nil, err
		}
		s.urls.Put(k, u)
	}
	c := *u
	return &c, nil
}

// Canonical forms of the headers the sender sets, so setting them costs a
// map write and not a canonicalisation per POST.
const (
	canonicalUserAgent = "User-Agent"
	canonicalID        = "Webhook-Id"
	canonicalTimestamp = "Webhook-Timestamp"
	canonicalSignature = "Webhook-Signature"
	canonicalAuth      = "Authorization"
	canonicalToken     = "A2a-Notification-Token"
	canonicalXToken    = "X-A2a-Notification-Token"
)

// headers are the message's own, then the sender's, which win: a
// projection cannot forge a signature or an Authorization line.
//
// The map is new but the message's value slices are shared, not copied: a
// projected message may be sent to many receivers at once, and nothing
// here or in net/http writes into a header's values.
func (s *Sender) headers(r Request) (http.Header, error) {
	if err := checkRequest(r); err != nil {
		return nil, err
	}
	own := ownHeaders(r)
	h := make(http.Header, len(r.Message.Header)+own+len(r.Headers))
	maps.Copy(h, r.Message.Header)
	// The sender's values share one array, each slice capped at its one
	// element: a header map costs one allocation for them, not one each.
	// The User-Agent's value is the sender's own, shared by every map.
	vals := make([]string, 0, own-1+len(r.Headers))
	set := func(key, v string) {
		vals = append(vals, v)
		h[key] = vals[len(vals)-1 : len(vals) : len(vals)]
	}
	ts := r.At.Unix()
	h[canonicalUserAgent] = s.userAgent
	// The registration's headers go under the message's and the
	// sender's own: what the admin API let through never names those,
	// and a row that does still cannot replace a signature. User-Agent
	// is the one the API leaves to the registration.
	for k, v := range r.Headers {
		k = http.CanonicalHeaderKey(k)
		if _, taken := h[k]; !taken || k == canonicalUserAgent {
			set(k, v)
		}
	}
	set(canonicalID, r.Message.ID)
	set(canonicalTimestamp, strconv.FormatInt(ts, 10))
	if len(r.Secrets) > 0 {
		sigs := make([]string, 0, len(r.Secrets))
		for i, sec := range r.Secrets {
			key, err := ParseSecret(sec)
			if err != nil {
				return nil, permanent("signing secret %d: %v", i+1, err)
			}
			sigs = append(sigs, Sign(key, r.Message.ID, ts, r.Message.Body))
		}
		set(canonicalSignature, strings.Join(sigs, " "))
	}
	if r.AuthScheme != "" {
		set(canonicalAuth, r.AuthScheme+" "+r.AuthCredentials)
	}
	if r.Token != "" {
		set(canonicalToken, r.Token)
		set(canonicalXToken, r.Token)
	}
	traceHeaders(h, &r)
	return h, nil
}

// ownHeaders is how many headers the sender adds to r's own, so the map
// is made at its size instead of grown or made too big on every POST.
func ownHeaders(r Request) int {
	n := 3
	if len(r.Secrets) > 0 {
		n++
	}
	if r.AuthScheme != "" {
		n++
	}
	if r.Token != "" {
		n += 2
	}
	return n
}

// checkRequest refuses, for good, what no retry can send; its errors name
// the field and never its value.
func checkRequest(r Request) error {
	switch {
	case r.Message.ID == "" || !validHeaderValue(r.Message.ID):
		return permanent("message id is empty or not a valid header value")
	case r.AuthScheme == "" && r.AuthCredentials != "":
		return permanent("authentication credentials are set without a scheme")
	case r.AuthScheme != "" && !ValidAuthScheme(r.AuthScheme):
		return permanent("authentication scheme is not an RFC 9110 token")
	case r.AuthScheme != "" && (r.AuthCredentials == "" || !validHeaderValue(r.AuthCredentials)):
		return permanent("authentication credentials are empty or contain control characters")
	case !validHeaderValue(r.Token):
		return permanent("notification token contains control characters")
	}
	for k, v := range r.Headers {
		if !isToken(k) || !validHeaderValue(v) {
			// The value is never quoted; a header may carry a key.
			return permanent("headers: %q is not a valid header name or its value has control characters", k)
		}
	}
	return nil
}

func permanent(format string, args ...any) *netguard.RefusedError {
	return &netguard.RefusedError{Reason: fmt.Sprintf(format, args...), Permanent: true}
}

func refused(err error) Outcome {
	o := Outcome{Class: ClassRefused, Err: err}
	var re *netguard.RefusedError
	if errors.As(err, &re) {
		o.Permanent = re.Permanent
	}
	return o
}

// failed classifies a request that got no answer. A url.Error around it
// is dropped: it quotes the whole URL, query included.
func (s *Sender) failed(parent context.Context, err error) Outcome {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var re *netguard.RefusedError
	if errors.As(err, &re) {
		return Outcome{Class: ClassRefused, Err: re, Permanent: re.Permanent}
	}
	if parent.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("no answer within %s: %w", s.timeout, context.DeadlineExceeded)
	}
	return Outcome{Class: ClassTransport, Err: err}
}

// answered classifies a receiver's answer and reads its body: to the end
// when it fits the cap, so the connection goes back to the pool, and no
// further otherwise, so a hostile receiver cannot make the bridge read
// forever. Only a failed answer's body is kept, for the excerpt.
func (s *Sender) answered(resp *http.Response, r Request, u *url.URL) Outcome {
	o := Outcome{Status: resp.StatusCode, Class: classOf(resp.StatusCode)}
	if o.OK() {
		if s.keepBody > 0 && resp.Body != http.NoBody {
			// A secret straddling the cut is read whole, so redacting
			// cannot leave a piece of it at the end.
			head, _ := io.ReadAll(io.LimitReader(resp.Body, int64(s.keepBody)+keepSlack))
			o.Response = s.response(head, r, u)
		}
		// One byte past the cap, so a body of exactly the cap reaches EOF
		// and its connection is reused. A 204 has no body to read.
		if resp.Body != http.NoBody {
			_, _ = io.CopyN(io.Discard, resp.Body, s.maxBody+1)
		}
		return o
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, s.maxBody+1))
	o.Permanent = resp.StatusCode == http.StatusGone
	if d, ok := ParseRetryAfter(resp.Header.Get("Retry-After"), r.At); ok {
		o.RetryAfter = max(d, time.Second)
	}
	secrets := secretsOf(r, u)
	o.Excerpt = excerpt(body, s.excerptLen, secrets)
	if s.keepBody > 0 {
		o.Response = keep(body, s.keepBody, secrets)
	}
	return o
}

// keepSlack is how far past the kept length a body is read before
// redacting: longer than any secret worth redacting.
const keepSlack = 1024

func (s *Sender) response(head []byte, r Request, u *url.URL) []byte {
	if len(head) == 0 {
		return nil
	}
	return keep(head, s.keepBody, secretsOf(r, u))
}

// secretsOf lists what an excerpt must not repeat, longest first so a
// secret containing another is redacted whole: the keys, the token, the
// credentials, and the URL's path, long path segments and query values,
// which often carry a capability token of their own.
func secretsOf(r Request, u *url.URL) []string {
	out := make([]string, 0, len(r.Secrets)*2+5)
	for _, sec := range r.Secrets {
		out = append(out, sec, strings.TrimPrefix(sec, SecretPrefix))
	}
	out = append(out, r.Token, r.AuthCredentials, r.OAuth2.ClientSecret)
	if u.Path != "" && u.Path != "/" {
		out = append(out, u.RequestURI(), u.EscapedPath(), u.Path)
	}
	for seg := range strings.SplitSeq(u.Path, "/") {
		if len(seg) >= minSecretSegment {
			out = append(out, seg)
		}
	}
	for _, vs := range u.Query() {
		out = append(out, vs...)
	}
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out
}

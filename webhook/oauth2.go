package webhook

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/jetstream-bridge/bridge/netguard"
	"github.com/jetstream-bridge/bridge/projection"
)

// OAuth2 is a registration's OAuth 2.0 client-credentials grant: the POST
// carries "Authorization: Bearer <token>" with a token from TokenURL. The
// zero value (no TokenURL) asks for none.
type OAuth2 struct {
	TokenURL     string
	ClientID     string
	ClientSecret string
	Scopes       []string
	// Audience, when set, is sent to the token endpoint as the "audience"
	// form parameter.
	Audience string
}

func (o *OAuth2) set() bool { return o.TokenURL != "" }

// Bounds of a token request. The body bound leaves room for any JWT and
// stops an endpoint that streams forever.
const (
	maxTokenBody = 64 << 10
	// tokenIdle is how long a grant's token is kept after its last use;
	// the settings of deleted or changed registrations go with it.
	tokenIdle = 15 * time.Minute
	// maxTokenMargin is the contract's longest margin before expiry.
	maxTokenMargin = 10 * time.Second
)

// TokenError is a token the bridge could not get: the POST was not sent.
// It names the endpoint by host and path only (no userinfo, no query) and
// never carries the client secret or a token.
type TokenError struct {
	// Endpoint is the token URL's host and path.
	Endpoint string
	// Status is the endpoint's HTTP status; 0 when it did not answer.
	Status int
	// Excerpt is the start of its answer, as in Outcome.Excerpt.
	Excerpt string
	// Err is the transport error, or why a 2xx answer held no usable token.
	Err error
}

func (e *TokenError) Error() string {
	if e.Status == 0 {
		return fmt.Sprintf("token endpoint %s: %v", e.Endpoint, errText(e.Err))
	}
	msg := fmt.Sprintf("token endpoint %s answered %d %s", e.Endpoint, e.Status, http.StatusText(e.Status))
	if e.Excerpt != "" {
		msg += ": " + e.Excerpt
	}
	return msg
}

func (e *TokenError) Unwrap() error { return e.Err }

// authorized is send with the registration's OAuth 2.0 token, when it has
// one. It never POSTs without a token: a token that cannot be had is a
// transient failure of the delivery. A 401 drops the token the POST
// carried and POSTs once more with a new one, after r.Pace; what that
// second POST gets is the Outcome, a 401 included.
func (s *Sender) authorized(ctx context.Context, r Request) Outcome {
	if !r.OAuth2.set() {
		return s.send(ctx, r)
	}
	if r.AuthScheme != "" || r.AuthCredentials != "" {
		return refused(permanent("authentication and oauth2 are both set; only one can be the Authorization header"))
	}
	if r.At.IsZero() {
		r.At = time.Now()
	}
	src, err := s.tokens.source(r.Namespace, &r.OAuth2)
	if err != nil {
		return refused(err)
	}
	tok, err := src.get(ctx)
	if err != nil {
		return Outcome{Class: ClassTransport, Err: err}
	}
	o := s.send(ctx, bearer(r, tok))
	if o.Status != http.StatusUnauthorized {
		return o
	}
	src.drop(tok)
	if tok, err = src.get(ctx); err != nil {
		return Outcome{Class: ClassTransport, Err: err, Reauthorized: true}
	}
	if r.Pace != nil {
		if err := r.Pace(ctx); err != nil {
			return Outcome{Class: ClassTransport, Err: err, Reauthorized: true}
		}
	}
	o = s.send(ctx, bearer(r, tok))
	o.Reauthorized = true
	return o
}

// bearer is r with tok as its Authorization, so the token is redacted
// from excerpts like any credentials.
func bearer(r Request, tok string) Request {
	r.AuthScheme, r.AuthCredentials = "Bearer", tok
	return r
}

// tokenKey names one grant. Registrations with the same settings share
// its token; the secret is held as a hash, so two secrets differ without
// the key holding either.
type tokenKey struct {
	ns                 projection.Namespace
	tokenURL, clientID string
	secret             [sha256.Size]byte
	scopes, audience   string
}

func tokenKeyOf(ns projection.Namespace, o *OAuth2) tokenKey {
	return tokenKey{
		ns:       ns,
		tokenURL: o.TokenURL,
		clientID: o.ClientID,
		secret:   sha256.Sum256([]byte(o.ClientSecret)),
		scopes:   strings.Join(o.Scopes, " "),
		audience: o.Audience,
	}
}

// tokenCache holds one tokenSource per grant in use. Sources unused for
// tokenIdle are dropped at the next lookup, so the cache follows the
// registrations instead of growing with every setting ever seen.
type tokenCache struct {
	policy     *netguard.Policy
	clients    map[projection.Namespace]*http.Client // read-only once built
	transports []*http.Transport
	excerptLen int
	now        func() time.Time

	mu      sync.Mutex
	sources map[tokenKey]*tokenSource
	swept   time.Time
}

// newTokenCache builds the token clients of both namespaces. They dial
// through the same policy as the POSTs (the guard, for A2A), use no proxy,
// follow no redirect (a 3xx is the endpoint's failed answer) and read at
// most maxTokenBody of an answer within the sender's timeout.
func newTokenCache(s *Sender) *tokenCache {
	c := &tokenCache{
		policy:     s.policy,
		clients:    make(map[projection.Namespace]*http.Client, 2),
		excerptLen: s.excerptLen,
		now:        time.Now,
		sources:    make(map[tokenKey]*tokenSource),
	}
	for _, ns := range []projection.Namespace{projection.A2A, projection.Outbox} {
		t := &http.Transport{
			Proxy:                  nil,
			DialContext:            s.policy.DialContext(ns, &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}),
			TLSClientConfig:        s.tlsConfig.Clone(),
			ForceAttemptHTTP2:      true,
			MaxIdleConnsPerHost:    2,
			IdleConnTimeout:        idleConnTimeout,
			TLSHandshakeTimeout:    10 * time.Second,
			MaxResponseHeaderBytes: maxResponseHeaderBytes,
			DisableCompression:     true,
		}
		c.transports = append(c.transports, t)
		c.clients[ns] = &http.Client{
			Transport:     boundedBody{t},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
			Timeout:       s.timeout,
		}
	}
	return c
}

func (c *tokenCache) close() {
	for _, t := range c.transports {
		t.CloseIdleConnections()
	}
}

// source is the token source of o in ns, made at its first use. A token
// URL the policy refuses is refused like a webhook URL.
func (c *tokenCache) source(ns projection.Namespace, o *OAuth2) (*tokenSource, error) {
	k := tokenKeyOf(ns, o)
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if now.Sub(c.swept) >= tokenIdle/2 {
		c.sweep(now)
	}
	src := c.sources[k]
	if src == nil {
		u, err := c.policy.ParseURL(ns, o.TokenURL)
		if err != nil {
			return nil, tokenURLRefused(err)
		}
		src = c.newSource(ns, o, u)
		c.sources[k] = src
	}
	src.used = now
	return src, nil
}

// sweep drops the sources unused for tokenIdle. A POST still holding one
// finishes with it; the next lookup makes a new one.
func (c *tokenCache) sweep(now time.Time) {
	c.swept = now
	for k, src := range c.sources {
		if now.Sub(src.used) >= tokenIdle {
			delete(c.sources, k)
		}
	}
}

// tokenURLRefused speaks of the token URL where the guard says "url".
func tokenURLRefused(err error) error {
	var re *netguard.RefusedError
	if !errors.As(err, &re) {
		return err
	}
	out := *re
	if rest, ok := strings.CutPrefix(re.Reason, "url "); ok {
		out.Reason = "oauth2 tokenUrl " + rest
	} else {
		out.Reason = "oauth2 tokenUrl: " + re.Reason
	}
	return &out
}

func (c *tokenCache) newSource(ns projection.Namespace, o *OAuth2, u *url.URL) *tokenSource {
	src := &tokenSource{
		conf: &clientcredentials.Config{
			ClientID:     o.ClientID,
			ClientSecret: o.ClientSecret,
			TokenURL:     u.String(),
			Scopes:       o.Scopes,
			// AuthStyle left to auto-detect: HTTP Basic first, form
			// parameters when the endpoint refuses it, the style that
			// worked remembered by this Config.
		},
		client:     c.clients[ns],
		endpoint:   u.Host + u.EscapedPath(),
		excerptLen: c.excerptLen,
		now:        c.now,
	}
	if o.Audience != "" {
		src.conf.EndpointParams = url.Values{"audience": {o.Audience}}
	}
	return src
}

// tokenSource is one grant's token: fetched once for every POST that needs
// it at the same time, and reused until its reuse deadline.
type tokenSource struct {
	conf       *clientcredentials.Config
	client     *http.Client
	endpoint   string
	excerptLen int
	now        func() time.Time
	used       time.Time // guarded by the cache's mu

	mu     sync.Mutex
	token  string
	until  time.Time // zero: no expiry was given, reused until a 401
	flight *tokenFlight
}

// tokenFlight is a fetch under way; done closes when token or err is set.
type tokenFlight struct {
	done  chan struct{}
	token string
	err   error
}

// get returns the current token, or fetches one. Callers arriving while a
// fetch is under way wait for it and share its result, failure included,
// so a failing endpoint gets one request per round of POSTs, not one each.
func (t *tokenSource) get(ctx context.Context) (string, error) {
	t.mu.Lock()
	if t.token != "" && (t.until.IsZero() || t.now().Before(t.until)) {
		tok := t.token
		t.mu.Unlock()
		return tok, nil
	}
	if f := t.flight; f != nil {
		t.mu.Unlock()
		select {
		case <-f.done:
			return f.token, f.err
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	f := &tokenFlight{done: make(chan struct{})}
	t.flight = f
	t.mu.Unlock()

	var until time.Time
	f.token, until, f.err = t.fetch(ctx)
	t.mu.Lock()
	t.flight = nil
	if f.err == nil {
		t.token, t.until = f.token, until
	}
	t.mu.Unlock()
	close(f.done)
	return f.token, f.err
}

// drop forgets tok after a receiver refused it. A newer token another POST
// already fetched stays: concurrent 401s cost one new token, not one each.
func (t *tokenSource) drop(tok string) {
	t.mu.Lock()
	if t.token == tok {
		t.token, t.until = "", time.Time{}
	}
	t.mu.Unlock()
}

// fetch asks the endpoint for a token and says until when to reuse it.
func (t *tokenSource) fetch(ctx context.Context) (string, time.Time, error) {
	tok, err := t.conf.Token(context.WithValue(ctx, oauth2.HTTPClient, t.client))
	if err != nil {
		return "", time.Time{}, t.failure(err)
	}
	if tok.AccessToken == "" || !validHeaderValue(tok.AccessToken) {
		return "", time.Time{}, &TokenError{Endpoint: t.endpoint, Err: errors.New("access_token is not a valid header value")}
	}
	return tok.AccessToken, reuseUntil(t.now(), tok.Expiry), nil
}

// reuseUntil is when a token received at got and expiring at expiry stops
// being sent: the lesser of maxTokenMargin and a quarter of its lifetime
// before expiry. The lifetime is counted from receipt, a little short of
// expires_in, so the margin is never longer than the contract's. oauth2's
// own Token.Valid cannot be used: its fixed 10 s margin would never reuse
// a token that lives less than that.
func reuseUntil(got, expiry time.Time) time.Time {
	if expiry.IsZero() {
		return time.Time{}
	}
	life := expiry.Sub(got)
	if life <= 0 {
		return got
	}
	return expiry.Add(-min(maxTokenMargin, life/4))
}

// failure is err as a TokenError: the endpoint's status and the start of
// its answer, or the transport error without the URL a url.Error quotes.
func (t *tokenSource) failure(err error) error {
	te := &TokenError{Endpoint: t.endpoint}
	var re *oauth2.RetrieveError
	var ue *url.Error
	switch {
	case errors.As(err, &re) && re.Response != nil:
		te.Status = re.Response.StatusCode
		te.Excerpt = excerpt(re.Body, t.excerptLen, []string{t.conf.ClientSecret})
	case errors.As(err, &ue):
		te.Err = ue.Err
	default:
		te.Err = err
	}
	return te
}

// boundedBody cuts every answer's body at maxTokenBody.
type boundedBody struct{ rt http.RoundTripper }

func (b boundedBody) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := b.rt.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = limitedBody{Reader: io.LimitReader(resp.Body, maxTokenBody), Closer: resp.Body}
	return resp, nil
}

type limitedBody struct {
	io.Reader
	io.Closer
}

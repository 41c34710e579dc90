// Package admin serves the bridge's admin API: registrations, unpark,
// rewind, resend, attempts and purge under /v1 behind a bearer token, and /healthz, /readyz
// and /metrics beside it.
//
// It validates everything a caller sends before the store sees it, so the
// delivery worker only ever meets configurations it can act on. It must
// never echo a secret, token or credential — not in an answer, an error or
// a log line: answers say "signed", "hasToken" and the authentication
// scheme instead. It never delivers and never reads a payload; of the
// journal it asks only sequence numbers.
package admin

import (
	"context"
	"crypto/sha256"
	"log/slog"
	"net/http"
	"time"

	"github.com/jetstream-bridge/bridge/cursor"
	"github.com/jetstream-bridge/bridge/events"
	"github.com/jetstream-bridge/bridge/projection"
)

// maxBodyBytes caps every request body, so one caller cannot make the
// process buffer an unbounded upload.
const maxBodyBytes = 1 << 20

// Journal is what the admin API needs of the stream: where it begins and
// ends, and which sequence a point in time falls on, to place a new or
// rewound cursor.
type Journal interface {
	// Bounds reports the stream's first and last sequence.
	Bounds(ctx context.Context) (first, last uint64, err error)
	// SeqAtTime reports the first sequence stored at or after t (the last
	// sequence + 1 when nothing is).
	SeqAtTime(ctx context.Context, t time.Time) (uint64, error)
}

// Guard decides whether a webhook URL may be registered in a namespace.
// Its error text is shown to the caller, so it must name the problem
// without echoing credentials.
type Guard interface {
	CheckURL(ctx context.Context, ns projection.Namespace, raw string) error
}

// Waker tells the delivery worker that registrations have work now, so a
// create, replace, unpark or rewind is acted on at once rather than at the
// next sweep.
type Waker interface {
	Wake(ids ...string)
}

// Events is told of the changes an operator makes through the API
// (events.Publisher is one); Publish must return at once.
type Events interface {
	Publish(events.Event)
}

// Options configure the handler New returns. Store, Journal and Guard are
// required; everything else has a safe default.
type Options struct {
	Store   cursor.Store
	Journal Journal
	// Guard checks every URL before it is stored; without one the API
	// would accept any destination, so New refuses a nil Guard.
	Guard Guard
	// Waker may be nil: the worker then finds the work at its next sweep.
	Waker Waker
	// Token is the bearer token for /v1/*. An empty token refuses every
	// /v1 request rather than admitting everyone.
	Token string
	// Ready reports readiness for /readyz; nil means always ready. Its
	// error text becomes the reason in the 503 answer.
	Ready func(ctx context.Context) error
	// Cluster, with several bridges on one store, adds owner to every
	// registration and serves GET /v1/cluster; nil runs alone.
	Cluster Cluster
	// InFlight tells each registration's POSTs in flight for answers'
	// inFlight; nil answers 0.
	InFlight InFlight
	// Attempts reads the attempt log; nil (the log is off) answers the
	// attempts routes with empty lists.
	Attempts Attempts
	// Resender serves POST /v1/registrations/{id}/resend.
	Resender Resender
	// Tokens keeps the scoped access tokens (CONTRACT §14); nil takes
	// Store's when it keeps them, and otherwise only Token is accepted.
	Tokens cursor.Tokens
	// Events is told of registrations created, deleted and unparked, and
	// of tokens created and revoked; nil publishes nothing.
	Events Events
	// Metrics is served at /metrics without a token; nil answers 404.
	Metrics http.Handler
	// Logger receives one line per change and per internal error; nil
	// discards.
	Logger *slog.Logger
	// Clock is the time source; nil means time.Now.
	Clock func() time.Time
}

// server holds what the handlers share. It is immutable after New, so the
// handlers are safe for concurrent use without locks; bounds guards its
// own state.
type server struct {
	store   cursor.Store
	journal Journal
	bounds  *freshBounds
	head    *head
	guard   Guard
	waker   Waker
	// clusterOf is nil for a bridge alone.
	clusterOf Cluster
	inFlight  InFlight
	attempts  Attempts
	resender  Resender
	events    Events
	// tokenSum is the SHA-256 of the token: comparing fixed-length digests
	// keeps the comparison constant-time in the token's length too.
	tokenSum [sha256.Size]byte
	hasToken bool
	// tokens finds the scoped tokens; nil when the store keeps none.
	tokens  cursor.Tokens
	ready   func(ctx context.Context) error
	metrics http.Handler
	log     *slog.Logger
	now     func() time.Time
}

// New returns the admin API as one handler. It panics when Store, Journal
// or Guard is nil: that is a wiring mistake, found at startup rather than
// at the first request.
func New(opts Options) http.Handler {
	switch {
	case opts.Store == nil:
		panic("admin: Options.Store is nil")
	case opts.Journal == nil:
		panic("admin: Options.Journal is nil")
	case opts.Guard == nil:
		panic("admin: Options.Guard is nil")
	}
	s := &server{
		store:     opts.Store,
		journal:   opts.Journal,
		head:      &head{journal: opts.Journal},
		guard:     opts.Guard,
		waker:     opts.Waker,
		clusterOf: opts.Cluster,
		inFlight:  opts.InFlight,
		attempts:  opts.Attempts,
		resender:  opts.Resender,
		events:    opts.Events,
		tokenSum:  sha256.Sum256([]byte(opts.Token)),
		hasToken:  opts.Token != "",
		tokens:    opts.Tokens,
		ready:     opts.Ready,
		metrics:   opts.Metrics,
		log:       opts.Logger,
		now:       opts.Clock,
	}
	if s.tokens == nil {
		s.tokens, _ = opts.Store.(cursor.Tokens)
	}
	s.bounds = &freshBounds{journal: opts.Journal, head: s.head}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	return s.routes()
}

// wake tells the worker about id, when there is a worker to tell.
func (s *server) wake(id string) {
	if s.waker != nil {
		s.waker.Wake(id)
	}
}

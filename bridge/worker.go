// Package bridge is the delivery engine: it reads the journal past each
// registration's cursor, projects every message, POSTs it, and moves the
// cursor only after a 2xx.
//
// It owns the cursor discipline and nothing else. What a message is sent
// as belongs to a projection, where the cursor lives to the cursor store,
// how a POST is made and which addresses it may reach to the webhook
// sender. It must never import a projection implementation, and it never
// drops a message silently: what cannot be delivered parks with a reason.
package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jetstream-bridge/bridge/cursor"
	"github.com/jetstream-bridge/bridge/events"
	"github.com/jetstream-bridge/bridge/internal/gencache"
	"github.com/jetstream-bridge/bridge/journal"
	"github.com/jetstream-bridge/bridge/projection"
	"github.com/jetstream-bridge/bridge/webhook"
)

const (
	// DefaultMaxAttempts is how many consecutive failures a receiver gets
	// before it is parked: with the backoff schedule, between about fifty
	// minutes and two hours of a receiver being down — a deploy or a
	// certificate renewal, not a webhook that has gone away.
	DefaultMaxAttempts = 32
	// DefaultMaxInFlight is how many POSTs the bridge has in flight at
	// once, over every registration: enough for four keyed registrations
	// of the default width, or 64 receivers of strict ones, so a few slow
	// receivers cannot stall the others; few enough that a backlog is not
	// answered by opening a thousand connections.
	DefaultMaxInFlight = 64
	// DrainPage is how many journal messages one registration drains per
	// turn. A page, not a ceiling: the registration stays due, so a deep
	// backlog finishes over turns instead of holding a fan-out slot for its
	// whole length.
	DrainPage = 256
)

// Journal is what the worker reads: the messages on a subject filter from
// a sequence on, a page at a time.
type Journal interface {
	Read(ctx context.Context, filter string, from uint64, max int) (journal.Page, error)
}

// Sender makes one POST and says how it ended.
type Sender interface {
	Send(ctx context.Context, req webhook.Request) webhook.Outcome
}

// Worker delivers the registrations of one namespace.
//
// Within one registration delivery is strictly sequential, because its
// cursor promises that everything before it was acknowledged, unless it
// asked for ordering keys (see serveKeyed); across registrations it is
// concurrent. Claims and the extra POSTs of keyed turns together stay
// within MaxInFlight. A registration is never in two turns at once.
type Worker struct {
	store   cursor.Store
	journal Journal
	sender  Sender
	proj    projection.Projection
	ns      string

	maxAttempts uint32
	maxInFlight int
	tick        time.Duration
	log         *slog.Logger
	metrics     *Metrics
	series      *deliverySeries
	now         func() time.Time

	sched *scheduler
	// turns carries claimed registrations to Run's turn goroutines. Its
	// capacity is MaxInFlight and only ids claimed within that limit are
	// sent, so a send never waits.
	turns chan string
	// stopping is set when Run's context ends: turns stop at the next
	// message boundary, so a clean stop waits for the POSTs in flight and
	// not for whole pages of backlog.
	stopping atomic.Bool
	// dueNow asks Run to read the due index at its next wakeup.
	dueNow atomic.Bool
	// advanced is told of every acknowledged cursor move, so the daemon
	// flushes when there is something to flush and sleeps otherwise.
	advanced func()
	// recreated is called when a read finds the journal stream re-created:
	// the daemon checks the stream's identity at once, parking every
	// registration, instead of waiting for its next periodic check.
	recreated func(context.Context) error
	// parkings counts the daemon's identity checks that parked every
	// registration: a turn that read its row before one and the journal
	// after it must not deliver from the cursor it read.
	parkings func() uint64
	// owns, when set, says whether this bridge still delivers a
	// registration (see Ownership); asked before every POST.
	owns  func(id string) bool
	cache *projectionCache
	// recorder, when set, is told of every POST (the attempt log).
	recorder Recorder
	// events, when set, is told of failing, recovered, parked, completed
	// and skipped (see WithEvents).
	events *announcer
	// limits are the registrations' rate limits.
	limits *limits
	// tracer, when set, makes a span of every POST (see WithTracer).
	tracer *tracing
	// inFlight counts each registration's POSTs awaiting an answer.
	inFlight inFlight
	// keyed is what keyed registrations' turns remember between turns.
	keyed keyedMemory
	// filters are the registrations' filters and what they share.
	filters *filters
}

// Option configures a Worker.
type Option func(*Worker) error

// WithMaxAttempts sets the consecutive failures after which a registration
// is parked. Zero is refused: it would abandon every receiver on its first
// hiccup.
func WithMaxAttempts(n int) Option {
	return func(w *Worker) error {
		if n <= 0 {
			return fmt.Errorf("max attempts must be at least 1, got %d: a ceiling of zero parks every receiver before its first retry", n)
		}
		w.maxAttempts = uint32(n)
		return nil
	}
}

// WithMaxInFlight sets how many POSTs the worker has in flight at once,
// over every registration (a registration without ordering keys takes
// one). Zero is refused: a worker that may contact nobody is an off
// switch spelled as a setting, and it would report a quiet plane forever.
func WithMaxInFlight(n int) Option {
	return func(w *Worker) error {
		if n <= 0 {
			return fmt.Errorf("max in flight must be at least 1, got %d: a concurrency of zero contacts no receiver while reporting a quiet plane", n)
		}
		w.maxInFlight = n
		return nil
	}
}

// WithTick sets how often Run looks for registrations whose backoff ended.
// New journal messages do not wait for it: Wake starts them at once.
func WithTick(d time.Duration) Option {
	return func(w *Worker) error {
		if d <= 0 {
			return fmt.Errorf("tick must be positive, got %v", d)
		}
		w.tick = d
		return nil
	}
}

// WithLogger sets the logger; the default discards.
func WithLogger(l *slog.Logger) Option {
	return func(w *Worker) error { w.log = l; return nil }
}

// WithMetrics records deliveries and sweeps into m.
func WithMetrics(m *Metrics) Option {
	return func(w *Worker) error { w.metrics = m; return nil }
}

// WithClock sets the clock Run uses for `at` and the webhook timestamp.
func WithClock(now func() time.Time) Option {
	return func(w *Worker) error { w.now = now; return nil }
}

// New returns a worker for the namespace p serves.
func New(store cursor.Store, j Journal, s Sender, p projection.Projection, opts ...Option) (*Worker, error) {
	w := &Worker{
		store: store, journal: j, sender: s, proj: p, ns: string(p.Namespace()),
		maxAttempts: DefaultMaxAttempts,
		maxInFlight: DefaultMaxInFlight,
		tick:        time.Second,
		log:         slog.New(slog.DiscardHandler),
		now:         time.Now,
	}
	for _, opt := range opts {
		if err := opt(w); err != nil {
			return nil, err
		}
	}
	w.series = w.metrics.forNamespace(w.ns)
	w.sched = newScheduler(w.maxInFlight)
	w.turns = make(chan string, w.maxInFlight)
	w.cache = gencache.New[cacheKey, projection.Result](projectionCacheSize)
	w.limits = newLimits()
	w.filters = newFilters()
	return w, nil
}

// failure is one failed attempt as the retry decision needs to see it.
type failure struct {
	// seq is the message that failed.
	seq        uint64
	err        string
	permanent  bool
	retryAfter time.Duration
	status     int
}

// turn is one registration's turn in progress. attempts starts at the
// row's count and drops to zero after any acknowledgement, so the retry
// ceiling counts only consecutive failures.
type turn struct {
	reg      cursor.Registration
	at       time.Time
	next     uint64
	attempts uint32
	p        progress
	// highWater is the furthest cursor the row ever had: a POST below it
	// is a replay.
	highWater uint64
	// started is when the turn began; yielded, that it ended early to
	// free its slot (see yields).
	started time.Time
	yielded bool
	// acked is set at the turn's first 2xx, which may end a failure
	// streak.
	acked bool
	// screened counts the messages below next the filter passed over,
	// written with the next Advance.
	screened screened
}

// serveTurn drains one page of one registration's backlog, as far as its
// receiver allows, and reports whether more is waiting.
// parked is the parkings count read before reg was.
func (w *Worker) serveTurn(ctx context.Context, reg cursor.Registration, at time.Time, parked uint64) (progress, bool, error) {
	t := &turn{reg: reg, at: at, next: reg.NextSeq, attempts: reg.Attempts, highWater: reg.HighWater(), started: time.Now()}
	if w.paced(&t.reg) {
		return t.p, false, w.keepDue(ctx, &t.reg)
	}
	page, err := w.journal.Read(ctx, reg.Subject, reg.NextSeq, DrainPage)
	if errors.Is(err, journal.ErrStreamRecreated) {
		return t.p, false, w.streamRecreated(ctx, reg, err)
	}
	if err != nil {
		return t.p, false, fmt.Errorf("read journal for %s at %d: %w", reg.ID, reg.NextSeq, err)
	}
	if w.parkingsNow() != parked {
		// The stream was re-created and this row parked after it was
		// read: the page is the new stream's, the cursor the old one's.
		w.sched.later(reg.ID)
		return t.p, false, nil
	}
	w.prefetch(ctx, reg, &page)
	if keyed(&reg) {
		return w.serveKeyed(ctx, t, &page)
	}
	if err := w.skip(ctx, t, &page); err != nil {
		return t.p, false, err
	}
	var stop bool
	if b, ok := w.proj.(projection.Batcher); ok && reg.Batch != nil {
		stop, err = w.drainBatches(ctx, t, &page, b)
	} else {
		stop, err = w.drain(ctx, t, &page)
	}
	if stop || err != nil {
		return t.p, false, err
	}
	idle := page.CaughtUp && !t.yielded
	if idle {
		// Every matching message below page.Next was in this page, so a
		// quiet filter's cursor follows the head instead of falling behind
		// it; a later gap is then never mistaken for removed messages.
		t.next = max(t.next, page.Next)
	}
	if err := w.advance(ctx, reg.ID, w.withScreened(cursor.Progress{NextSeq: t.next, Idle: idle}, &t.screened)); err != nil {
		return t.p, false, err
	}
	return t.p, !idle, nil
}

func (w *Worker) parkingsNow() uint64 {
	if w.parkings == nil {
		return 0
	}
	return w.parkings()
}

// streamRecreated ends a turn whose cursor was taken against a stream that
// was deleted and created again: nothing is delivered, and the daemon's
// identity check parks every registration (this one included) before the
// journal serves the new stream. The registration is looked at again at
// the next tick, when it is parked or, if the check could not run, retried.
func (w *Worker) streamRecreated(ctx context.Context, reg cursor.Registration, readErr error) error {
	w.sched.later(reg.ID)
	if w.recreated == nil {
		return fmt.Errorf("read journal for %s at %d: %w", reg.ID, reg.NextSeq, readErr)
	}
	w.log.Debug("journal stream re-created under this cursor; checking the stream's identity", "registration", reg.ID, "nextSeq", reg.NextSeq)
	if err := w.recreated(ctx); err != nil {
		return fmt.Errorf("read journal for %s at %d: %w; checking the stream's identity: %w", reg.ID, reg.NextSeq, readErr, err)
	}
	return nil
}

// prefetch starts reading the page after a full one, and projecting it,
// while this one is delivered: a backlog's next turn then finds both the
// records and what they are sent as in the caches, instead of waiting for
// the server and the projection between two POSTs. The reader shares
// identical reads, so the turn that needs the page joins the fetch if it
// is still running; a record that fails to project is left for the turn,
// which parks on it.
func (w *Worker) prefetch(ctx context.Context, reg cursor.Registration, page *journal.Page) {
	if page.CaughtUp || len(page.Records) < DrainPage {
		return
	}
	w.prefetchFrom(ctx, reg, page.Records[len(page.Records)-1].Seq+1)
}

// prefetchFrom reads, and projects, the page of reg's filter from `from`
// in the background.
func (w *Worker) prefetchFrom(ctx context.Context, reg cursor.Registration, from uint64) {
	target := w.target(reg)
	go func() {
		next, err := w.journal.Read(ctx, reg.Subject, from, DrainPage)
		if err != nil {
			return
		}
		for i := range next.Records {
			if w.stopping.Load() || ctx.Err() != nil {
				return
			}
			_, _ = w.project(target, &next.Records[i])
		}
	}()
}

// skip moves the cursor past messages the stream removed (limits, purge)
// before they were delivered: waiting for them would stall forever.
func (w *Worker) skip(ctx context.Context, t *turn, page *journal.Page) error {
	if page.Skipped == 0 || page.From <= t.next {
		return nil
	}
	t.p.skipped = int(page.Skipped)
	w.log.Warn("journal messages removed by the stream before delivery; skipping them",
		"registration", t.reg.ID, "from", t.next, "to", page.From, "skipped", page.Skipped)
	w.metrics.skipped(w.ns, page.Skipped)
	first := t.next
	t.next = page.From
	if err := w.advance(ctx, t.reg.ID, cursor.Progress{NextSeq: t.next}); err != nil {
		return err
	}
	w.events.skipped(t.reg.ID, first, page.From-1)
	return nil
}

// advance records acknowledged progress in the store's write-behind.
func (w *Worker) advance(ctx context.Context, id string, p cursor.Progress) error {
	if err := w.store.Advance(ctx, id, p); err != nil {
		return err
	}
	if w.advanced != nil {
		w.advanced()
	}
	return nil
}

func (w *Worker) target(reg cursor.Registration) projection.Target {
	return projection.Target{ID: reg.ID, TaskID: reg.TaskID, Format: reg.Format, DataContentType: reg.DataContentType}
}

// drain delivers the page one record at a time; stop reports that the
// turn ended early (a failure, parking or completion).
func (w *Worker) drain(ctx context.Context, t *turn, page *journal.Page) (stop bool, err error) {
	target := w.target(t.reg)
	for i := range page.Records {
		if w.halted(t.reg.ID) {
			return true, nil
		}
		if i > 0 && w.yields(t) {
			t.yielded, t.p.yielded = true, true
			return false, nil
		}
		rec := &page.Records[i]
		v, err := w.screen(&t.reg, rec)
		if err != nil {
			return true, w.unprojectable(ctx, t, rec.Seq, err)
		}
		if !v.deliver {
			// Passed over as if acknowledged: nothing before it is
			// unacknowledged in a strict drain.
			t.screened.add(v)
			t.next = rec.Seq + 1
			continue
		}
		if i > 0 && w.paced(&t.reg) {
			return true, nil
		}
		res, err := w.project(target, rec)
		if err != nil {
			return true, w.unprojectable(ctx, t, rec.Seq, err)
		}
		if f := w.deliver(ctx, t.reg, rec, res.Messages, t.postOf(rec.Seq), &t.p); f != nil {
			return true, w.failed(ctx, t, *f)
		}
		if err := w.acknowledged(ctx, t, rec.Seq, 1, len(res.Messages), res.Terminal); err != nil {
			return true, err
		}
		if res.Terminal {
			t.p.completed++
			w.log.Info("registration completed: terminal message acknowledged", "registration", t.reg.ID, "seq", rec.Seq)
			w.events.publish(events.Completed, t.reg.ID, 0)
			return true, nil
		}
	}
	return false, nil
}

// halted reports that the turn must end before its next POST: the
// worker is stopping, or the registration is no longer this bridge's.
func (w *Worker) halted(id string) bool {
	return w.stopping.Load() || !w.mine(id)
}

// mine reports whether this bridge delivers id (always, alone).
func (w *Worker) mine(id string) bool { return w.owns == nil || w.owns(id) }

// acknowledged records that everything up to lastSeq was answered 2xx.
func (w *Worker) acknowledged(ctx context.Context, t *turn, lastSeq uint64, records, posts int, complete bool) error {
	failures := t.attempts
	t.attempts = 0
	t.next = lastSeq + 1
	t.p.records += records
	p := w.withScreened(cursor.Progress{NextSeq: t.next, Delivered: uint64(posts), Complete: complete}, &t.screened)
	if err := w.advance(ctx, t.reg.ID, p); err != nil {
		return err
	}
	if !t.acked {
		t.acked = true
		w.events.acknowledged(t.reg.ID, lastSeq, failures)
	}
	return nil
}

// unprojectable parks on a message that can never be projected. The
// cursor stays on it so nothing after it overtakes it; an operator rewinds
// past it and unparks.
func (w *Worker) unprojectable(ctx context.Context, t *turn, seq uint64, err error) error {
	reason := err.Error()
	if !strings.Contains(reason, fmt.Sprintf("journal message %d", seq)) {
		reason = fmt.Sprintf("journal message %d cannot be projected: %v", seq, err)
	}
	if err := w.park(ctx, t.reg, t.attempts, failure{seq: seq, err: reason, permanent: true}, &t.p); err != nil {
		return err
	}
	w.events.publish(events.Parked, t.reg.ID, seq)
	return nil
}

// failed handles a POST that was not acknowledged.
func (w *Worker) failed(ctx context.Context, t *turn, f failure) error {
	if ctx.Err() != nil {
		// Shutdown abandoned the POST: not the receiver's failure, and the
		// unacknowledged message is sent again on restart.
		return ctx.Err()
	}
	if !w.mine(t.reg.ID) {
		// The registration passed to another bridge during the POST:
		// retrying or parking is its new owner's decision, and writing
		// this one would reset the attempts that owner counts.
		return nil
	}
	return w.fail(ctx, t.reg, t.at, t.attempts, f, &t.p)
}

// deliver POSTs the messages of one record in order and stops at the first
// failure: none of the record counts as delivered until all of it was.
func (w *Worker) deliver(ctx context.Context, reg cursor.Registration, rec *projection.Record, msgs []projection.Message, how post, p *progress) *failure {
	for i := range msgs {
		req := requestOf(&reg, msgs[i], w.now())
		out := w.post(ctx, &reg, rec.Seq, how.number(&reg), req)
		w.series.delivery(out, rec.Time, w.now())
		w.record(&reg, rec.Seq, i, &msgs[i], how, &req, &out)
		if !out.OK() {
			w.log.Debug("delivery failed", "registration", reg.ID, "seq", rec.Seq, "status", out.Status, "error", out.Error())
			return &failure{seq: rec.Seq, err: out.Error(), permanent: out.Permanent, retryAfter: out.RetryAfter, status: out.Status}
		}
		p.deliveries++
	}
	return nil
}

// requestOf is the POST of msg to reg's receiver at `at`.
func requestOf(reg *cursor.Registration, msg projection.Message, at time.Time) webhook.Request {
	return webhook.Request{
		Namespace:       projection.Namespace(reg.Namespace),
		URL:             reg.URL,
		Message:         msg,
		Secrets:         secrets(reg.Config, at),
		Token:           reg.Token,
		AuthScheme:      reg.AuthScheme,
		AuthCredentials: reg.AuthCredentials,
		OAuth2:          oauth2Of(reg.OAuth2),
		At:              at,
		Headers:         reg.Headers,
		// The same fields: a field added to one and not the other stops
		// the build here.
		TLS: (*webhook.TLS)(reg.TLS),
	}
}

// secrets are the signing keys in force: the current one, and the previous
// one until its rotation window ends, so receivers can switch keys without
// refusing a delivery.
func secrets(c cursor.Config, now time.Time) []string {
	var s []string
	if c.Secret != "" {
		s = append(s, c.Secret)
	}
	if c.PreviousSecret != "" && now.Before(c.PreviousSecretUntil) {
		s = append(s, c.PreviousSecret)
	}
	return s
}

// fail reschedules a failed registration, or parks it. One decision for
// every failure, because two copies of a retry policy agree everywhere
// except the boundary nobody probes.
func (w *Worker) fail(ctx context.Context, reg cursor.Registration, at time.Time, attempts uint32, f failure, p *progress) error {
	// attempts counts the failures before this one, so the ceiling is
	// reached by this failure, not one later.
	failures := attempts + 1
	if f.permanent || failures >= w.maxAttempts {
		if err := w.park(ctx, reg, failures, f, p); err != nil {
			return err
		}
		w.events.failed(reg.ID, f.seq, failures)
		w.events.publish(events.Parked, reg.ID, f.seq)
		return nil
	}
	if err := w.store.Retry(ctx, reg.ID, nextAttemptAt(reg.ID, at, attempts, f.retryAfter), f.err); err != nil {
		return err
	}
	p.retries++
	w.events.failed(reg.ID, f.seq, failures)
	return nil
}

func (w *Worker) park(ctx context.Context, reg cursor.Registration, attempts uint32, f failure, p *progress) error {
	reason := "the receiver did not answer 2xx within the retry ceiling"
	if f.permanent {
		reason = "the destination answered permanently"
	}
	w.log.Warn("parking registration: "+reason+"; its cursor is kept, so `bridge unpark "+reg.ID+"` resumes at the first message the receiver never acknowledged",
		"registration", reg.ID, "namespace", reg.Namespace, "nextSeq", reg.NextSeq, "attempts", attempts, "error", f.err)
	if err := w.store.Park(ctx, reg.ID, f.err); err != nil {
		return err
	}
	p.parked++
	return nil
}

package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jetstream-bridge/bridge/cursor"
	"github.com/jetstream-bridge/bridge/journal"
)

// Tailer reports every message the journal stores from now on. It must
// survive reconnects by itself and return only when ctx ends.
//
// Whenever it starts watching — first, and after any restart — it calls
// notify with an empty subject and the first sequence it will report,
// before anything else, once it has looked at the stream's head: what was
// stored before that look was never reported, and the daemon then wakes
// the registrations those messages concern (see follow). Waking them any
// earlier would leave a registration that went idle just before the look
// waiting for the next message on its filter.
type Tailer interface {
	Tail(ctx context.Context, notify func(subject string, seq uint64)) error
}

// Daemon runs the workers of every namespace against one store and one
// journal: it wakes registrations when a message on their filter lands,
// batches cursor writes, and watches the stream's identity.
type Daemon struct {
	store   cursor.Store
	tail    Tailer
	workers map[string]*Worker
	wild    wildcards
	log     *slog.Logger

	follow follow
	// scan reads the messages of a gap the tail left (see follow).
	scan Journal
	// rewakeKick tells the rewake loop that the tail left a gap.
	rewakeKick chan struct{}

	flushEvery time.Duration
	flushKick  chan struct{}
	identity   *identityWatch
	// owner, when set, limits delivery to this bridge's share.
	owner Ownership
	// events, when set, publishes the operational events.
	events *announcer
}

// DefaultFlushInterval is how long an acknowledged cursor may wait to be
// made durable. A commit costs two fsyncs whatever it carries; every 5 ms
// they took an eighth of a single drain's throughput on a virtual disk,
// every 20 ms they cost little, and a crash repeats at most 20 ms of
// acknowledgements — at-least-once, as promised, never a loss.
const DefaultFlushInterval = 20 * time.Millisecond

// DaemonOption configures a Daemon.
type DaemonOption func(*Daemon)

// WithFlushInterval sets how long an acknowledged cursor may wait before it
// is made durable: the window a crash can repeat, never lose. Zero or
// less keeps DefaultFlushInterval.
func WithFlushInterval(d time.Duration) DaemonOption {
	return func(dm *Daemon) {
		if d > 0 {
			dm.flushEvery = d
		}
	}
}

// WithDaemonLogger sets the daemon's logger.
func WithDaemonLogger(l *slog.Logger) DaemonOption {
	return func(dm *Daemon) { dm.log = l }
}

// NewDaemon ties workers (one per namespace) to the store and the tail.
func NewDaemon(store cursor.Store, tail Tailer, workers []*Worker, opts ...DaemonOption) *Daemon {
	d := &Daemon{
		store:      store,
		tail:       tail,
		workers:    make(map[string]*Worker, len(workers)),
		wild:       wildcards{filters: make(map[string]struct{})},
		log:        slog.New(slog.DiscardHandler),
		flushEvery: DefaultFlushInterval,
		flushKick:  make(chan struct{}, 1),
		rewakeKick: make(chan struct{}, 1),
	}
	for _, opt := range opts {
		opt(d)
	}
	// One budget of POST slots for the whole bridge: --max-in-flight
	// bounds the bridge, whichever namespaces its POSTs are for.
	var b *budget
	for _, w := range workers {
		if b == nil {
			b = w.sched.budget
		} else {
			b.share(w.sched)
		}
		d.workers[w.ns] = w
		d.scan = w.journal
		w.advanced = d.kickFlush
		w.recreated = d.checkIdentity
		if d.owner != nil {
			w.owns = d.owns
		}
		w.events = d.events
		if d.identity != nil {
			w.parkings = d.identity.parkings.Load
		}
	}
	if d.identity != nil {
		d.identity.log = d.log
		d.identity.events = d.events
		// The tail and the workers' journals are usually one reader;
		// confirming it more than once is harmless.
		for _, j := range append([]any{tail}, journals(workers)...) {
			if c, ok := j.(StreamConfirmer); ok {
				d.identity.confirm = append(d.identity.confirm, c)
			}
		}
	}
	return d
}

func journals(workers []*Worker) []any {
	out := make([]any, len(workers))
	for i, w := range workers {
		out[i] = w.journal
	}
	return out
}

// checkIdentity runs the stream identity check now, for a turn whose read
// found the stream re-created: it parks every registration before the
// journal serves the new stream. Without a check configured nothing can
// vouch for the cursors, so the journal keeps refusing.
func (d *Daemon) checkIdentity(ctx context.Context) error {
	if d.identity == nil {
		return errors.New("the journal stream was re-created and this daemon does not check the stream's identity")
	}
	return d.identity.check(ctx)
}

// Wake tells the daemon that these registrations changed (created,
// replaced, unparked, rewound) and may have work now.
func (d *Daemon) Wake(ids ...string) {
	for _, id := range ids {
		reg, err := d.store.Get(context.Background(), id)
		if err != nil {
			continue
		}
		d.route(reg)
	}
}

func (d *Daemon) route(reg cursor.Registration) {
	w := d.workers[reg.Namespace]
	if w == nil || reg.State != cursor.Active || !d.owns(reg.ID) {
		return
	}
	d.wild.add(reg.Subject)
	w.Wake(reg.ID)
}

// Run serves until ctx ends, then lets in-flight POSTs finish (or abandons
// them after ShutdownGrace) and makes every acknowledged cursor durable.
func (d *Daemon) Run(ctx context.Context) error {
	if d.identity != nil {
		if err := d.firstCheck(ctx); err != nil {
			return nil // stopped before anything was delivered
		}
	}
	if err := d.loadMark(ctx); err != nil {
		return err
	}
	if err := d.load(ctx); err != nil {
		return err
	}
	var wg sync.WaitGroup
	wg.Go(func() { d.rewakeLoop(ctx) })
	wg.Go(func() { d.tailLoop(ctx) })
	if d.owner != nil {
		wg.Go(func() { d.ownershipLoop(ctx) })
	}
	for _, w := range d.workers {
		wg.Go(func() { _ = w.Run(ctx) })
	}
	flushErr := d.flushLoop(ctx)
	wg.Wait()
	if err := d.store.Flush(context.Background()); err != nil {
		return fmt.Errorf("flushing cursors at shutdown: %w", err)
	}
	if err := d.saveMark(context.Background()); err != nil {
		// Only the next start's speed depends on it: without the mark it
		// wakes every idle registration behind the tail.
		d.log.Error("recording how far the stream was followed", "error", err)
	}
	return flushErr
}

// firstCheck confirms the stream's identity before any delivery, retrying
// while the journal or the store does not answer — a cluster electing
// leaders answers nothing for seconds — instead of ending the bridge,
// which in a cluster of bridges would turn an election into the loss of
// a bridge. Delivering before the check could serve the cursors of a
// re-created stream. It fails only when ctx ends.
func (d *Daemon) firstCheck(ctx context.Context) error {
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
		err := d.identity.check(ctx)
		if err == nil || ctx.Err() != nil {
			return ctx.Err()
		}
		d.log.Warn("checking the journal stream before delivering; retrying", "error", err, "retryIn", wait)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

// load learns the distinct wildcard filters of the active registrations;
// literal ones are looked up in the store by each message's subject. The
// tail's start wakes the registrations that may have missed messages
// while the bridge was down (see Tailer and rewake).
func (d *Daemon) load(ctx context.Context) error {
	if err := d.store.WildcardFilters(ctx, d.wild.add); err != nil {
		return fmt.Errorf("loading the wildcard filters of registrations: %w", err)
	}
	return nil
}

// tailLoop wakes registrations as their messages land, and those of the
// messages it skipped when the tail (re)starts. The tail survives
// reconnects itself; an error here is logged and the tail restarted.
func (d *Daemon) tailLoop(ctx context.Context) {
	for ctx.Err() == nil {
		if err := d.tail.Tail(ctx, d.notified); err != nil && ctx.Err() == nil {
			d.log.Error("journal tail stopped; restarting", "error", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
}

// notified hands the registrations a new message woke to free turns, or
// marks them woken. An empty subject says the tail (re)started announcing
// at seq: the rewake loop wakes whoever the messages it skipped concern.
func (d *Daemon) notified(subject string, seq uint64) {
	if subject == "" {
		d.follow.restarted(seq)
		d.kickRewake()
		return
	}
	d.wakeSubject(context.Background(), subject, seq)
	d.follow.announced(seq)
}

// wildcards are the distinct wildcard filters of active registrations:
// a message's subject is matched against each, then the store is asked
// for the registrations of those that match. A filter stays until the
// process ends, since one no registration uses any more costs one empty
// lookup per matching message, and forgetting it could race a create.
type wildcards struct {
	mu      sync.RWMutex
	filters map[string]struct{}
}

func (w *wildcards) add(filter string) {
	if !cursor.IsWildcard(filter) {
		return
	}
	w.mu.Lock()
	w.filters[filter] = struct{}{}
	w.mu.Unlock()
}

func (w *wildcards) matching(subject string) []string {
	w.mu.RLock()
	defer w.mu.RUnlock()
	var out []string
	for f := range w.filters {
		if journal.SubjectMatches(f, subject) {
			out = append(out, f)
		}
	}
	return out
}

// kickFlush tells the flush loop that a cursor moved.
func (d *Daemon) kickFlush() {
	select {
	case d.flushKick <- struct{}{}:
	default:
	}
}

// flushLoop makes acknowledged cursors durable at most flushEvery after
// they moved — one commit for everything acknowledged in that window —
// and sleeps while nothing moves, so an idle bridge does not wake. It
// checks the stream's identity every second. A failed flush keeps the
// cursors pending and is retried: durability lags, it is never skipped.
func (d *Daemon) flushLoop(ctx context.Context) error {
	check := time.NewTicker(time.Second)
	defer check.Stop()
	var lastErr error
	var took time.Duration
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-d.flushKick:
			// Wait at least twice as long as the last commit took, so a
			// commit of many cursors never occupies more than a third of
			// the time; more acknowledgements ride on each commit instead.
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(max(d.flushEvery, 2*took)):
			}
			start := time.Now()
			err := d.store.Flush(ctx)
			took = time.Since(start)
			if err != nil {
				if lastErr == nil || err.Error() != lastErr.Error() {
					d.log.Error("flushing cursors failed; acknowledged cursors stay pending and are retried", "error", err)
				}
				// Retry without spinning on a full or read-only disk.
				time.AfterFunc(time.Second, d.kickFlush)
			}
			lastErr = err
		case <-check.C:
			if d.identity == nil {
				continue
			}
			if err := d.identity.check(ctx); err != nil && !errors.Is(err, context.Canceled) {
				d.log.Error("checking the journal stream", "error", err)
			}
		}
	}
}

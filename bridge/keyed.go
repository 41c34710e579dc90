package bridge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jetstream-bridge/bridge/attempt"
	"github.com/jetstream-bridge/bridge/cursor"
	"github.com/jetstream-bridge/bridge/events"
	"github.com/jetstream-bridge/bridge/journal"
	"github.com/jetstream-bridge/bridge/projection"
)

// A registration with ordering keys (CONTRACT §12) keeps many POSTs in
// flight. Its cursor is a window: NextSeq is still the first message not
// acknowledged, and what was acknowledged past it is kept in the row's
// Ahead, so a restart or a takeover skips it. The seed's discipline holds
// per key instead of per registration: a message is POSTed for the first
// time only when no earlier message with its key is unacknowledged, and
// nothing is ever remembered as acknowledged that was not answered 2xx.

// keyed reports whether reg is served by the keyed engine: it asked for
// ordering keys, or it has acknowledgements ahead of its cursor from a
// time it did (a PUT back to strict order must not POST them again).
func keyed(reg *cursor.Registration) bool {
	return reg.Batch == nil && (reg.Keyed() || len(reg.Ahead) > 0)
}

// widthOf is how many POSTs of reg may be in flight at once.
func widthOf(reg *cursor.Registration) int {
	if !reg.Keyed() {
		return 1
	}
	if n := reg.Ordering.MaxInFlight; n > 0 {
		return n
	}
	return cursor.DefaultOrderMaxInFlight
}

// keyedMemory is what a keyed registration's turns hand on to its next
// turn on this bridge: each failing message's streak and backoff, and
// until when the registration cannot go on. It lives in memory only: a
// restart or another bridge retries the failing messages at once, which
// repeats no acknowledged message. Only one turn of an id runs at a time,
// so a state taken out is the turn's alone until it is put back.
type keyedMemory struct {
	mu   sync.Mutex
	regs map[string]*keyedState
}

type keyedState struct {
	failing map[uint64]msgFailure
	// holdUntil is when the registration may POST again: the end of a
	// pause its receiver asked for (Retry-After on 429 or 503), or the
	// earliest backoff of the failing keys that fill its window.
	holdUntil time.Time
}

// msgFailure is one message's streak of failures.
type msgFailure struct {
	attempts uint32
	retryAt  time.Time
	err      string
}

func (m *keyedMemory) take(id string) *keyedState {
	m.mu.Lock()
	defer m.mu.Unlock()
	if st, ok := m.regs[id]; ok {
		delete(m.regs, id)
		return st
	}
	return &keyedState{failing: make(map[uint64]msgFailure)}
}

// put keeps st for id's next turn, unless it holds nothing.
func (m *keyedMemory) put(id string, st *keyedState) {
	if len(st.failing) == 0 && st.holdUntil.IsZero() {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.regs == nil {
		m.regs = make(map[string]*keyedState)
	}
	m.regs[id] = st
}

// keyedRec is one loaded message of a keyed turn.
type keyedRec struct {
	rec     projection.Record
	key     string
	posting bool
	acked   bool
	// how is what its POST is, for the attempt log, set when it is taken.
	how post
}

// landing is the end of one message's POSTs.
type landing struct {
	r *keyedRec
	f *failure
	p progress
	// unprojectable: f says why r can never be sent.
	unprojectable bool
}

// keyedTurn is one turn of a keyed registration: it reads the journal past
// the cursor, up to WindowSize sequences ahead, and keeps up to its width
// of POSTs in flight, each message starting once its key is free.
type keyedTurn struct {
	w         *Worker
	t         *turn
	ctx       context.Context
	key       keyOf
	unordered bool
	width     int
	st        *keyedState

	// base is the first message not acknowledged, as far as this turn
	// knows; acked holds what was acknowledged at or past it, ascending.
	base  uint64
	acked cursor.Ahead
	// recs are the loaded messages at or past base, ascending; from is
	// where the next read starts and next how far an idle cursor may go.
	recs     []*keyedRec
	from     uint64
	next     uint64
	caughtUp bool
	// full says a read stopped at the window's end.
	full bool

	mu sync.Mutex
	// workers are the goroutines making POSTs, posting those in a POST;
	// kick tells run that one stopped. reading says one reads the journal.
	workers int
	posting int
	kick    chan struct{}
	reading bool
	// looked is when the row was last read; changed, that it no longer
	// stands as the turn read it.
	looked  time.Time
	changed bool
	// stopped ends dispatching: the turn only waits for its POSTs.
	stopped bool
	// err is a store write that failed; the turn ends with it.
	err error
	// paced says the rate limit stopped it; its timer wakes the
	// registration. readErr is a read ahead that failed.
	paced   bool
	readErr error
	// park, when set, is the failure the registration parks on once its
	// POSTs have landed, after failures attempts.
	park     *failure
	failures uint32
	// delivered counts POSTs answered 2xx since the last Advance;
	// screened, the messages the filter passed over.
	delivered uint64
	screened  screened
	// blocked is each's scratch set of keys with an earlier message
	// unacknowledged.
	blocked map[string]struct{}
}

// serveKeyed runs the turn of a keyed registration from its first page.
func (w *Worker) serveKeyed(ctx context.Context, t *turn, page *journal.Page) (progress, bool, error) {
	key, unordered, err := orderKey(t.reg.Ordering)
	if err != nil {
		return t.p, false, w.park(ctx, t.reg, t.attempts, failure{seq: t.next, err: err.Error(), permanent: true}, &t.p)
	}
	k := &keyedTurn{
		w: w, t: t, ctx: ctx, key: key, unordered: unordered, width: widthOf(&t.reg),
		st:   w.keyed.take(t.reg.ID),
		base: t.next, looked: t.started,
		from:  t.next,
		acked: slices.Clone(t.reg.Ahead.Trim(t.next)),
	}
	defer w.keyed.put(t.reg.ID, k.st)
	k.kick = make(chan struct{}, 1)
	defer w.sched.hook(t.reg.ID, k.poke)()
	k.blocked = make(map[string]struct{})
	if hold := k.st.holdUntil; hold.After(t.at) {
		return t.p, false, k.save(hold)
	}
	k.st.holdUntil = time.Time{}
	k.load(page)
	more, err := k.run()
	return t.p, more, err
}

// load takes page's records into the turn, up to the window's end.
func (k *keyedTurn) load(page *journal.Page) {
	if page.From > k.from {
		k.skipped(page.From)
	}
	k.caughtUp, k.full = page.CaughtUp, false
	fresh := 0
	for i := range page.Records {
		rec := &page.Records[i]
		if rec.Seq < k.from {
			continue
		}
		if rec.Seq >= k.base+cursor.WindowSize {
			k.from, k.caughtUp, k.full = rec.Seq, false, true
			break
		}
		k.from = rec.Seq + 1
		if k.acked.Contains(rec.Seq) {
			// Acknowledged before (a restart, a takeover, an unpark):
			// it holds no key back, and is not kept.
			continue
		}
		fresh++
		// A copy: the page's array is not kept alive by one record.
		r := &keyedRec{rec: *rec}
		if k.screen(r); r.acked {
			// Passed over by the filter: acknowledged as the above.
			continue
		}
		r.key = k.key(rec)
		k.recs = append(k.recs, r)
	}
	if !k.full {
		k.from = max(k.from, page.Next)
		k.next = page.Next
	}
	k.settle()
	if fresh > 0 && !page.CaughtUp && !k.full && len(page.Records) == DrainPage {
		// The next page is read while this one is POSTed, so a backlog's
		// POSTs do not all land before it arrives.
		k.w.prefetchFrom(k.ctx, k.t.reg, k.from)
	}
}

// screen runs the registration's filter on a loaded message: one it
// does not deliver is acknowledged at once, joining the window as a 2xx
// would; one it cannot be run on stops the turn to park on it.
func (k *keyedTurn) screen(r *keyedRec) {
	v, err := k.w.screen(&k.t.reg, &r.rec)
	switch {
	case err != nil:
		k.stop(&failure{seq: r.rec.Seq, err: err.Error(), permanent: true}, k.st.failing[r.rec.Seq].attempts+1)
	case !v.deliver:
		k.ack(r)
		k.screened.add(v)
	}
}

// skipped moves past messages the stream removed before this turn read
// them, as the strict engine does: waiting for them would stall forever.
func (k *keyedTurn) skipped(to uint64) {
	w, id := k.w, k.t.reg.ID
	n := to - k.from
	w.log.Warn("journal messages removed by the stream before delivery; skipping them",
		"registration", id, "from", k.from, "to", to, "skipped", n)
	w.metrics.skipped(w.ns, n)
	w.events.skipped(id, k.from, to-1)
	k.t.p.skipped += int(n)
	k.from = to
}

// settle drops the acknowledged messages at the front and moves base to
// the first message not acknowledged.
func (k *keyedTurn) settle() {
	i := 0
	for i < len(k.recs) && k.recs[i].acked {
		i++
	}
	k.recs = k.recs[i:]
	nb := k.from
	if len(k.recs) > 0 {
		nb = k.recs[0].rec.Seq
	}
	if nb == k.base {
		return
	}
	k.base = nb
	if i, _ := slices.BinarySearch(k.acked, nb); i > 0 {
		k.acked = k.acked[i:]
	}
	for s := range k.st.failing {
		if s < nb {
			delete(k.st.failing, s)
		}
	}
}

// run serves the turn until nothing more can be POSTed in it and every
// POST has landed; more reports work left for another turn.
//
// The POSTs are made by up to width workers, each taking the next message
// that may go, POSTing it and recording its answer, so a landing goes on
// to the next POST on the goroutine that made it. This goroutine starts
// workers when messages become free (a page read, a backoff ended) and
// ends the turn when the last one stops. Every field of k is guarded by
// k.mu, held here except while waiting.
func (k *keyedTurn) run() (more bool, err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for {
		k.spawn()
		if k.readMore() {
			continue
		}
		if k.workers == 0 {
			return k.finish()
		}
		k.waitLocked()
	}
}

// poke wakes run: a worker stopped, or a message for the turn landed.
func (k *keyedTurn) poke() {
	select {
	case k.kick <- struct{}{}:
	default:
	}
}

// waitLocked waits, without k.mu, for a worker to stop or for the
// earliest backoff of a failing message to end.
func (k *keyedTurn) waitLocked() {
	var timer <-chan time.Time
	if at, ok := k.nextRetry(); ok && !k.stopped {
		tm := time.NewTimer(max(at.Sub(k.w.now()), time.Millisecond))
		defer tm.Stop()
		timer = tm.C
	}
	k.mu.Unlock()
	defer k.mu.Lock()
	select {
	case <-k.kick:
	case <-timer:
	}
}

// spawn starts workers for the messages that may go now, as far as the
// width and the bridge's slots allow: the turn's claim is its first
// worker's slot, and the scheduler grants each other one.
func (k *keyedTurn) spawn() {
	idle := k.workers - k.posting
	for n := k.free(k.width) - idle; n > 0 && k.workers < k.width && !k.stopped; n-- {
		if k.workers > 0 && !k.w.sched.grow(k.workers, k.w.maxInFlight) {
			return
		}
		k.workers++
		go k.work()
	}
}

// work POSTs messages until none may go, then gives its slot back.
func (k *keyedTurn) work() {
	k.mu.Lock()
	for {
		r := k.pick()
		if r == nil {
			if k.readMore() {
				continue
			}
			break
		}
		k.mu.Unlock()
		l := k.post(r)
		k.mu.Lock()
		k.land(l)
	}
	if k.workers > 1 {
		k.w.sched.shrink()
	}
	k.workers--
	k.mu.Unlock()
	k.poke()
}

// post projects r and makes its POSTs, without k.mu.
func (k *keyedTurn) post(r *keyedRec) landing {
	w, reg := k.w, k.t.reg
	if w.removedFromStream(reg.ID, r.rec.Seq) {
		// Loaded before the stream removed it: passed over, as the
		// strict drain passes it (the window moves past it).
		return landing{r: r}
	}
	res, err := w.project(w.target(reg), &r.rec)
	if err != nil {
		reason := err.Error()
		if want := fmt.Sprintf("journal message %d", r.rec.Seq); !strings.Contains(reason, want) {
			reason = fmt.Sprintf("journal message %d cannot be projected: %v", r.rec.Seq, err)
		}
		return landing{r: r, f: &failure{seq: r.rec.Seq, err: reason, permanent: true}, unprojectable: true}
	}
	var p progress
	f := w.deliver(k.ctx, reg, &r.rec, res.Messages, r.how, &p)
	return landing{r: r, f: f, p: p}
}

// readMore reads the next page when the turn has room for POSTs that its
// loaded messages cannot fill; false when there is nothing to read. k.mu
// is released during the read, which one goroutine makes at a time.
func (k *keyedTurn) readMore() bool {
	if k.reading || k.stopped || k.posting >= k.width || k.from >= k.base+cursor.WindowSize {
		return false
	}
	switch {
	case !k.current():
		// A PUT, a park, a rewind or a delete: the next turn starts
		// from the row as it stands.
		return false
	case k.caughtUp:
		// A message published during the turn woke it: read again
		// rather than end the turn and start another for it.
		if !k.w.sched.takeWake(k.t.reg.ID) {
			return false
		}
	case k.free(1) > 0:
		return false
	}
	k.reading = true
	from := k.from
	k.mu.Unlock()
	page, err := k.w.journal.Read(k.ctx, k.t.reg.Subject, from, DrainPage)
	k.mu.Lock()
	k.reading = false
	if err != nil {
		k.readErr = fmt.Errorf("read journal for %s at %d: %w", k.t.reg.ID, from, err)
		k.stopped = true
		return false
	}
	k.load(&page)
	k.spawn()
	return true
}

// keyedTurnSpan is how long a keyed turn trusts the row it read: a turn
// that goes on reading the journal (a backlog, or messages as they
// arrive) reads its row again once a span, and stops POSTing when a PUT,
// a park, a rewind or a delete changed it, so the next turn starts from
// the row as it stands.
const keyedTurnSpan = time.Second

// current reports whether the row is still as the turn read it, reading
// it again once keyedTurnSpan has passed since the last look; k.mu is
// released during the read.
func (k *keyedTurn) current() bool {
	if k.changed || k.reading || time.Since(k.looked) < keyedTurnSpan {
		return !k.changed
	}
	k.reading = true
	k.mu.Unlock()
	reg, err := k.w.store.Get(k.ctx, k.t.reg.ID)
	k.mu.Lock()
	k.reading = false
	k.looked = time.Now()
	k.changed = err != nil || reg.State != cursor.Active || reg.NextSeq < k.base ||
		!reflect.DeepEqual(reg.Config, k.t.reg.Config)
	if k.changed {
		// Nothing more is POSTed as the old row says.
		k.stopped = true
	}
	return !k.changed
}

// free counts, up to limit, the loaded messages that may be POSTed now:
// not acknowledged, not in flight, not backing off, and first of their
// key among the unacknowledged.
func (k *keyedTurn) free(limit int) int {
	n := 0
	k.each(func(*keyedRec) bool {
		n++
		return n < limit
	})
	return n
}

// each calls fn with every loaded message that may be POSTed now, in
// stream order, until fn returns false.
func (k *keyedTurn) each(fn func(*keyedRec) bool) {
	clear(k.blocked)
	now := k.w.now()
	for _, r := range k.recs {
		if r.acked {
			continue
		}
		if !k.unordered {
			if _, b := k.blocked[r.key]; b {
				continue
			}
			k.blocked[r.key] = struct{}{}
		}
		if r.posting {
			continue
		}
		if f, ok := k.st.failing[r.rec.Seq]; ok && f.retryAt.After(now) {
			continue
		}
		if !fn(r) {
			return
		}
	}
}

// pick takes the first message that may be POSTed now, marking it in
// flight; nil when none may or the turn must not start another POST.
func (k *keyedTurn) pick() *keyedRec {
	if k.stopped || !k.current() || k.halted() {
		k.stopped = true
		return nil
	}
	var r *keyedRec
	k.each(func(c *keyedRec) bool {
		r = c
		return false
	})
	if r != nil {
		r.posting, r.how = true, k.postOf(r.rec.Seq)
		k.posting++
	}
	return r
}

// halted reports that the turn must not start another POST.
func (k *keyedTurn) halted() bool {
	w, t := k.w, k.t
	switch {
	case w.halted(t.reg.ID):
		return true
	case k.posting > 0 && w.yields(t):
		t.yielded, t.p.yielded = true, true
		return true
	case w.paced(&t.reg):
		k.paced = true
		return true
	}
	return false
}

// postOf says what POSTing seq is, for the attempt log.
func (k *keyedTurn) postOf(seq uint64) post {
	if f, ok := k.st.failing[seq]; ok && f.attempts > 0 {
		return post{trigger: attempt.TriggerRetry, attempt: f.attempts + 1}
	}
	if seq < k.t.highWater {
		return post{trigger: attempt.TriggerReplay}
	}
	return post{trigger: attempt.TriggerDelivery, attempt: 1}
}

// nextRetry is the earliest end of a failing message's backoff.
func (k *keyedTurn) nextRetry() (time.Time, bool) {
	var at time.Time
	for _, f := range k.st.failing {
		if at.IsZero() || f.retryAt.Before(at) {
			at = f.retryAt
		}
	}
	return at, !at.IsZero()
}

// land records one message's POSTs: acknowledged, it joins the window;
// failed, it backs off alone, pauses the registration, or parks it. A
// store error ends the turn with it.
func (k *keyedTurn) land(l landing) {
	k.posting--
	l.r.posting = false
	k.t.p.deliveries += l.p.deliveries
	var err error
	switch {
	case l.unprojectable:
		k.stop(l.f, k.st.failing[l.r.rec.Seq].attempts+1)
	case l.f == nil:
		err = k.acknowledge(l.r, l.p.deliveries)
	default:
		err = k.failed(l.r, *l.f)
	}
	if err != nil && k.err == nil {
		k.err, k.stopped = err, true
	}
}

// ack marks r acknowledged, in the window.
func (k *keyedTurn) ack(r *keyedRec) {
	r.acked = true
	if i, found := slices.BinarySearch(k.acked, r.rec.Seq); !found {
		k.acked = slices.Insert(k.acked, i, r.rec.Seq)
	}
}

func (k *keyedTurn) acknowledge(r *keyedRec, posts int) error {
	seq := r.rec.Seq
	k.ack(r)
	k.delivered += uint64(posts)
	k.t.p.records++
	if f, ok := k.st.failing[seq]; ok {
		delete(k.st.failing, seq)
		k.w.events.acknowledged(k.t.reg.ID, seq, f.attempts)
	}
	k.settle()
	return k.save(time.Time{})
}

// failed handles one message that was not acknowledged.
func (k *keyedTurn) failed(r *keyedRec, f failure) error {
	w, t := k.w, k.t
	if k.ctx.Err() != nil || !w.mine(t.reg.ID) {
		// Abandoned by a stop, or the registration moved to another
		// bridge: neither is the receiver's failure to count.
		k.stopped = true
		return nil
	}
	prev := k.st.failing[f.seq]
	failures := prev.attempts + 1
	w.events.failed(t.reg.ID, f.seq, failures)
	if f.permanent || failures >= w.maxAttempts {
		k.stop(&f, failures)
		return nil
	}
	now := w.now()
	retryAt := nextAttemptAt(fmt.Sprintf("%s/%d", t.reg.ID, f.seq), now, prev.attempts, f.retryAfter)
	k.st.failing[f.seq] = msgFailure{attempts: failures, retryAt: retryAt, err: f.err}
	t.p.retries++
	if f.retryAfter > 0 && (f.status == http.StatusTooManyRequests || f.status == http.StatusServiceUnavailable) {
		// The receiver speaks for itself, not for one key: nothing of the
		// registration is POSTed before the pause ends.
		k.st.holdUntil = retryAt
		k.stopped = true
	}
	return k.save(time.Time{})
}

// stop ends dispatching to park on f once the POSTs in flight landed.
func (k *keyedTurn) stop(f *failure, failures uint32) {
	if k.park == nil {
		k.park, k.failures = f, failures
	}
	k.stopped = true
}

// finish ends the turn with nothing in flight.
func (k *keyedTurn) finish() (more bool, err error) {
	w, t := k.w, k.t
	switch {
	case k.park != nil:
		return false, k.parkNow()
	case k.ctx.Err() != nil || w.stopping.Load() || !w.mine(t.reg.ID):
		return false, k.save(time.Time{})
	case k.readErr != nil || k.err != nil:
		return false, errors.Join(k.readErr, k.err, k.save(time.Time{}))
	case t.yielded || k.changed:
		// Its slot goes to another, or its row changed: served again
		// soon, from the row as it stands.
		return true, k.save(w.now())
	case k.paced:
		// The rate limit's timer wakes it; due now in the store, so a
		// stop before the timer fires does not leave it waiting.
		return false, k.save(w.now())
	}
	if len(k.recs) == 0 && k.caughtUp && k.st.holdUntil.IsZero() {
		return false, k.idle()
	}
	at, ok := k.nextRetry()
	if hold := k.st.holdUntil; !hold.IsZero() {
		at, ok = hold, true
	}
	if !ok {
		// Nothing fails and nothing waits, yet messages are left: look
		// again at once.
		return true, k.save(w.now())
	}
	if k.full {
		// Failing keys hold a full window: new messages cannot go
		// before the earliest of them is retried.
		k.st.holdUntil = at
	}
	return false, k.save(at)
}

// idle records that every message up to the head was acknowledged.
func (k *keyedTurn) idle() error {
	k.base = max(k.base, k.next)
	k.acked = nil
	return k.advance(cursor.Progress{Idle: true})
}

// save records the window; a non-zero due makes the row due then.
func (k *keyedTurn) save(due time.Time) error {
	p := cursor.Progress{RetryAt: due}
	if f, ok := k.st.failing[k.base]; ok {
		p.Attempts, p.LastError = f.attempts, f.err
	}
	return k.advance(p)
}

// advance writes the window with p's schedule and failures.
func (k *keyedTurn) advance(p cursor.Progress) error {
	p.NextSeq, p.Window, p.Delivered = k.base, true, k.delivered
	p.Ahead = slices.Clone(k.acked)
	p = k.w.withScreened(p, &k.screened)
	k.delivered = 0
	k.t.next = k.base
	return k.w.advance(k.ctx, k.t.reg.ID, p)
}

// parkNow parks the registration on k.park, its window saved first so
// that an unpark POSTs nothing acknowledged again.
func (k *keyedTurn) parkNow() error {
	w, t := k.w, k.t
	// Park counts the failure that parks, so the row's attempts read as
	// the parking message's streak.
	if err := k.advance(cursor.Progress{Attempts: k.failures - 1, LastError: k.park.err}); err != nil {
		return err
	}
	k.st.failing, k.st.holdUntil = make(map[uint64]msgFailure), time.Time{}
	if err := w.park(k.ctx, t.reg, k.failures, *k.park, &t.p); err != nil {
		return err
	}
	w.events.publish(events.Parked, t.reg.ID, k.park.seq)
	return nil
}

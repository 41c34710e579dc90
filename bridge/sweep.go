package bridge

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jetstream-bridge/bridge/cursor"
)

// scheduler is the in-memory side of a worker's due order: which
// registrations are in a turn, and which idle ones a new journal message
// woke. The store's due index holds rows that are due by time (new,
// backing off, unparked); idle rows are caught up and cost nothing until a
// message on their filter wakes them here.
//
// Invariant: an id is in at most one turn. A wake for an id in a turn stays
// in woken and is served after the turn, so a message published while the
// turn decided it was caught up is never left waiting.
type scheduler struct {
	mu       sync.Mutex
	inflight map[string]struct{}
	woken    map[string]struct{}
	deferred map[string]struct{}
	// waiting says the dispatcher may have work when a slot frees: it is
	// dispatching now, or it left due rows without a slot. A turn's end
	// wakes the dispatcher only then, or for a woken row, so a live
	// message's turn does not wake a second goroutine for nothing.
	waiting bool
	// extra counts the POST slots keyed turns hold beyond their claim
	// (see grow): a slot is a claim or an extra, and the slots of every
	// scheduler sharing the budget never exceed its limit.
	extra  int
	budget *budget
	kick   chan struct{}
	// hooks are called by wake for ids in a turn that asked (see hook).
	hooks map[string]func()
}

// budget is the POST slots of the whole bridge (--max-in-flight), shared
// by the schedulers of every namespace's worker: a slot is taken by a
// claim or a keyed turn's extra POST, under the taking scheduler's lock,
// and a release that frees a full budget pokes every scheduler, since
// the one waiting for the slot may be another namespace's.
type budget struct {
	limit  int
	used   atomic.Int64
	scheds []*scheduler
}

func newBudget(limit int) *budget { return &budget{limit: limit} }

// share makes s take its slots from b.
func (b *budget) share(s *scheduler) {
	b.scheds = append(b.scheds, s)
	s.budget = b
}

// acquire takes a slot while fewer than min(limit, b.limit) are taken;
// math.MaxInt, from a caller bounding its turns itself (Sweep), takes one
// whatever the budget's limit, and counts it.
func (b *budget) acquire(limit int) bool {
	if limit != math.MaxInt {
		limit = min(limit, b.limit)
	}
	for {
		u := b.used.Load()
		if u >= int64(limit) {
			return false
		}
		if b.used.CompareAndSwap(u, u+1) {
			return true
		}
	}
}

func (b *budget) release() {
	if b.used.Add(-1) == int64(b.limit)-1 {
		for _, s := range b.scheds {
			s.poke()
		}
	}
}

func (b *budget) full() bool { return b.free() <= 0 }

// free is how many slots are not taken.
func (b *budget) free() int { return b.limit - int(b.used.Load()) }

func newScheduler(limit int) *scheduler {
	s := &scheduler{
		inflight: make(map[string]struct{}),
		woken:    make(map[string]struct{}),
		deferred: make(map[string]struct{}),
		kick:     make(chan struct{}, 1),
	}
	newBudget(limit).share(s)
	return s
}

func (s *scheduler) wake(ids ...string) {
	var hooks []func()
	s.mu.Lock()
	for _, id := range ids {
		s.woken[id] = struct{}{}
		if h, ok := s.hooks[id]; ok {
			hooks = append(hooks, h)
		}
	}
	s.mu.Unlock()
	for _, h := range hooks {
		h()
	}
	s.poke()
}

// hook has fn called when id is woken while it is in a turn, until the
// returned func is called: a keyed turn waiting for a slow POST reads the
// new message at once instead of after the POST.
func (s *scheduler) hook(id string, fn func()) (unhook func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hooks == nil {
		s.hooks = make(map[string]func())
	}
	s.hooks[id] = fn
	return func() {
		s.mu.Lock()
		delete(s.hooks, id)
		s.mu.Unlock()
	}
}

// wakeQuiet marks id woken without a poke, for callers that wake many ids
// and poke once.
func (s *scheduler) wakeQuiet(id string) {
	s.mu.Lock()
	s.woken[id] = struct{}{}
	h := s.hooks[id]
	s.mu.Unlock()
	if h != nil {
		h()
	}
}

func (s *scheduler) poke() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// later retries a registration whose turn failed on the bridge's side
// (journal or store unavailable) at the next tick instead of at once, so
// an outage is not a busy loop.
func (s *scheduler) later(id string) {
	s.mu.Lock()
	s.deferred[id] = struct{}{}
	s.mu.Unlock()
}

// wakeInflight marks every registration in a turn woken, so each is served
// again after its turn: a turn that found it caught up before the daemon
// started following the stream again may have missed a message.
func (s *scheduler) wakeInflight() {
	var hooks []func()
	s.mu.Lock()
	for id := range s.inflight {
		s.woken[id] = struct{}{}
		if h, ok := s.hooks[id]; ok {
			hooks = append(hooks, h)
		}
	}
	s.mu.Unlock()
	for _, h := range hooks {
		h()
	}
}

// pendingIDs returns every registration woken, deferred or in a turn: the
// work a stop leaves that only memory knows of.
func (s *scheduler) pendingIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, 0, len(s.woken)+len(s.deferred)+len(s.inflight))
	for _, m := range []map[string]struct{}{s.woken, s.deferred, s.inflight} {
		for id := range m {
			ids = append(ids, id)
		}
	}
	return ids
}

// promote moves deferred wakes back into the woken set, once per tick.
func (s *scheduler) promote() {
	s.mu.Lock()
	for id := range s.deferred {
		s.woken[id] = struct{}{}
	}
	clear(s.deferred)
	s.mu.Unlock()
}

// claim marks id as in a turn; false when it already is, or when limit
// ids already are, so turns handed to Run's goroutines never outnumber
// them.
func (s *scheduler) claim(id string, limit int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.claimLocked(id, limit)
}

// claimOrWake claims id like claim, or marks it woken when it cannot, in
// one step: a turn of id ending between a failed claim and the mark would
// find nothing woken and leave the message waiting for the next tick.
func (s *scheduler) claimOrWake(id string, limit int) bool {
	s.mu.Lock()
	if s.claimLocked(id, limit) {
		s.mu.Unlock()
		return true
	}
	s.woken[id] = struct{}{}
	h := s.hooks[id]
	s.mu.Unlock()
	if h != nil {
		h()
	}
	return false
}

func (s *scheduler) claimLocked(id string, limit int) bool {
	if _, busy := s.inflight[id]; busy || !s.budget.acquire(limit) {
		return false
	}
	s.inflight[id] = struct{}{}
	delete(s.woken, id)
	return true
}

// again ends a turn of id: it keeps the claim for another turn when a
// message woke id during this one, no failure deferred it to the tick,
// and no other registration waits for the slot (the dispatcher is not
// dispatching, no due rows were left waiting, and a slot is free or no
// one else is woken); otherwise it releases id as release does.
func (s *scheduler) again(id string, limit int) bool {
	s.mu.Lock()
	_, woken := s.woken[id]
	_, deferred := s.deferred[id]
	keep := woken && !deferred && !s.waiting && (!s.budget.full() || len(s.woken) == 1)
	look := false
	if keep {
		delete(s.woken, id)
	} else {
		look = s.releaseLocked(id)
	}
	s.mu.Unlock()
	if look {
		s.poke()
	}
	return keep
}

func (s *scheduler) release(id string) {
	s.mu.Lock()
	look := s.releaseLocked(id)
	s.mu.Unlock()
	if look {
		s.poke()
	}
}

// releaseLocked ends id's claim and reports whether the dispatcher should
// look for work: it is dispatching, left due rows waiting, or a woken
// registration waits for the slot.
func (s *scheduler) releaseLocked(id string) bool {
	if _, ok := s.inflight[id]; ok {
		delete(s.inflight, id)
		s.budget.release()
	}
	return s.waiting || len(s.woken) > 0
}

// contended reports that every slot is in use and another registration
// waits for one.
func (s *scheduler) contended(limit int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.budget.full() && s.othersWaitLocked()
}

// othersWaitLocked reports that a registration waits for a slot: woken
// and not in a turn (more woken ids than turns means one at least is not
// in one), or due rows left unread.
func (s *scheduler) othersWaitLocked() bool {
	return s.waiting || len(s.woken) > len(s.inflight)
}

// usedLocked is this scheduler's slots: claims and keyed turns' extras.
func (s *scheduler) usedLocked() int { return len(s.inflight) + s.extra }

// grow gives a keyed turn that holds held slots one more, for one more
// POST at once: when one is free and, while another registration waits
// for a slot, only up to an equal share of them among the turns, so one
// wide registration cannot starve the others.
func (s *scheduler) grow(held, limit int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.othersWaitLocked() && held >= max(1, limit/(len(s.inflight)+1)) {
		return false
	}
	if !s.budget.acquire(limit) {
		return false
	}
	s.extra++
	return true
}

// shrink gives back a slot grow gave, and wakes the dispatcher when a
// registration may be waiting for it.
func (s *scheduler) shrink() {
	s.mu.Lock()
	s.extra--
	s.budget.release()
	look := s.waiting || len(s.woken) > 0
	s.mu.Unlock()
	if look {
		s.poke()
	}
}

// takeWake reports, and clears, a wake of id that came during its turn,
// so a keyed turn reads the journal again while it has slots to fill
// instead of ending to be woken.
func (s *scheduler) takeWake(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.woken[id]; !ok {
		return false
	}
	delete(s.woken, id)
	return true
}

// handOff moves id's claim to a woken registration not in a turn, and
// marks id woken; false, changing nothing, when none waits.
func (s *scheduler) handOff(id string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for next := range s.woken {
		if _, busy := s.inflight[next]; busy {
			continue
		}
		delete(s.woken, next)
		s.inflight[next] = struct{}{}
		delete(s.inflight, id)
		s.woken[id] = struct{}{}
		return next, true
	}
	return "", false
}

// inTurn reports whether an id pick says is in a turn.
func (s *scheduler) inTurn(pick func(id string) bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range s.inflight {
		if pick(id) {
			return true
		}
	}
	return false
}

func (s *scheduler) setWaiting(v bool) {
	s.mu.Lock()
	s.waiting = v
	s.mu.Unlock()
}

func (s *scheduler) busy() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.usedLocked()
}

// wokenIDs returns up to n woken ids that are not in a turn.
func (s *scheduler) wokenIDs(n int) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for id := range s.woken {
		if len(ids) >= n {
			break
		}
		if _, busy := s.inflight[id]; !busy {
			ids = append(ids, id)
		}
	}
	return ids
}

// turnQuantum is how long a turn delivers before it gives its slot to a
// registration waiting for one. A page of a slow receiver's backlog
// (256 POSTs of 20 ms) held a slot for five seconds while the
// registrations beyond the slots waited: with 18 registrations on 16
// slots, two of them were served only after whole pages of others, and
// the bridge delivered at half its slots' rate. Turns of fast receivers
// finish their page within it.
const turnQuantum = 100 * time.Millisecond

// yields reports that t has had its quantum and another registration
// waits for its slot: the turn ends after the message it delivered, its
// cursor kept, and the registration is woken to be served again.
func (w *Worker) yields(t *turn) bool {
	return time.Since(t.started) >= turnQuantum && w.sched.contended(w.maxInFlight)
}

// Wake tells the worker that these registrations may have new journal
// messages. Unknown ids and ids of the other namespace are dropped when
// their turn finds them so.
func (w *Worker) Wake(ids ...string) { w.sched.wake(ids...) }

// candidates returns up to limit registrations due at `at`: rows due by
// time from the store's due index, then woken idle rows. more reports that
// more were due than limit allowed.
//
// With readDue false only woken rows are considered: the daemon reads the
// due index on its tick, when rows' backoffs end, and not on every turn's
// end, which would put a store read on each live message's path.
func (w *Worker) candidates(ctx context.Context, at time.Time, limit int, readDue bool) (ids []string, unserved int, more bool, err error) {
	var due cursor.Due
	if readDue {
		if due, err = w.store.Due(ctx, at, limit+1, w.ns); err != nil {
			return nil, 0, false, err
		}
	}
	seen := make(map[string]struct{}, len(due.Rows))
	for _, r := range due.Rows {
		if len(ids) == limit {
			return ids, due.Unserved, true, nil
		}
		ids = append(ids, r.ID)
		seen[r.ID] = struct{}{}
	}
	for _, id := range w.sched.wokenIDs(limit - len(ids) + 1) {
		if _, dup := seen[id]; dup {
			continue
		}
		if len(ids) == limit {
			return ids, due.Unserved, true, nil
		}
		ids = append(ids, id)
	}
	return ids, due.Unserved, false, nil
}

// Sweep delivers at most limit due registrations once and waits for every
// turn. `at` is the caller's clock, so backoff is testable; the daemon
// supplies real time through Run.
func (w *Worker) Sweep(ctx context.Context, at time.Time, limit int) (Report, error) {
	ids, unserved, more, err := w.candidates(ctx, at, limit, true)
	if err != nil {
		return Report{}, err
	}
	rep := Report{Unserved: unserved, Saturated: more}
	var (
		mu       sync.Mutex
		wg       sync.WaitGroup
		firstErr error
		slots    = make(chan struct{}, w.maxInFlight)
	)
	for _, id := range ids {
		// Sweep's own slots bound its turns, not the claim.
		if !w.sched.claim(id, math.MaxInt) {
			continue
		}
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			defer w.sched.release(id)
			p, ran, err := w.serve(ctx, id, at)
			mu.Lock()
			defer mu.Unlock()
			if ran {
				rep.Registrations++
			}
			rep.add(p)
			if err != nil && firstErr == nil {
				firstErr = err
			}
		})
	}
	wg.Wait()
	w.metrics.sweep(w.ns, rep)
	return rep, firstErr
}

// serve runs one claimed registration's turn; the caller releases the
// claim. It reads the row afresh after the claim, so a turn never starts
// from a cursor older than the previous turn's last acknowledgement. A
// turn that stopped with more to deliver marks the registration woken.
func (w *Worker) serve(ctx context.Context, id string, at time.Time) (progress, bool, error) {
	parked := w.parkingsNow()
	reg, err := w.store.Get(ctx, id)
	if errors.Is(err, cursor.ErrNotFound) {
		return progress{}, false, nil
	}
	if err != nil {
		w.sched.later(id)
		return progress{}, false, err
	}
	if !w.due(reg, at) || !w.mine(id) {
		return progress{}, false, nil
	}
	p, more, err := w.serveTurn(ctx, reg, at, parked)
	switch {
	case err != nil && ctx.Err() == nil:
		w.sched.later(id)
	case more:
		w.sched.wakeQuiet(id)
	}
	return p, true, err
}

// due reports whether reg may be served now: active, of this namespace,
// and not waiting out a backoff (a new message does not cut a backoff
// short; the receiver asked for the pause). A keyed registration's
// backoffs are its failing messages', not its own: its turn lets the
// other keys go and keeps the pauses (see serveKeyed).
func (w *Worker) due(reg cursor.Registration, at time.Time) bool {
	if reg.Namespace != w.ns || reg.State != cursor.Active {
		return false
	}
	return keyed(&reg) || reg.NextAttemptAt.IsZero() || !reg.NextAttemptAt.After(at)
}

package bridge

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// follow is how far the daemon has followed the stream: every message
// below next was handed to the registrations it concerns. When the tail
// (re)starts at some sequence, only the messages between next and there
// went unannounced, and their subjects say whom to wake: a restart costs
// what those messages need, not a turn of every idle registration.
//
// Across a clean stop of a bridge alone, next is kept in the store's meta
// (the mark) with the creation time of the stream it counts in, and it
// promises that every registration idle in the store received every
// message below it:
// registrations woken but not yet served are made due in the store before
// the mark is written. The mark is removed as the daemon starts, so a
// crash, which loses the woken set, leaves none; the next start then
// wakes the registrations of every message from the lowest idle cursor on
// or, when those messages are too many, every idle registration behind
// the tail (see wakeBehind). Bridges sharing a store keep no mark: no one
// of them followed the stream for all registrations, and each wakes every
// registration of a shard it gains instead, and every registration it
// holds when its tail first starts announcing (see wakeShare).
type follow struct {
	next atomic.Uint64 // 0: unknown

	mu   sync.Mutex
	gaps []gap // unannounced ranges the rewake loop has still to serve
	busy bool  // the rewake loop is serving a gap
}

// gap is a range of sequences nobody announced: [from, to), from 0 when
// where the daemon stood is unknown.
type gap struct{ from, to uint64 }

// announced records that the message at seq was handed on.
func (f *follow) announced(seq uint64) {
	for {
		old := f.next.Load()
		if seq+1 <= old || f.next.CompareAndSwap(old, seq+1) {
			return
		}
	}
}

// restarted records that the tail starts announcing at seq, and queues the
// range it skipped.
func (f *follow) restarted(seq uint64) {
	from := f.next.Swap(seq)
	f.mu.Lock()
	f.gaps = append(f.gaps, gap{from: from, to: seq})
	f.mu.Unlock()
}

// take returns the gaps to serve and marks the loop busy with them.
func (f *follow) take() []gap {
	f.mu.Lock()
	defer f.mu.Unlock()
	g := f.gaps
	f.gaps, f.busy = nil, len(g) > 0
	return g
}

// served ends the loop's work on gaps; failed ones are queued again.
func (f *follow) served(failed []gap) {
	f.mu.Lock()
	f.gaps = append(failed, f.gaps...)
	f.busy = false
	f.mu.Unlock()
}

// settled reports that no gap waits to be served, so next is a promise.
func (f *follow) settled() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.gaps) == 0 && !f.busy
}

func markKey(stream string) string { return "followed/" + stream }

// loadMark takes the mark a clean stop left, if it counts in the stream
// in force now, and removes it.
func (d *Daemon) loadMark(ctx context.Context) error {
	if d.identity == nil || d.owner != nil {
		return nil
	}
	meta, key := d.identity.meta, markKey(d.identity.stream)
	v, err := meta.GetMeta(ctx, key)
	if err != nil || v == nil {
		return err
	}
	if err := meta.PutMeta(ctx, key, nil); err != nil {
		return fmt.Errorf("removing the followed mark: %w", err)
	}
	created, err := meta.GetMeta(ctx, d.identity.key())
	if err != nil {
		return err
	}
	stamp, seq, ok := strings.Cut(string(v), " ")
	n, perr := strconv.ParseUint(seq, 10, 64)
	if !ok || perr != nil || stamp != string(created) {
		return nil // another stream's, or unreadable: follow from nothing known
	}
	d.follow.next.Store(n)
	return nil
}

// saveMark writes the mark at a clean stop, after every acknowledged
// cursor is durable: the registrations woken and not served become due,
// so the mark's promise holds for every idle one.
func (d *Daemon) saveMark(ctx context.Context) error {
	if d.identity == nil || d.owner != nil || !d.follow.settled() {
		return nil
	}
	next := d.follow.next.Load()
	if next == 0 {
		return nil
	}
	var woken []string
	for _, w := range d.workers {
		woken = append(woken, w.sched.pendingIDs()...)
	}
	if err := d.store.MakeDue(ctx, woken); err != nil {
		return fmt.Errorf("keeping the registrations woken at the stop due: %w", err)
	}
	created, err := d.identity.meta.GetMeta(ctx, d.identity.key())
	if err != nil || created == nil {
		return err
	}
	mark := string(created) + " " + strconv.FormatUint(next, 10)
	return d.identity.meta.PutMeta(ctx, markKey(d.identity.stream), []byte(mark))
}

// rewakeLoop serves the gaps the tail's (re)starts leave, retrying a
// store or journal that fails.
func (d *Daemon) rewakeLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.rewakeKick:
		}
		var failed []gap
		for _, g := range d.follow.take() {
			if err := d.rewake(ctx, g); err != nil {
				if ctx.Err() != nil {
					d.follow.served(append(failed, g))
					return
				}
				d.log.Error("waking the registrations of messages nobody announced failed; retrying", "from", g.from, "to", g.to, "error", err)
				failed = append(failed, g)
			}
		}
		d.follow.served(failed)
		if len(failed) > 0 {
			time.AfterFunc(time.Second, d.kickRewake)
		}
	}
}

func (d *Daemon) kickRewake() {
	select {
	case d.rewakeKick <- struct{}{}:
	default:
	}
}

// rewake wakes whoever may have missed a message of g: the registrations
// in a turn now (it may have judged them caught up just before), and the
// registrations of every message in g; or, where the daemon stood is
// unknown, every idle registration behind g's end.
func (d *Daemon) rewake(ctx context.Context, g gap) error {
	for _, w := range d.workers {
		w.sched.wakeInflight()
		defer w.sched.poke()
	}
	if g.from == 0 {
		if d.owner != nil {
			return d.wakeShare(ctx)
		}
		return d.wakeBehind(ctx, g.to)
	}
	if g.from >= g.to || d.scan == nil {
		return nil
	}
	return d.wakeRange(ctx, g)
}

// maxScan is the most messages a start without a mark reads to learn whom
// to wake; a longer gap wakes every idle registration behind instead.
const maxScan = 100_000

// idleFloorer is a store that tells the lowest cursor of its idle
// registrations (cursor.DB does).
type idleFloorer interface {
	IdleFloor(ctx context.Context) (uint64, bool, error)
}

// wakeBehind wakes, not knowing where the daemon stood, whoever may have
// missed a message before seq: the registrations of every message from
// the lowest idle cursor on, when those messages are few, or else every
// idle registration behind seq.
func (d *Daemon) wakeBehind(ctx context.Context, seq uint64) error {
	if f, ok := d.store.(idleFloorer); ok && d.scan != nil {
		floor, any, err := f.IdleFloor(ctx)
		switch {
		case err != nil:
			return err
		case !any || floor >= seq:
			return nil
		case seq-floor <= maxScan:
			return d.wakeRange(ctx, gap{from: floor, to: seq})
		}
	}
	n, err := d.store.WakeBehind(ctx, seq)
	if n > 0 {
		d.log.Info("woke the registrations whose cursor was behind the journal's head", "registrations", n, "seq", seq)
	}
	return err
}

// wakeRange reads the messages of g and wakes the registrations of their
// subjects, each subject once.
func (d *Daemon) wakeRange(ctx context.Context, g gap) error {
	seen := make(map[string]struct{})
	for from := g.from; from < g.to; {
		pg, err := d.scan.Read(ctx, ">", from, 256)
		if err != nil {
			return err
		}
		for _, r := range pg.Records {
			if r.Seq >= g.to {
				return nil
			}
			if _, dup := seen[r.Subject]; !dup {
				seen[r.Subject] = struct{}{}
				d.wakeSubject(ctx, r.Subject, r.Seq)
			}
		}
		if pg.CaughtUp || pg.Next <= from {
			return nil
		}
		from = pg.Next
	}
	return nil
}

// wakeSubject hands the registrations whose filter matches subject to free
// turns, or marks them woken.
//
// A bridge sharing its store learns the wildcard filters from the store
// first: a registration created through another bridge and held by this
// one has a filter this bridge never saw, and without it the registration
// would sleep through every message after its first turn.
func (d *Daemon) wakeSubject(ctx context.Context, subject string, seq uint64) {
	start := func(id, ns string) {
		if w := d.workers[ns]; w != nil && d.owns(id) {
			w.startNow(id)
		}
	}
	var err error
	if d.owner != nil {
		err = d.store.WildcardFilters(ctx, d.wild.add)
	}
	err = errors.Join(err, d.store.Routes(ctx, subject, start))
	for _, f := range d.wild.matching(subject) {
		err = errors.Join(err, d.store.Routes(ctx, f, start))
	}
	if err != nil {
		// The registrations stay idle until the next message or restart;
		// a store that cannot be read fails their turns anyway.
		d.log.Error("looking up the registrations of a journal message", "subject", subject, "seq", seq, "error", err)
	}
}

package journal

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetstream-bridge/bridge/internal/elected"
	"github.com/jetstream-bridge/bridge/projection"
)

// tailResetAttempts bounds how often the ordered consumer tries to create
// its replacement under one name before it gives up on that name. Every
// try of one reset asks for the same consumer; after the server leading
// the stream was killed, tries under one name were seen failing for as
// long as that server stayed down (over a minute, nothing delivered) while
// the other two served the stream. The default, unbounded, waits on them
// forever and reports nothing. Given up, the reset is reported, the
// consumer misses its heartbeats, and the next reset asks under a new
// name.
const tailResetAttempts = 3

// errTailRestart ends one run of the tail because the stream was re-created.
var errTailRestart = errors.New("journal: stream re-created; tail restarts")

// Tail calls notify for every message the stream stores from now on, in
// stream order, and keeps those messages in the reader's ring so reads near
// the head are answered from memory. It blocks until ctx is done (then it
// returns nil) or the tail cannot start.
//
// One ordered consumer does the work: an ephemeral, unacknowledged server
// consumer that the client recreates after the last message it delivered
// whenever it misses heartbeats, is deleted, or the connection comes back,
// so a server restart loses no notification. It starts at the last sequence
// + 1 as of the start, so nothing stored between that look and the
// consumer's creation is missed. When the stream is re-created, the tail
// starts again at the new stream's first message.
//
// A recreated consumer resumes after the last sequence it delivered, and it
// cannot tell that the stream under that name is another one now: it would
// hand on the new stream's messages as if they followed the old ones. So
// the first message from each consumer (a new consumer name) is held until
// the stream's creation time is checked: a re-created stream drops the
// ring, makes Read refuse old sequences (see ConfirmStream) and restarts
// the tail; a check that fails restarts the tail at that message.
//
// Each run, once its consumer exists, first calls notify with an empty
// subject and the first sequence it will report: a message stored before
// the run looked at the stream's head and after the previous run's last
// one was never reported, so the caller should take it that every subject
// may have news.
//
// A read that reaches the ring's head is caught up as of the tail: a
// message stored but not yet received is missing from that page, and its
// notification follows. While no Tail runs, reads past the ring go to the
// server.
//
// notify runs on the consumer's delivery goroutine and holds back every
// later message until it returns: it must only record the wake-up (set a
// flag, send without blocking) and never read the journal or do I/O.
// Only one Tail may run on a reader at a time.
func (r *Reader) Tail(ctx context.Context, notify func(subject string, seq uint64)) error {
	if notify == nil {
		return errors.New("journal: Tail needs a notify function")
	}
	if !r.tailing.CompareAndSwap(false, true) {
		return errors.New("journal: Tail is already running on this reader")
	}
	defer r.tailing.Store(false)
	var stops sync.WaitGroup
	defer stops.Wait()
	r.mu.Lock()
	gen := r.gen
	r.mu.Unlock()
	var resume uint64 // 0: after the stream's last message
	failed := 0
	for {
		run, err := r.tailOnce(ctx, notify, gen, resume, &stops)
		if ctx.Err() != nil {
			return nil
		}
		var missing *NotFoundError
		switch {
		case errors.Is(err, errTailRestart):
			failed = 0
			gen, resume = run.gen, run.resume.Load()
			r.log.Info("journal tail restarting", "stream", r.stream, "resume", resume)
			continue
		case resume > 0 && failed < tailRestartAttempts && !errors.As(err, &missing):
			// Another leader of the cluster (its meta leader, which
			// places the consumer) may still be electing: the tail tries
			// again where it stood rather than giving up the place.
			failed++
			r.log.Warn("journal tail: could not start again; trying again", "stream", r.stream, "resume", resume, "error", err)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(tailRestartPause):
			}
			continue
		}
		return err
	}
}

// tailStartWait bounds the creation of a run's consumer: a request sent
// while the cluster's meta leader is being elected goes unanswered, and
// waiting out a longer timeout for it delays the run that would succeed a
// moment later.
// tailRestartAttempts and tailRestartPause are how often, and how soon,
// a restart that failed is tried again at the same place.
const (
	tailStartWait       = 2 * time.Second
	tailRestartAttempts = 20
	tailRestartPause    = 250 * time.Millisecond
)

// tailRun is one ordered consumer's run of the tail.
type tailRun struct {
	ctx   context.Context
	epoch uint64 // of the ring this run feeds
	gen   uint64 // the stream generation the run started on
	// consumer is the name of the ordered consumer that delivered last;
	// only the delivery goroutine touches it.
	consumer string
	// resume is where the next run starts on the same stream when this
	// one gave up on a message it could not vouch for, or stepped aside
	// for a new leader; 0 when none did.
	resume atomic.Uint64
	// next is the sequence after the last message this run pushed (its
	// start until it pushed one): where a run that replaces it for a new
	// leader starts, so the replacement skips and repeats nothing.
	next atomic.Uint64
}

// tailOnce runs one ordered consumer until ctx ends or the stream is
// re-created. It starts after the stream's last message, at resume when
// the previous run gave up there, or at the first message when the stream
// is not the one of generation gen any more.
//
// The run's consumer is stopped in the background, on stops: stopping
// waits for the consumer's lock, which a reset in progress holds until its
// request to a dead server times out, and the next run must not wait for
// that. Messages the old consumer still hands on are refused by the ring's
// new epoch.
func (r *Reader) tailOnce(ctx context.Context, notify func(string, uint64), gen, resume uint64, stops *sync.WaitGroup) (*tailRun, error) {
	run := &tailRun{ctx: ctx, gen: gen}
	st, err := r.refresh(ctx)
	if err != nil {
		return run, err
	}
	// The state just read is the one this run starts from; an older
	// re-creation signal is already accounted for.
	select {
	case <-r.tailReset:
	default:
	}
	r.mu.Lock()
	run.gen = r.gen
	r.mu.Unlock()
	start := st.LastSeq + 1
	switch {
	case run.gen != gen:
		// Everything in the new stream is news to the caller.
		start = max(st.FirstSeq, 1)
	case resume > 0:
		start = min(max(resume, st.FirstSeq), st.LastSeq+1)
	}
	run.epoch = r.ring.restart(start, st.LastSeq)
	run.next.Store(start)
	defer r.ring.stop(run.epoch)
	elections, unwatch := r.watchElections()
	defer unwatch()
	startCtx, cancel := context.WithTimeout(ctx, tailStartWait)
	defer cancel()
	cons, err := r.js.OrderedConsumer(startCtx, r.stream, jetstream.OrderedConsumerConfig{
		DeliverPolicy:    jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:      start,
		MaxResetAttempts: tailResetAttempts,
	})
	if err != nil {
		return run, fmt.Errorf("journal: starting the tail of stream %s at %d: %w", r.stream, start, err)
	}
	// Only a run that will report what follows says so: a tail that keeps
	// failing to start must not wake every registration each time.
	notify("", start)
	cc, err := cons.Consume(func(msg jetstream.Msg) { r.tailed(run, msg, notify) },
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			// The consumer may be gone with its stream: reads check the
			// stream before serving anything more.
			r.distrust()
			r.log.Warn("journal tail: consumer error; the ordered consumer recovers by itself",
				"stream", r.stream, "error", err)
		}))
	if err != nil {
		return run, fmt.Errorf("journal: consuming the tail of stream %s at %d: %w", r.stream, start, err)
	}
	defer stops.Go(func() {
		cc.Stop()
		<-cc.Closed()
	})
	select {
	case <-ctx.Done():
		return run, nil
	case <-r.tailReset:
		return run, errTailRestart
	case <-elections:
		r.log.Info("journal tail: a stream elected a leader or the connection came back (a NATS server lost?); replacing the consumer now, not when its heartbeats are missed",
			"stream", r.stream, "resume", run.next.Load())
		run.resume.Store(run.next.Load())
		return run, errTailRestart
	}
}

// watchElections signals when a stream of the account elects a leader:
// the ordered consumer lives on one server, and after that server's loss
// new leaders serve the stream long before the consumer's missed
// heartbeats would tell (see package elected).
func (r *Reader) watchElections() (<-chan struct{}, func()) {
	ch, stop, err := elected.Watch(r.js.Conn())
	if err != nil {
		r.log.Warn("journal tail: cannot watch the streams' leader elections; a lost server is noticed by missed heartbeats",
			"stream", r.stream, "error", err)
	}
	return ch, stop
}

// tailed puts one message in the ring, then wakes the caller: a read that
// the notification triggers finds the message in memory.
func (r *Reader) tailed(run *tailRun, msg jetstream.Msg, notify func(string, uint64)) {
	md, err := msg.Metadata()
	if err != nil {
		r.log.Warn("journal tail: message without metadata ignored", "stream", r.stream, "subject", msg.Subject(), "error", err)
		return
	}
	rec := projection.Record{
		Stream:  r.stream,
		Seq:     md.Sequence.Stream,
		Subject: msg.Subject(),
		Time:    md.Timestamp.UTC(),
		Data:    msg.Data(),
	}
	if h := msg.Headers(); len(h) > 0 {
		rec.Header = h
	}
	if md.Consumer != run.consumer && !r.vouch(run, rec.Seq) {
		return
	}
	run.consumer = md.Consumer
	if !r.ring.push(run.epoch, rec) {
		return // notified already, or from a consumer that was replaced
	}
	run.next.Store(rec.Seq + 1)
	r.noteLast(rec.Seq)
	r.stats.tail.Add(1)
	notify(rec.Subject, rec.Seq)
}

// vouch checks, before the first message of a new ordered consumer is
// used, that the stream is still the one the run started on. When it was
// re-created, refresh has dropped the ring (so this run pushes nothing
// more) and restarts the tail; when the check fails, the ring is dropped
// and the tail restarts at seq.
func (r *Reader) vouch(run *tailRun, seq uint64) bool {
	_, err := r.refresh(run.ctx)
	r.mu.Lock()
	same := r.gen == run.gen
	r.mu.Unlock()
	if err == nil && same {
		return true
	}
	if err != nil {
		r.log.Warn("journal tail: cannot check the stream after its consumer was recreated; restarting the tail",
			"stream", r.stream, "seq", seq, "error", err)
		r.ring.clear()
		r.distrust()
		run.resume.Store(seq)
		select {
		case r.tailReset <- struct{}{}:
		default:
		}
	}
	return false
}

package journal

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetstream-bridge/bridge/projection"
)

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
// consumer's creation is missed. When Info reports the stream re-created,
// the tail starts again at the new stream's first message.
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
	fromHead := true
	for {
		err := r.tailOnce(ctx, notify, fromHead)
		if ctx.Err() != nil {
			return nil
		}
		if !errors.Is(err, errTailRestart) {
			return err
		}
		// Everything in the new stream is news to the caller.
		fromHead = false
		r.log.Info("journal tail restarting on the re-created stream", "stream", r.stream)
	}
}

// tailOnce runs one ordered consumer until ctx ends or the stream is
// re-created. It starts after the stream's last message, or at its first
// when fromHead is false.
func (r *Reader) tailOnce(ctx context.Context, notify func(string, uint64), fromHead bool) error {
	st, err := r.refresh(ctx)
	if err != nil {
		return err
	}
	// The state just read is the one this run starts from; an older
	// re-creation signal is already accounted for.
	select {
	case <-r.tailReset:
	default:
	}
	start := st.LastSeq + 1
	if !fromHead {
		start = max(st.FirstSeq, 1)
	}
	epoch := r.ring.restart(start, st.LastSeq)
	defer r.ring.stop(epoch)
	cons, err := r.js.OrderedConsumer(ctx, r.stream, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:   start,
	})
	if err != nil {
		return fmt.Errorf("journal: starting the tail of stream %s at %d: %w", r.stream, start, err)
	}
	cc, err := cons.Consume(func(msg jetstream.Msg) { r.tailed(epoch, msg, notify) },
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			r.log.Warn("journal tail: consumer error; the ordered consumer recovers by itself",
				"stream", r.stream, "error", err)
		}))
	if err != nil {
		return fmt.Errorf("journal: consuming the tail of stream %s at %d: %w", r.stream, start, err)
	}
	defer func() {
		cc.Stop()
		<-cc.Closed()
	}()
	select {
	case <-ctx.Done():
		return nil
	case <-r.tailReset:
		return errTailRestart
	}
}

// tailed puts one message in the ring, then wakes the caller: a read that
// the notification triggers finds the message in memory.
func (r *Reader) tailed(epoch uint64, msg jetstream.Msg, notify func(string, uint64)) {
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
	if !r.ring.push(epoch, rec) {
		return // notified already, or from a consumer that was replaced
	}
	r.noteLast(rec.Seq)
	r.stats.tail.Add(1)
	notify(rec.Subject, rec.Seq)
}

package bridge

import (
	"context"
	"time"

	"github.com/jetstream-bridge/bridge/cursor"
	"github.com/jetstream-bridge/bridge/journal"
	"github.com/jetstream-bridge/bridge/projection"
)

// Batch defaults for a registration that asks for batch mode without
// naming every limit.
const (
	DefaultBatchMaxEvents = 100
	DefaultBatchMaxBytes  = 1 << 20
)

// batcher accumulates the messages of consecutive records for one POST.
type batcher struct {
	b         projection.Batcher
	maxEvents int
	maxBytes  int
	msgs      []projection.Message
	size      int
	records   int
	first     *projection.Record
	lastSeq   uint64
	// screened counts the messages inside the batch its filter passed
	// over: the batch's 2xx moves the cursor past them.
	screened screened
}

func newBatcher(b projection.Batcher, cfg *cursor.Batch) *batcher {
	bt := &batcher{b: b, maxEvents: cfg.MaxEvents, maxBytes: cfg.MaxBytes}
	if bt.maxEvents <= 0 {
		bt.maxEvents = DefaultBatchMaxEvents
	}
	if bt.maxBytes <= 0 {
		bt.maxBytes = DefaultBatchMaxBytes
	}
	return bt
}

// fits reports whether msgs can join the pending batch without breaking
// its limits. An empty batch takes anything, so one oversized event still
// goes out, alone.
func (bt *batcher) fits(msgs []projection.Message) bool {
	if len(bt.msgs) == 0 {
		return true
	}
	n := bt.size
	for _, m := range msgs {
		n += len(m.Body) + 1
	}
	return len(bt.msgs)+len(msgs) <= bt.maxEvents && n <= bt.maxBytes
}

func (bt *batcher) add(rec *projection.Record, msgs []projection.Message) {
	if bt.first == nil {
		bt.first = rec
	}
	for _, m := range msgs {
		bt.size += len(m.Body) + 1
	}
	bt.msgs = append(bt.msgs, msgs...)
	bt.records++
	bt.lastSeq = rec.Seq
}

func (bt *batcher) full() bool { return len(bt.msgs) >= bt.maxEvents || bt.size >= bt.maxBytes }

func (bt *batcher) reset() {
	bt.msgs, bt.size, bt.records, bt.first = bt.msgs[:0], 0, 0, nil
	bt.screened = screened{}
}

// drainBatches delivers the page as CloudEvents batches: the cursor moves
// past a whole batch on its 2xx and not before. A batch smaller than its
// limits is held while its oldest event is younger than maxDelay and the
// page reached the head, so live traffic is batched instead of sent one by
// one; a timer wakes the registration when the delay is over.
func (w *Worker) drainBatches(ctx context.Context, t *turn, page *journal.Page, b projection.Batcher) (bool, error) {
	bt := newBatcher(b, t.reg.Batch)
	target := w.target(t.reg)
	target.Format = "structured"
	for i := range page.Records {
		if w.halted(t.reg.ID) {
			return true, nil
		}
		rec := &page.Records[i]
		v, err := w.screen(&t.reg, rec)
		if err == nil && !v.deliver {
			w.passOver(t, bt, rec, v)
			continue
		}
		var res projection.Result
		if err == nil {
			res, err = w.project(target, rec)
		}
		if err != nil {
			if stop, err := w.sendBatch(ctx, t, bt); stop || err != nil {
				return true, err
			}
			return true, w.unprojectable(ctx, t, rec.Seq, err)
		}
		if !bt.fits(res.Messages) {
			if stop, err := w.sendBatch(ctx, t, bt); stop || err != nil {
				return true, err
			}
		}
		bt.add(rec, res.Messages)
		if bt.full() {
			if stop, err := w.sendBatch(ctx, t, bt); stop || err != nil {
				return true, err
			}
		}
	}
	if wait := w.holdFor(t, page, bt); wait > 0 {
		time.AfterFunc(wait, func() { w.Wake(t.reg.ID) })
		return true, w.advance(ctx, t.reg.ID, w.withScreened(cursor.Progress{NextSeq: t.next, Idle: true}, &t.screened))
	}
	return w.sendBatch(ctx, t, bt)
}

// passOver passes over a message rec's filter did not deliver, before it
// is batched: with no batch pending the cursor moves past it, else the
// pending batch's 2xx will.
func (w *Worker) passOver(t *turn, bt *batcher, rec *projection.Record, v verdict) {
	if len(bt.msgs) == 0 {
		t.screened.add(v)
		t.next = rec.Seq + 1
		return
	}
	bt.screened.add(v)
	bt.lastSeq = rec.Seq
}

// holdFor is how long a partial batch waits for more events; zero sends it.
func (w *Worker) holdFor(t *turn, page *journal.Page, bt *batcher) time.Duration {
	if len(bt.msgs) == 0 || !page.CaughtUp || t.reg.Batch.MaxDelay <= 0 {
		return 0
	}
	return max(t.reg.Batch.MaxDelay-w.now().Sub(bt.first.Time), 0)
}

// sendBatch POSTs the pending batch, if any; stop reports a failure that
// ended the turn.
func (w *Worker) sendBatch(ctx context.Context, t *turn, bt *batcher) (bool, error) {
	if len(bt.msgs) == 0 {
		return false, nil
	}
	if w.paced(&t.reg) {
		// The turn ends before this POST; its events are read again on
		// the wake, their cursor not moved.
		return true, nil
	}
	defer bt.reset()
	msg, err := bt.b.Batch(bt.msgs)
	if err != nil {
		return true, w.unprojectable(ctx, t, bt.first.Seq, err)
	}
	// A batch is recorded as one POST under its first event's sequence,
	// index 0, with the batch's webhook-id.
	if f := w.deliver(ctx, t.reg, bt.first, []projection.Message{msg}, t.postOf(bt.first.Seq), &t.p); f != nil {
		return true, w.failed(ctx, t, *f)
	}
	t.screened.merge(bt.screened)
	return false, w.acknowledged(ctx, t, bt.lastSeq, bt.records, 1, false)
}

package bridge

import (
	"context"
	"fmt"

	"github.com/jetstream-bridge/bridge/attempt"
	"github.com/jetstream-bridge/bridge/cursor"
	"github.com/jetstream-bridge/bridge/projection"
)

// numberer is a Recorder that can number a POST before it is recorded,
// so a resend answers its attempt number; attempt.Log is one.
type numberer interface {
	Number(ctx context.Context, a *attempt.Attempt)
}

// storedReader reads one message from the stream itself, past any cache
// (journal.Reader.Stored).
type storedReader interface {
	Stored(ctx context.Context, seq uint64) (projection.Record, bool, error)
}

// Resend POSTs journal message seq once more to registration id, now and
// in any state — a parked registration's receiver can be tried before it
// is unparked — and answers one attempt per POST, whatever the receiver
// said. It changes nothing of the registration: not its cursor, attempts,
// state or lastError. The message carries its usual webhook-id and fresh
// signatures; a batch registration gets it as a batch of one.
//
// A message gone from the stream, beyond it or off the registration's
// filter is attempt.ErrNoMessage; one the namespace cannot send is
// attempt.ErrUnprojectable; an unknown id is cursor.ErrNotFound.
func (d *Daemon) Resend(ctx context.Context, id string, seq uint64) ([]attempt.Attempt, error) {
	reg, err := d.store.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	w := d.workers[reg.Namespace]
	if w == nil {
		return nil, fmt.Errorf("no worker serves namespace %q of registration %s", reg.Namespace, id)
	}
	return w.resend(ctx, &reg, seq)
}

func (w *Worker) resend(ctx context.Context, reg *cursor.Registration, seq uint64) ([]attempt.Attempt, error) {
	page, err := w.journal.Read(ctx, reg.Subject, seq, 1)
	if err != nil {
		return nil, fmt.Errorf("read journal message %d for %s: %w", seq, reg.ID, err)
	}
	if len(page.Records) == 0 || page.Records[0].Seq != seq {
		return nil, fmt.Errorf("%w: %d is not on %s's filter %s", attempt.ErrNoMessage, seq, reg.ID, reg.Subject)
	}
	if st, ok := w.journal.(storedReader); ok {
		// The page may come from a cache that has not seen a delete:
		// the stream itself says whether the message is still there.
		_, found, err := st.Stored(ctx, seq)
		if err != nil {
			return nil, fmt.Errorf("read journal message %d for %s: %w", seq, reg.ID, err)
		}
		if !found {
			return nil, fmt.Errorf("%w: %d was removed from the stream", attempt.ErrNoMessage, seq)
		}
	}
	msgs, err := w.resendMessages(reg, &page.Records[0])
	if err != nil {
		return nil, fmt.Errorf("%w: journal message %d: %v", attempt.ErrUnprojectable, seq, err)
	}
	out := make([]attempt.Attempt, 0, len(msgs))
	for i := range msgs {
		how := post{trigger: attempt.TriggerResend, attempt: w.resendNumber(ctx, reg.ID, seq, i)}
		req := requestOf(reg, msgs[i], w.now())
		res := w.post(ctx, reg, seq, how.attempt, req)
		w.series.delivery(res, page.Records[0].Time, w.now())
		a := attemptOf(reg.ID, seq, i, msgs[i].ID, how, &req, &res)
		if w.recorder != nil {
			w.recorder.Record(a)
		}
		out = append(out, a)
	}
	return out, nil
}

// resendNumber is the attempt number of a resend of message index i of
// seq, asked of the log before the POST so its span reports it too; 1
// when nothing counts earlier POSTs, without a log. The POST is recorded
// only after it is made, so it is not counted among them.
func (w *Worker) resendNumber(ctx context.Context, reg string, seq uint64, i int) uint32 {
	n, ok := w.recorder.(numberer)
	if !ok {
		return 1
	}
	a := attempt.Attempt{Registration: reg, Seq: seq, Index: i}
	n.Number(ctx, &a)
	return a.Attempt
}

// resendMessages is what rec is sent as to reg: the messages of its
// projection, or for a batch registration one batch holding them.
func (w *Worker) resendMessages(reg *cursor.Registration, rec *projection.Record) ([]projection.Message, error) {
	target := w.target(*reg)
	b, batched := w.proj.(projection.Batcher)
	batched = batched && reg.Batch != nil
	if batched {
		target.Format = "structured"
	}
	res, err := w.proj.Project(target, rec)
	if err != nil || !batched || len(res.Messages) == 0 {
		return res.Messages, err
	}
	msg, err := b.Batch(res.Messages)
	return []projection.Message{msg}, err
}

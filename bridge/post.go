package bridge

import (
	"context"

	"github.com/jetstream-bridge/bridge/cursor"
	"github.com/jetstream-bridge/bridge/webhook"
)

// post makes one POST of reg. Every delivery, retry, batch and resend goes
// through here, so what a registration asks of each POST is applied to
// all of them and not to the ones a path happened to remember.
//
// seq is the journal message it carries (a batch's first) and attempt its
// number (see post.number), for the POST's span.
func (w *Worker) post(ctx context.Context, reg *cursor.Registration, seq uint64, attempt uint32, req webhook.Request) webhook.Outcome {
	if o, ok := w.waitLimit(ctx, reg, &req); !ok {
		return o
	}
	req.Pace = w.paceOf(reg)
	w.inFlight.add(reg.ID, 1)
	w.series.posting(1)
	defer func() {
		w.inFlight.add(reg.ID, -1)
		w.series.posting(-1)
	}()
	return w.send(ctx, reg, seq, attempt, req)
}

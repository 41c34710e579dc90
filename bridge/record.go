package bridge

import (
	"context"
	"errors"

	"github.com/jetstream-bridge/bridge/attempt"
	"github.com/jetstream-bridge/bridge/cursor"
	"github.com/jetstream-bridge/bridge/projection"
	"github.com/jetstream-bridge/bridge/webhook"
)

// Recorder keeps the attempt log: one record per POST. Record is called on
// the delivery path after every POST and must return at once, whatever
// becomes of the record; attempt.Log does.
type Recorder interface {
	Record(attempt.Attempt)
}

// WithRecorder records every POST the worker makes into r.
func WithRecorder(r Recorder) Option {
	return func(w *Worker) error { w.recorder = r; return nil }
}

// post is what the worker knows of a POST before making it: why it is
// made and, when the row tells for sure, its attempt number; 0 leaves the
// number to the log, which counts on from the last one it holds.
type post struct {
	trigger string
	attempt uint32
}

// postOf says what POSTing record seq in turn t is.
//
// Only the turn's first record can have been POSTed before without the
// row saying so: after a failure (the row counts it), an unpark (which
// clears the count) or a crash. Its number is left to the log, as is a
// replay's, whose earlier POSTs only the log remembers. A later record of
// the turn follows a 2xx in this turn: its first POST, unless below the
// furthest cursor.
func (t *turn) postOf(seq uint64) post {
	first := seq == t.reg.NextSeq
	switch {
	case first && t.reg.Attempts > 0:
		return post{trigger: attempt.TriggerRetry}
	case seq < t.highWater:
		return post{trigger: attempt.TriggerReplay}
	case first:
		return post{trigger: attempt.TriggerDelivery}
	}
	return post{trigger: attempt.TriggerDelivery, attempt: 1}
}

// record hands one POST to the attempt log.
func (w *Worker) record(reg *cursor.Registration, seq uint64, index int, msg *projection.Message, how post, req *webhook.Request, out *webhook.Outcome) {
	if w.recorder == nil {
		return
	}
	w.recorder.Record(attemptOf(reg.ID, seq, index, msg.ID, how, req, out))
}

func attemptOf(reg string, seq uint64, index int, webhookID string, how post, req *webhook.Request, out *webhook.Outcome) attempt.Attempt {
	a := attempt.Attempt{
		Registration: reg,
		Seq:          seq,
		Index:        index,
		WebhookID:    webhookID,
		Attempt:      how.attempt,
		At:           req.At.UTC(),
		DurationMs:   max(out.Duration.Milliseconds(), 0),
		Outcome:      outcomeOf(out),
		Status:       out.Status,
		Response:     attempt.Excerpt(out.Response),
		Trigger:      how.trigger,
	}
	if !out.OK() {
		a.Error = out.Error()
	}
	return a
}

// outcomeOf is an outcome's class in the log's terms, which tell a
// receiver too slow to answer from one that could not be reached.
func outcomeOf(out *webhook.Outcome) string {
	if out.Class == webhook.ClassTransport && errors.Is(out.Err, context.DeadlineExceeded) {
		return attempt.OutcomeTimeout
	}
	return out.Class
}

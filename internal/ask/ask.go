// Package ask sends a NATS request again when it goes unanswered.
//
// A request sent while a JetStream stream elects a leader is dropped, and
// the client waits out its whole timeout (seconds) for an answer that
// never comes, while the same request sent a moment later is answered at
// once by the new leader. Bounding each attempt and asking again keeps
// the total wait where it was and the wait after an election short.
package ask

import (
	"context"
	"time"
)

// Again calls do with a context bounded by wait, again while its error
// is one unanswered says means no answer came, at most attempts times in
// all and while ctx lasts, and returns the last call's result.
func Again[T any](ctx context.Context, attempts int, wait time.Duration, unanswered func(error) bool,
	do func(context.Context) (T, error)) (T, error) {
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, wait)
		v, err := do(actx)
		cancel()
		if err == nil || attempt >= attempts || ctx.Err() != nil || !unanswered(err) {
			return v, err
		}
	}
}

package cursor

import (
	"context"
	"fmt"
	"log/slog"
	"time"
	"unicode/utf8"
)

// The transitions of a registration, exported so that every Store
// implementation applies the same ones: an operation must mean the same
// thing whichever store is behind the bridge. Each edits r in place; the
// store stamps UpdatedAt and writes the row.

// maxLastError bounds the stored error so a receiver echoing a large body
// cannot grow every write of its row.
const maxLastError = 4096

// Fresh is r as a new registration created at now: active, due at once or
// at the NextAttemptAt the caller set, with NextSeq as given and the rest
// of its delivery state from zero.
func Fresh(r Registration, now time.Time) Registration {
	r.State = Active
	r.Attempts = 0
	r.LastError = ""
	r.Delivered = 0
	r.Filtered, r.FilterErrors, r.LastFilterError = 0, 0, ""
	r.CreatedAt = now
	r.UpdatedAt = now
	r.CompletedAt = time.Time{}
	r.Ahead = nil
	r.NextAttemptAt = DueAt(r.NextAttemptAt, now)
	return r
}

// DueAt is when a registration scheduled for at becomes due: at, or now
// when at is zero, so no write meant to schedule a row can leave it idle.
func DueAt(at, now time.Time) time.Time {
	if at.IsZero() {
		return now
	}
	return at.UTC()
}

// ApplyReplace swaps r's Config for c, keeping NextSeq, the delivered
// and filtered counts and CreatedAt. An active or parked registration becomes active, with no
// failures, due at `at`. A completed one stays completed with its new
// Config: completion records that its terminal message was delivered,
// which a new URL does not undo. c.Namespace may be empty (kept) but not
// another namespace.
func ApplyReplace(r *Registration, c Config, at, now time.Time) error {
	if c.Namespace != "" && c.Namespace != r.Namespace {
		return fmt.Errorf("cursor: replace %q: cannot move it from namespace %q to %q",
			r.ID, r.Namespace, c.Namespace)
	}
	c.Namespace = r.Namespace
	r.Config = c
	if r.State != Completed {
		r.State = Active
		r.Attempts = 0
		r.LastError = ""
		r.NextAttemptAt = DueAt(at, now)
	}
	return nil
}

// ApplyRetry counts one failure and schedules the next attempt at next; a
// parked or completed registration records the failure but is not
// scheduled.
func ApplyRetry(r *Registration, next, now time.Time, lastErr string) {
	r.Attempts++
	r.LastError = ClipError(lastErr)
	if r.State == Active {
		r.NextAttemptAt = DueAt(next, now)
	}
}

// ApplyPark stops delivery, keeping the cursor, and counts the failure
// that stopped it, so Attempts reads as the failures a receiver has had.
// A completed registration is left as it is (false).
func ApplyPark(r *Registration, lastErr string) bool {
	if r.State == Completed {
		return false
	}
	r.State = Parked
	r.Attempts++
	r.LastError = ClipError(lastErr)
	r.NextAttemptAt = time.Time{}
	return true
}

// ApplyUnpark makes a parked registration active, with no failures, due at
// `at`, at the cursor it was parked with; false, and no change, when it
// was not parked.
func ApplyUnpark(r *Registration, at, now time.Time) bool {
	if r.State != Parked {
		return false
	}
	r.State = Active
	r.Attempts = 0
	r.LastError = ""
	r.NextAttemptAt = DueAt(at, now)
	return true
}

// ApplyRewind sets the cursor to seq exactly and clears the failure
// count, remembering the furthest cursor so what it repeats is told
// apart as a replay; the state stays. An active registration becomes due at `at` and
// forgets its last error; a parked one keeps it, since it still explains
// why it is parked.
func ApplyRewind(r *Registration, seq uint64, at, now time.Time) {
	r.Furthest = r.HighWater()
	r.NextSeq = seq
	// What was acknowledged ahead of the old cursor is replayed too.
	r.Ahead = nil
	r.Attempts = 0
	if r.State == Active {
		r.LastError = ""
		r.NextAttemptAt = DueAt(at, now)
	}
}

// Then merges the older progress p with the newer q: the cursor is the
// larger, counts add up, the latest Advance says whether the row is idle,
// and completion, once acknowledged, stays. A window goes with the cursor
// it was taken at: the newer one, unless the older stood further.
func (p Progress) Then(q Progress) Progress {
	if p.Window && (!q.Window || p.NextSeq > q.NextSeq) {
		if !q.Window {
			q.Attempts, q.LastError = p.Attempts, p.LastError
		}
		q.Window, q.Ahead = true, p.Ahead
	}
	q.NextSeq = max(p.NextSeq, q.NextSeq)
	q.Delivered += p.Delivered
	q.Filtered += p.Filtered
	q.FilterErrors += p.FilterErrors
	if q.LastFilterError == "" {
		q.LastFilterError = p.LastFilterError
	}
	q.Complete = q.Complete || p.Complete
	return q
}

// ApplyTo folds p, whose latest Advance was at `at`, into r.
//
// The cursor and the delivered count move in every state. Completion moves
// an active or parked row to Completed. On an active row the failure count
// clears, and the row goes idle when p is, or stays due (at `at` when it
// was idle before) when not.
//
// A window (see Progress.Window) replaces the acknowledged set unless the
// row's cursor already stands past the window's, and keeps the failures
// of its oldest unacknowledged message instead of clearing them.
func (p Progress) ApplyTo(r *Registration, at time.Time) {
	if p.Window && p.NextSeq >= r.NextSeq {
		r.Ahead = p.Ahead
	}
	r.NextSeq = max(r.NextSeq, p.NextSeq)
	r.Ahead = r.Ahead.Trim(r.NextSeq)
	r.Delivered += p.Delivered
	r.Filtered += p.Filtered
	r.FilterErrors += p.FilterErrors
	if p.LastFilterError != "" {
		r.LastFilterError = ClipError(p.LastFilterError)
	}
	r.UpdatedAt = at
	switch {
	case r.State == Completed:
	case p.Complete:
		r.State = Completed
		r.CompletedAt = at
		r.NextAttemptAt = time.Time{}
		r.Attempts = 0
		r.LastError = ""
	case r.State == Active:
		r.Attempts = 0
		r.LastError = ""
		if p.Window {
			r.Attempts, r.LastError = p.Attempts, ClipError(p.LastError)
		}
		switch {
		case p.Idle:
			r.NextAttemptAt = time.Time{}
		case p.Window && !p.RetryAt.IsZero():
			r.NextAttemptAt = p.RetryAt.UTC()
		case r.NextAttemptAt.IsZero():
			r.NextAttemptAt = at
		}
	}
}

// ClipError bounds an error message to the bytes a row stores without
// splitting a UTF-8 sequence.
func ClipError(s string) string {
	if len(s) <= maxLastError {
		return s
	}
	cut := maxLastError
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// FlushEvery calls flush every `every` until ctx ends: a store's
// background flusher. It logs once when flushes start failing and once
// when they recover, with pending() and attrs (naming the store), rather
// than once per tick.
func FlushEvery(ctx context.Context, every time.Duration, flush func(context.Context) error,
	pending func() int, log *slog.Logger, attrs ...any) {
	t := time.NewTicker(every)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := flush(ctx)
		switch {
		case err != nil && ctx.Err() != nil:
			return
		case err != nil && !failing:
			log.Error("cursor: flush failing; acknowledged progress is kept in memory and retried",
				append(attrs, "pending", pending(), "error", err)...)
		case err == nil && failing:
			log.Info("cursor: flush recovered", attrs...)
		}
		failing = err != nil
	}
}

package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/jetstream-bridge/bridge/attempt"
)

// Attempts reads the attempt log (attempt.Log is one).
type Attempts interface {
	// Registration answers a registration's attempts stored before the
	// log's sequence before (0: the newest), newest first, and the
	// before of the next page (0 on the last).
	Registration(ctx context.Context, id string, limit int, before uint64) ([]attempt.Attempt, uint64, error)
	// Sequence answers every registration's attempts for one journal
	// sequence, newest first.
	Sequence(ctx context.Context, seq uint64) ([]attempt.Attempt, error)
}

// Resender POSTs a journal message once more to a registration, changing
// nothing of it (bridge.Daemon is one). Its errors are cursor.ErrNotFound,
// attempt.ErrNoMessage and attempt.ErrUnprojectable, or internal.
type Resender interface {
	Resend(ctx context.Context, id string, seq uint64) ([]attempt.Attempt, error)
}

// AttemptPage is one page of a registration's attempts; Next is the
// before of the next page, empty on the last.
type AttemptPage struct {
	Attempts []attempt.Attempt `json:"attempts"`
	Next     string            `json:"next"`
}

// AttemptList is every attempt for one sequence, or those of a resend.
type AttemptList struct {
	Attempts []attempt.Attempt `json:"attempts"`
}

// registrationAttempts answers GET /v1/registrations/{id}/attempts.
func (s *server) registrationAttempts(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	limit, before, err := attemptPaging(r)
	if err != nil {
		return err
	}
	if _, err := s.store.Get(r.Context(), id); err != nil {
		return storeError(err, id, "reading the registration")
	}
	out := AttemptPage{Attempts: []attempt.Attempt{}}
	if s.attempts != nil {
		got, next, err := s.attempts.Registration(r.Context(), id, limit, before)
		if err != nil {
			return fmt.Errorf("reading the attempts of %s: %w", id, err)
		}
		out.Attempts = append(out.Attempts, got...)
		if next != 0 {
			out.Next = strconv.FormatUint(next, 10)
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func attemptPaging(r *http.Request) (limit int, before uint64, err error) {
	q := r.URL.Query()
	limit = attempt.DefaultLimit
	if raw := q.Get("limit"); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 1 || n > attempt.MaxLimit {
			return 0, 0, invalid("limit must be an integer from 1 to %d, not %q", attempt.MaxLimit, raw)
		}
		limit = n
	}
	if raw := q.Get("before"); raw != "" {
		if before, err = strconv.ParseUint(raw, 10, 64); err != nil || before == 0 {
			return 0, 0, invalid("before must be the next of an earlier page, not %q", raw)
		}
	}
	return limit, before, nil
}

// sequenceAttempts answers GET /v1/attempts?seq=N.
func (s *server) sequenceAttempts(w http.ResponseWriter, r *http.Request) error {
	raw := r.URL.Query().Get("seq")
	seq, err := strconv.ParseUint(raw, 10, 64)
	if err != nil {
		return invalid("seq must be a stream sequence number, not %q", raw)
	}
	out := AttemptList{Attempts: []attempt.Attempt{}}
	if s.attempts != nil {
		got, err := s.attempts.Sequence(r.Context(), seq)
		if err != nil {
			return fmt.Errorf("reading the attempts for sequence %d: %w", seq, err)
		}
		c := callerOf(r.Context())
		for _, a := range got {
			if c.sees(a.Registration) {
				out.Attempts = append(out.Attempts, a)
			}
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// resendRequest is the body of POST /v1/registrations/{id}/resend.
type resendRequest struct {
	Seq *uint64 `json:"seq"`
}

// resend answers POST /v1/registrations/{id}/resend: the attempt, or
// {"attempts": [...]} when the message is sent as several POSTs.
func (s *server) resend(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	var req resendRequest
	if _, err := decodeBody(w, r, &req); err != nil {
		return err
	}
	if req.Seq == nil || *req.Seq == 0 {
		return invalid("seq is required: the stream sequence of the message to send again")
	}
	if s.resender == nil {
		return errorf(http.StatusNotImplemented, codeInternal, "this bridge does not deliver, so it cannot resend")
	}
	got, err := s.resender.Resend(r.Context(), id, *req.Seq)
	switch {
	case errors.Is(err, attempt.ErrNoMessage):
		return errorf(http.StatusNotFound, codeNotFound, "%v", err)
	case errors.Is(err, attempt.ErrUnprojectable):
		return errorf(http.StatusUnprocessableEntity, codeInvalidArgument, "%v", err)
	case err != nil:
		return storeError(err, id, "resending")
	}
	s.auditID(r, "journal message resent", id)
	if len(got) == 1 {
		writeJSON(w, http.StatusOK, got[0])
		return nil
	}
	writeJSON(w, http.StatusOK, AttemptList{Attempts: append([]attempt.Attempt{}, got...)})
	return nil
}

// headMaxAge is how old the stream's last sequence may be when a
// registration's lag is computed from it: a listing costs one stream-info
// request a second at most, never one per row.
const headMaxAge = time.Second

// head keeps the journal's last sequence for lag.
type head struct {
	journal Journal

	mu      sync.Mutex
	last    uint64
	at      time.Time
	loading bool
}

// seen records a last sequence read by anyone (freshBounds), so creates
// keep it fresh for free.
func (h *head) seen(last uint64, at time.Time) {
	h.mu.Lock()
	if at.After(h.at) {
		h.last, h.at = max(h.last, last), at
	}
	h.mu.Unlock()
}

// lastSeq is the stream's last sequence as of at most headMaxAge ago, or
// as of the last successful read when the journal cannot answer. Only the
// first call waits for the journal; a stale value is answered while a
// fresh one is fetched in the background.
func (h *head) lastSeq(ctx context.Context) uint64 {
	h.mu.Lock()
	known, stale := !h.at.IsZero(), time.Since(h.at) > headMaxAge
	last := h.last
	fetch := stale && !h.loading
	if fetch {
		h.loading = true
	}
	h.mu.Unlock()
	switch {
	case !fetch:
		return last
	case known:
		go h.fetch(context.WithoutCancel(ctx))
		return last
	}
	h.fetch(ctx)
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.last
}

func (h *head) fetch(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, boundsTimeout)
	defer cancel()
	at := time.Now()
	_, last, err := h.journal.Bounds(ctx)
	h.mu.Lock()
	h.loading = false
	h.mu.Unlock()
	if err == nil {
		h.seen(last, at)
	}
}

// lagOf is how many messages of the stream lie at or past nextSeq:
// max(0, last + 1 − nextSeq), counting other subjects' too.
func lagOf(last, nextSeq uint64) uint64 {
	if last+1 <= nextSeq {
		return 0
	}
	return last + 1 - nextSeq
}

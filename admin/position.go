package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jetstream-bridge/bridge/projection"
)

const (
	startNew   = "new"
	startFirst = "first"
)

// position is a place in the journal given by sequence or by time: the
// object form of a create's start and the body of a rewind.
type position struct {
	Seq  *uint64 `json:"seq"`
	Time *string `json:"time"`
}

// startSeq resolves a create's start to the first sequence the
// registration will deliver. "new" is fixed here, at creation, so a
// message published after the 201 is always delivered.
func (s *server) startSeq(ctx context.Context, ns projection.Namespace, raw json.RawMessage) (uint64, error) {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0 || bytes.Equal(raw, []byte("null")):
		if ns == projection.A2A {
			return s.edge(ctx, startFirst)
		}
		return s.edge(ctx, startNew)
	case raw[0] == '"':
		var word string
		if err := json.Unmarshal(raw, &word); err == nil && (word == startNew || word == startFirst) {
			return s.edge(ctx, word)
		}
	case raw[0] == '{':
		var p position
		if err := decodeStrict(raw, &p); err != nil {
			return 0, prefixed("start: ", err)
		}
		return s.seqOf(ctx, p, "start.")
	}
	return 0, invalid(`start must be "new", "first", {"seq": N} or {"time": "RFC3339"}`)
}

// edge resolves "new" (the last sequence + 1) or "first", by bounds read
// after the create began (see freshBounds).
func (s *server) edge(ctx context.Context, which string) (uint64, error) {
	first, last, err := s.bounds.get(ctx)
	if err != nil {
		return 0, fmt.Errorf("reading the journal's bounds: %w", err)
	}
	if which == startFirst {
		return max(first, 1), nil
	}
	return last + 1, nil
}

// seqOf resolves a position to a sequence. field prefixes the names in
// its errors ("start." or nothing for a rewind body).
func (s *server) seqOf(ctx context.Context, p position, field string) (uint64, error) {
	switch {
	case (p.Seq == nil) == (p.Time == nil):
		return 0, invalid("%sseq or %stime is required, exactly one of them", field, field)
	case p.Seq != nil:
		return s.checkSeq(ctx, *p.Seq, field)
	}
	t, err := time.Parse(time.RFC3339, *p.Time)
	if err != nil {
		return 0, invalid("%stime must be an RFC 3339 time such as 2026-01-02T15:04:05Z, not %q", field, *p.Time)
	}
	seq, err := s.journal.SeqAtTime(ctx, t)
	if err != nil {
		return 0, fmt.Errorf("finding the journal sequence at %s: %w", t.Format(time.RFC3339), err)
	}
	return seq, nil
}

// checkSeq refuses a sequence past the end of the journal: a cursor there
// would silently skip messages not yet published, which is never what a
// typo meant.
func (s *server) checkSeq(ctx context.Context, seq uint64, field string) (uint64, error) {
	if seq == 0 {
		return 0, invalid("%sseq must be at least 1", field)
	}
	_, last, err := s.bounds.get(ctx)
	if err != nil {
		return 0, fmt.Errorf("reading the journal's bounds: %w", err)
	}
	if seq > last+1 {
		return 0, invalid("%sseq %d is past the end of the journal (last sequence %d)", field, seq, last)
	}
	return seq, nil
}

// prefixed adds context to a caller-facing error's message.
func prefixed(prefix string, err error) error {
	var ae *apiError
	if errors.As(err, &ae) {
		return &apiError{status: ae.status, code: ae.code, message: prefix + ae.message}
	}
	return err
}

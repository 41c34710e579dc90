// Package attempt is the attempt log: one small record per webhook POST
// the bridge makes, kept in a JetStream stream whose subjects index it by
// registration and by journal sequence, so that what happened to message N
// at endpoint X is one filtered read.
//
// It owns the record, its JSON and the stream. It never decides anything
// about a delivery and must never slow one down: recording is a
// non-blocking hand-off, and what NATS cannot take is counted and dropped,
// never waited for. No secret, token or credential may reach a record;
// callers hand it only what the webhook sender already redacted.
package attempt

import (
	"encoding/base64"
	"errors"
	"time"
	"unicode/utf8"
)

// Outcomes of an attempt (CONTRACT §7).
const (
	Outcome2xx       = "2xx"
	Outcome3xx       = "3xx"
	Outcome4xx       = "4xx"
	Outcome5xx       = "5xx"
	OutcomeTransport = "transport"
	OutcomeTimeout   = "timeout"
	OutcomeRefused   = "refused"
)

// Triggers of an attempt: what made the bridge POST.
const (
	// TriggerDelivery is the first POST of a message at or past the
	// furthest cursor the registration ever had.
	TriggerDelivery = "delivery"
	// TriggerReplay is the first POST of a message below it, after a
	// rewind.
	TriggerReplay = "replay"
	// TriggerRetry is every later POST after a failure, including the
	// first after an unpark.
	TriggerRetry = "retry"
	// TriggerResend is a POST an operator asked for.
	TriggerResend = "resend"
)

// MaxResponse is how much of an answer's body an attempt keeps.
const MaxResponse = 4096

// base64Prefix marks a response excerpt that is not valid UTF-8.
const base64Prefix = "base64:"

// Attempt is one POST as the log records it and the admin API answers it.
// Every member is always present in its JSON, so a reader never has to
// tell a missing member from a zero one.
type Attempt struct {
	Registration string `json:"registration"`
	// Seq is the journal sequence; for a batch, its first event's.
	Seq uint64 `json:"seq"`
	// Index is the message's place among those the record projects to
	// (A2A arrays); 0 for a single message and for a batch.
	Index     int    `json:"index"`
	WebhookID string `json:"webhookId"`
	// Attempt is 1 for the first POST of this message index to this
	// registration and one more for each later one. Zero asks the log to
	// number it after the last one it holds (see Log.Record).
	Attempt    uint32    `json:"attempt"`
	At         time.Time `json:"at"`
	DurationMs int64     `json:"durationMs"`
	Outcome    string    `json:"outcome"`
	Status     int       `json:"status"`
	// Error is non-empty exactly when Outcome is not 2xx.
	Error    string `json:"error"`
	Response string `json:"response"`
	Trigger  string `json:"trigger"`

	// pos is the record's position in the log (see posBits), the cursor
	// of the reads; it is not part of the record's JSON.
	pos uint64
}

// Excerpt renders the start of an answer's body as an attempt keeps it:
// at most MaxResponse bytes, as a string when they are valid UTF-8 (a
// character the limit cuts is dropped), else "base64:" and the standard
// base64 of those bytes — so a binary answer survives JSON intact.
func Excerpt(body []byte) string {
	if len(body) > MaxResponse {
		body = body[:MaxResponse]
		if t := trimPartial(body); len(t) < len(body) && utf8.Valid(t) {
			body = t
		}
	}
	if utf8.Valid(body) {
		return string(body)
	}
	return base64Prefix + base64.StdEncoding.EncodeToString(body)
}

// trimPartial drops the incomplete character a cut left at the end of b,
// if there is one.
func trimPartial(b []byte) []byte {
	for i := 1; i < utf8.UTFMax && i <= len(b); i++ {
		if utf8.RuneStart(b[len(b)-i]) {
			if !utf8.FullRune(b[len(b)-i:]) {
				return b[:len(b)-i]
			}
			break
		}
	}
	return b
}

// Errors of a resend, for callers to tell apart with errors.Is.
var (
	// ErrNoMessage: the journal holds no message with that sequence on
	// the registration's filter (removed, beyond the stream, or on
	// another subject).
	ErrNoMessage = errors.New("no such journal message on the registration's filter")
	// ErrUnprojectable: the message cannot be sent as this registration's
	// namespace sends messages.
	ErrUnprojectable = errors.New("journal message cannot be projected for the registration")
)

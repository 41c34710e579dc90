// Package a2a projects journal records as A2A 1.0 push notifications for
// the a2a namespace.
//
// A record holds one JSON StreamResponse or a JSON array of them; each
// becomes one POST, in order. Events are decoded into structs that mirror
// the A2A 1.0 data model, checked against what the specification requires,
// and re-encoded from those structs, so a receiver gets canonical JSON with
// the fields A2A defines and nothing a publisher slipped in beside them.
//
// The package must never send a request, never touch the store, and never
// let an event of one task reach another task's registration: push configs
// are registered per task by callers, and a misrouted event would hand one
// caller's task to another.
package a2a

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"unicode/utf8"

	"github.com/jetstream-bridge/bridge/projection"
)

// ContentType is the media type of every A2A push notification body.
const ContentType = "application/a2a+json"

// DefaultStream is the journal stream name used when none is given.
const DefaultStream = "JOURNAL"

// Option configures a Projection.
type Option func(*Projection)

// WithStream names the journal stream, the prefix of message ids when a
// record does not name its stream. Empty keeps DefaultStream.
func WithStream(name string) Option {
	return func(p *Projection) {
		if name != "" {
			p.stream = name
		}
	}
}

// Projection turns journal records into A2A push notifications.
// It holds no mutable state and is safe for concurrent use.
type Projection struct {
	stream string
}

var _ projection.Projection = (*Projection)(nil)

// New returns a Projection for the a2a namespace.
func New(opts ...Option) *Projection {
	p := &Projection{stream: DefaultStream}
	for _, opt := range opts {
		opt(p)
	}
	return p
}

// Namespace reports projection.A2A.
func (p *Projection) Namespace() projection.Namespace { return projection.A2A }

// Project returns one message per StreamResponse in r, in order, with ids
// <stream>-<seq>-<index>. Result.Terminal is set when any of them reports a
// terminal task state; events after it in the same record are still sent,
// in order, because the record was published as one unit and the receiver
// is owed all of it.
//
// Every error is permanent and names the record's sequence: the record is
// not A2A 1.0, or one of its events is for a task other than t.TaskID, in
// which case nothing of the record is sent.
func (p *Projection) Project(t projection.Target, r *projection.Record) (projection.Result, error) {
	if t.TaskID == "" {
		return projection.Result{}, fmt.Errorf("journal message %d: registration %q has no task id", r.Seq, t.ID)
	}
	events, err := decode(r.Data)
	if err != nil {
		var ee *eventError
		if errors.As(err, &ee) {
			return projection.Result{}, fmt.Errorf("event %d of journal message %d %w", ee.index, r.Seq, ee.err)
		}
		return projection.Result{}, fmt.Errorf("journal message %d %w", r.Seq, err)
	}
	stream := r.Stream
	if stream == "" {
		stream = p.stream
	}
	traceparent, tracestate := r.TraceContext()
	res := projection.Result{Messages: make([]projection.Message, 0, len(events))}
	for i := range events {
		body, terminal, err := checkEvent(t.TaskID, &events[i])
		if err != nil {
			return projection.Result{}, fmt.Errorf("event %d of journal message %d %w", i, r.Seq, err)
		}
		res.Terminal = res.Terminal || terminal
		res.Messages = append(res.Messages, projection.Message{
			ID:     messageID(stream, r.Seq, i),
			Header: header(traceparent, tracestate),
			Body:   body,
		})
	}
	return res, nil
}

// header is a notification's: its media type and the W3C trace context
// the record was published with, so the receiver's trace goes on from the
// publisher's.
func header(traceparent, tracestate string) http.Header {
	h := http.Header{"Content-Type": {ContentType}}
	if traceparent != "" {
		h[projection.TraceparentHeader] = []string{traceparent}
		if tracestate != "" {
			h[projection.TracestateHeader] = []string{tracestate}
		}
	}
	return h
}

// eventError is a decoding error of one element of a record's array.
type eventError struct {
	index int
	err   error
}

func (e *eventError) Error() string { return fmt.Sprintf("event %d %v", e.index, e.err) }

// decode returns the StreamResponses of a record: the array's elements, or
// the record itself when it is a single object, decoded in one pass.
func decode(data []byte) ([]streamResponse, error) {
	v := bytes.TrimLeft(data, " \t\r\n")
	if len(v) == 0 {
		return nil, errors.New("is empty, want a JSON StreamResponse or an array of them")
	}
	// JSON is UTF-8: a receiver must not get broken text.
	if !utf8.Valid(v) {
		return nil, fmt.Errorf("is not valid UTF-8 (byte %d)", len(data)-len(v)+invalidAt(v))
	}
	events, err := decodeFast(v)
	if err != nil {
		return nil, describe(v, len(data)-len(v), err)
	}
	if len(events) == 0 {
		return nil, errors.New("is an empty array, want at least one StreamResponse")
	}
	return events, nil
}

// checkEvent checks one StreamResponse and re-encodes it. Its errors read after
// "event N of journal message S".
func checkEvent(taskID string, sr *streamResponse) (body []byte, terminal bool, err error) {
	kind, id, terminal, err := sr.check()
	if err != nil {
		return nil, false, fmt.Errorf("is not a valid StreamResponse: %w", err)
	}
	if id != taskID {
		if id == "" {
			return nil, false, fmt.Errorf("is a %s without a taskId; this registration only receives task %q", kind, taskID)
		}
		return nil, false, fmt.Errorf("is for task %q, not this registration's task %q", id, taskID)
	}
	if body, err = encode(sr); err != nil {
		return nil, false, fmt.Errorf("does not encode: %w", err)
	}
	return body, terminal, nil
}

// encode writes sr as compact JSON without HTML escaping: the body is read
// by A2A clients, not embedded in a page.
func encode(sr *streamResponse) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(sr); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte{'\n'}), nil
}

// jsonKind names the JSON kind a Go type of the data model decodes from.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Slice, reflect.Array:
		return "array"
	case reflect.Struct, reflect.Map, reflect.Pointer:
		return "object"
	}
	return t.Kind().String()
}

// invalidAt returns the offset of the first byte of b that is not valid UTF-8.
func invalidAt(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return len(b)
}

func messageID(stream string, seq uint64, index int) string {
	b := make([]byte, 0, len(stream)+24)
	b = append(b, stream...)
	b = append(b, '-')
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, '-')
	b = strconv.AppendInt(b, int64(index), 10)
	return string(b)
}

// Package cloudevents projects journal records as CloudEvents 1.0 for the
// outbox namespace, in the HTTP binding's binary or structured content mode.
//
// Events are built with the CloudEvents SDK and written with the SDK's HTTP
// binding (binary mode) or its JSON event writer (structured mode). The package's own code only chooses the attributes, percent-encodes
// ce- header values (the binding requires it; the SDK does not do it) and
// checks what the SDK would let through. It must never send a request, never
// touch the store, and never forward a NATS header other than those it maps
// (ce-*, Content-Type, and the W3C traceparent and tracestate, which go on
// as themselves): Nats-* headers are the server's bookkeeping, not the
// receiver's business.
package cloudevents

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/cloudevents/sdk-go/v2/binding"
	"github.com/cloudevents/sdk-go/v2/event"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"github.com/cloudevents/sdk-go/v2/types"

	"github.com/jetstream-bridge/bridge/projection"
)

const (
	// DefaultStream is the journal stream name used when none is given.
	DefaultStream = "JOURNAL"
	// DefaultType is the CloudEvents type of a message without a ce-type header.
	DefaultType = "io.nats.jetstream.message"
	// octetStream is the data content type of last resort.
	octetStream = "application/octet-stream"
	// seqExtension carries the stream sequence on every wrapped message, so a
	// receiver can order and deduplicate without parsing the id.
	seqExtension = "natsseq"
)

// Format names accepted in projection.Target.Format.
const (
	FormatBinary     = "binary"
	FormatStructured = "structured"
)

// Option configures a Projection.
type Option func(*options)

type options struct {
	stream string
	source string
	typ    string
}

// WithStream names the journal stream. It is the default source's last
// segment and the prefix of generated ids when a record does not name its
// stream. Empty keeps DefaultStream.
func WithStream(name string) Option {
	return func(o *options) {
		if name != "" {
			o.stream = name
		}
	}
}

// WithSource sets the CloudEvents source (a URI-reference) of messages that
// are not CloudEvents already. Empty keeps the default, /jetstream/<stream>.
func WithSource(uriRef string) Option {
	return func(o *options) { o.source = uriRef }
}

// WithType sets the CloudEvents type of messages without a ce-type header.
// Empty keeps DefaultType.
func WithType(t string) Option {
	return func(o *options) {
		if t != "" {
			o.typ = t
		}
	}
}

// Projection turns journal records into CloudEvents HTTP requests.
// It holds no mutable state and is safe for concurrent use.
type Projection struct {
	stream string
	typ    string
	source types.URIRef
	// sourceErr is set when the configured source is not a URI-reference.
	// Project reports it for every wrapped message, naming the value, so a
	// bad setting parks registrations with a reason instead of crashing
	// the daemon; CheckSource lets the caller refuse it at start-up instead.
	sourceErr error

	// binary carries the SDK's encoding preference for binding.Write. It
	// holds values only, never a deadline or a cancellation; it is built
	// once because Write reads it per call.
	binary context.Context
}

var _ projection.Projection = (*Projection)(nil)

// New returns a Projection for the outbox namespace.
func New(opts ...Option) *Projection {
	o := options{stream: DefaultStream, typ: DefaultType}
	for _, opt := range opts {
		opt(&o)
	}
	if o.source == "" {
		o.source = "/jetstream/" + o.stream
	}
	p := &Projection{
		stream: o.stream,
		typ:    o.typ,
		binary: binding.WithForceBinary(context.Background()),
	}
	if err := CheckSource(o.source); err != nil {
		p.sourceErr = err
	} else {
		p.source = *types.ParseURIRef(o.source)
	}
	return p
}

// CheckSource reports whether s can be the CloudEvents source of wrapped
// messages: a non-empty URI-reference of printable characters.
func CheckSource(s string) error {
	if strings.TrimSpace(s) == "" {
		return fmt.Errorf("cloudevents source is empty")
	}
	if err := checkString("source", s); err != nil {
		return err
	}
	if types.ParseURIRef(s) == nil {
		return fmt.Errorf("cloudevents source %q is not a URI-reference", s)
	}
	return nil
}

// Namespace reports projection.Outbox.
func (p *Projection) Namespace() projection.Namespace { return projection.Outbox }

// Project returns the one request a receiver gets for r. Every error is
// permanent (the record can never be sent as a valid CloudEvent) and names
// the record's sequence.
func (p *Projection) Project(t projection.Target, r *projection.Record) (projection.Result, error) {
	msg, err := p.project(t, r)
	if err != nil {
		return projection.Result{}, fmt.Errorf("journal message %d: %w", r.Seq, err)
	}
	return projection.Result{Messages: []projection.Message{msg}}, nil
}

func (p *Projection) project(t projection.Target, r *projection.Record) (projection.Message, error) {
	e, structured, err := p.checkedEvent(t, r)
	if err != nil {
		return projection.Message{}, err
	}
	msg, err := p.write(e, structured)
	traceparent, tracestate := r.TraceContext()
	if err == nil && traceparent != "" {
		msg.Header[projection.TraceparentHeader] = []string{traceparent}
		if tracestate != "" {
			msg.Header[projection.TracestateHeader] = []string{tracestate}
		}
	}
	return msg, err
}

// checkedEvent is the event r is sent as for t, checked, and whether t
// asks for structured mode, whose event carries the message's trace
// context in its extensions.
func (p *Projection) checkedEvent(t projection.Target, r *projection.Record) (*event.Event, bool, error) {
	structured, err := structuredFormat(t.Format)
	if err != nil {
		return nil, false, err
	}
	e, err := p.event(t, r)
	if err != nil {
		return nil, false, err
	}
	if structured {
		traceparent, tracestate := r.TraceContext()
		carryTrace(e, traceparent, tracestate)
	}
	if err := validate(e); err != nil {
		return nil, false, err
	}
	return e, structured, nil
}

// Extension attributes of the CloudEvents Distributed Tracing extension.
const (
	traceparentExtension = "traceparent"
	tracestateExtension  = "tracestate"
)

// carryTrace puts the message's trace context into a structured event's
// extension attributes, unless the event carries its own. The extension
// holds the trace of the event's start and must not follow each hop
// (CloudEvents Distributed Tracing extension), so it is the published
// context whatever span a POST of it is traced by: a retry sends the same
// body. The headers carry the hop's context.
func carryTrace(e *event.Event, traceparent, tracestate string) {
	if traceparent == "" {
		return
	}
	ext := e.Extensions()
	if _, ok := ext[traceparentExtension]; ok {
		return
	}
	e.SetExtension(traceparentExtension, traceparent)
	if _, ok := ext[tracestateExtension]; !ok && tracestate != "" {
		e.SetExtension(tracestateExtension, tracestate)
	}
}

func structuredFormat(f string) (bool, error) {
	switch f {
	case "", FormatBinary:
		return false, nil
	case FormatStructured:
		return true, nil
	}
	return false, fmt.Errorf("registration format %q is neither %q nor %q", f, FormatBinary, FormatStructured)
}

// event decides what r is: a structured CloudEvent, a binary one, or a plain
// message to wrap. A CloudEvents content type wins over ce- headers, as in
// the HTTP binding, where the content type decides the mode.
func (p *Projection) event(t projection.Target, r *projection.Record) (*event.Event, error) {
	f := readFacts(r.Header)
	if isEventFormat(f.contentType) {
		return decodeStructured(f.contentType, r.Data)
	}
	if f.binaryEvent {
		return decodeBinary(r.Header, f.contentType, r.Data)
	}
	return p.wrap(t, r, f)
}

// wrap builds the event for a message that is not a CloudEvent yet.
func (p *Projection) wrap(t projection.Target, r *projection.Record, f facts) (*event.Event, error) {
	if p.sourceErr != nil {
		return nil, p.sourceErr
	}
	id := f.msgID
	if id == "" {
		stream := r.Stream
		if stream == "" {
			stream = p.stream
		}
		id = stream + "-" + strconv.FormatUint(r.Seq, 10)
	}
	typ := f.ceType
	if typ == "" {
		typ = p.typ
	}
	ct := f.contentType
	if ct == "" {
		ct = t.DataContentType
	}
	if ct == "" {
		ct = octetStream
	}
	w := &wrapped{contentType: ct, subject: r.Subject, time: types.Timestamp{Time: r.Time}}
	w.context = event.EventContextV1{
		ID:              id,
		Source:          p.source,
		Type:            typ,
		DataContentType: &w.contentType,
		Extensions:      map[string]any{seqExtension: seqValue(r.Seq)},
	}
	if r.Subject != "" {
		w.context.Subject = &w.subject
	}
	if !r.Time.IsZero() {
		w.context.Time = &w.time
	}
	// The payload is bytes: structured mode carries it as data_base64
	// unless chooseDataEncoding finds it is JSON.
	w.event = event.Event{Context: &w.context, DataEncoded: r.Data, DataBase64: true}
	return &w.event, nil
}

// wrapped holds a wrapped message's event and everything its context points
// to in one allocation: this runs for every message of every registration.
type wrapped struct {
	event       event.Event
	context     event.EventContextV1
	contentType string
	subject     string
	time        types.Timestamp
}

// seqValue is the natsseq extension: a CloudEvents Integer, which is 32-bit
// signed, while it fits; beyond that the decimal string, because a value the
// SDK refuses would make every later message of the stream unsendable.
func seqValue(seq uint64) any {
	if seq <= math.MaxInt32 {
		return int32(seq)
	}
	return strconv.FormatUint(seq, 10)
}

// write encodes e in binary mode with the SDK's HTTP binding onto a request
// made only to collect the headers and the body, then percent-encodes the
// ce- values; in structured mode it writes e with the SDK's JSON writer.
func (p *Projection) write(e *event.Event, structured bool) (projection.Message, error) {
	if structured {
		// The binding's structured mode sets Content-Type and sends what the
		// format writes; done here, the body is not copied once more.
		chooseDataEncoding(e)
		body, err := jsonFormat{}.Marshal(e)
		if err != nil {
			return projection.Message{}, fmt.Errorf("encode event %q: %w", e.ID(), err)
		}
		return projection.Message{
			ID:     e.ID(),
			Header: http.Header{"Content-Type": {jsonFormat{}.MediaType()}},
			Body:   body,
		}, nil
	}
	if dct := e.DataContentType(); isEventFormat(dct) {
		return projection.Message{}, fmt.Errorf("datacontenttype %q would read as a structured event in binary mode; register with format %q", dct, FormatStructured)
	}
	req := &http.Request{Header: make(http.Header, 8)}
	if err := cehttp.WriteRequest(p.binary, binding.ToMessage(e), req); err != nil {
		return projection.Message{}, fmt.Errorf("encode event %q: %w", e.ID(), err)
	}
	for k, vs := range req.Header {
		if strings.HasPrefix(k, "Ce-") {
			for i, v := range vs {
				vs[i] = percentEncode(v)
			}
		}
	}
	// The binding writes the event's data as the body unchanged, so the
	// message is sent from the record's own bytes instead of a copy read
	// back for every message; a body of another length is read as written.
	body := e.Data()
	if req.ContentLength != int64(len(body)) {
		var err error
		if body, err = readBody(req); err != nil {
			return projection.Message{}, fmt.Errorf("encode event %q: read body: %w", e.ID(), err)
		}
	}
	return projection.Message{ID: e.ID(), Header: req.Header, Body: body}, nil
}

func readBody(req *http.Request) ([]byte, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return nil, nil
	}
	defer req.Body.Close()
	if req.ContentLength > 0 {
		b := make([]byte, req.ContentLength)
		_, err := io.ReadFull(req.Body, b)
		return b, err
	}
	return io.ReadAll(req.Body)
}

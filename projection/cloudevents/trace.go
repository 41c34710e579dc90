package cloudevents

import (
	"bytes"
	"slices"
	"strings"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/jetstream-bridge/bridge/projection"
)

var _ projection.Retracer = (*Projection)(nil)

// Retrace gives a structured event the context of the span tracing its
// POST: the event was made by the bridge for this receiver, one hop, so
// its traceparent attribute is the POST's header (CloudEvents Distributed
// Tracing). An event whose attribute is not the one the message was
// published with keeps its own, and so does every event of a batch, whose
// POST continues only its first event's trace.
func (p *Projection) Retrace(msg projection.Message, traceparent, tracestate string) (projection.Message, bool) {
	if traceparent == "" || len(msg.Body) == 0 || msg.Body[0] != '{' ||
		!strings.HasPrefix(msg.Header.Get("Content-Type"), event.ApplicationCloudEventsJSON) {
		return msg, false
	}
	at, end, ok := member(msg.Body, traceparentExtension)
	if !ok {
		return msg, false
	}
	published := msg.Header.Get(projection.TraceparentHeader)
	switch {
	case at >= 0 && published != "" && string(msg.Body[at:end]) == `"`+published+`"`:
		msg.Body = slices.Concat(msg.Body[:at], quoted(traceparent), msg.Body[end:])
	case at < 0 && published == "":
		head := `{"` + traceparentExtension + `":` + string(quoted(traceparent)) + ","
		if tracestate != "" {
			head += `"` + tracestateExtension + `":` + string(quoted(tracestate)) + ","
		}
		msg.Body = slices.Concat([]byte(head), msg.Body[1:])
	default:
		return msg, false
	}
	return msg, true
}

// member finds the value of the top-level member name of the JSON object
// body, as [at, end), or at = -1 when there is none; ok is false when
// body is not an object. Members of nested values (the data) are skipped,
// never matched.
func member(body []byte, name string) (at, end int, ok bool) {
	dec := jsontext.NewDecoder(bytes.NewReader(body), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return -1, -1, false
	}
	for dec.PeekKind() == '"' {
		tok, err := dec.ReadToken()
		if err != nil {
			return -1, -1, false
		}
		if tok.String() != name {
			if err := dec.SkipValue(); err != nil {
				return -1, -1, false
			}
			continue
		}
		v, err := dec.ReadValue()
		if err != nil {
			return -1, -1, false
		}
		end := int(dec.InputOffset())
		return end - len(v), end, true
	}
	return -1, -1, true
}

// quoted is s as a JSON string. Trace contexts reach here valid UTF-8
// (printable ASCII), which AppendQuote does not refuse.
func quoted(s string) []byte {
	b, _ := jsontext.AppendQuote(nil, s)
	return b
}

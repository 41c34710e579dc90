package projection

import "strings"

// The W3C Trace Context headers as a projection sets them on a Message,
// in net/http's canonical spelling, so a sender that replaces them with
// its own span's context replaces these keys and not a second spelling.
const (
	TraceparentHeader = "Traceparent"
	TracestateHeader  = "Tracestate"
)

// TraceContext returns the W3C trace context the record was published
// with, verbatim: its traceparent and tracestate headers, matched
// case-insensitively (nats.go keeps the publisher's spelling). A
// traceparent that is not well-formed, or given twice, is not a trace
// context and gives ("", ""): sent on, it would only break the receiver's
// tracing, and carried into a CloudEvent it would make the event invalid
// and park the registration. A tracestate is kept only beside a valid
// traceparent and only when it is printable ASCII; several values are
// joined with commas, which is how the header combines.
func (r *Record) TraceContext() (traceparent, tracestate string) {
	var parents, states []string
	for k, vs := range r.Header {
		switch {
		case len(k) == len("traceparent") && strings.EqualFold(k, "traceparent"):
			parents = append(parents, vs...)
		case len(k) == len("tracestate") && strings.EqualFold(k, "tracestate"):
			states = append(states, vs...)
		}
	}
	if len(parents) != 1 || !ValidTraceparent(parents[0]) {
		return "", ""
	}
	tracestate = strings.Join(states, ",")
	if !printable(tracestate) {
		tracestate = ""
	}
	return parents[0], tracestate
}

// traceparentLen is the length of a version 00 traceparent:
// version-traceid-parentid-flags, 2+1+32+1+16+1+2.
const traceparentLen = 55

// ValidTraceparent reports whether s is a W3C traceparent a receiver will
// accept: lower-case hex fields of the right lengths, a version other than
// ff, and neither id all zeros. A version above 00 may carry more fields
// after the flags, as the specification lets later versions do.
func ValidTraceparent(s string) bool {
	if len(s) < traceparentLen || s[2] != '-' || s[35] != '-' || s[52] != '-' {
		return false
	}
	version, traceID, parentID, flags := s[:2], s[3:35], s[36:52], s[53:55]
	switch {
	case !lowerHex(version) || version == "ff" || !lowerHex(traceID) || !lowerHex(parentID) || !lowerHex(flags):
		return false
	case strings.Count(traceID, "0") == len(traceID) || strings.Count(parentID, "0") == len(parentID):
		return false
	case version == "00":
		return len(s) == traceparentLen
	}
	return len(s) == traceparentLen || s[traceparentLen] == '-'
}

func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// printable reports whether s is printable ASCII, space included: what a
// header value and a CloudEvents String both take as is.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' || c > '~' {
			return false
		}
	}
	return true
}

// Retracer is implemented by a projection whose bodies carry a trace
// context too, as CloudEvents' structured mode does. Retrace returns msg
// with traceparent, the context of the span tracing one POST of it, in
// its body in place of the published context the projection put there,
// or beside the body's attributes when the message was published without
// one; ok is false when the body is to be sent as it is (it carries a
// context of its own, or none can go in it). msg is shared: Retrace
// copies the body it changes.
type Retracer interface {
	Retrace(msg Message, traceparent, tracestate string) (Message, bool)
}

package webhook

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Classes of an Outcome, one per way a POST can end; metrics label by them.
const (
	Class2xx       = "2xx"
	Class3xx       = "3xx"
	Class4xx       = "4xx"
	Class5xx       = "5xx"
	ClassTransport = "transport"
	ClassRefused   = "refused"
)

// Outcome is how one POST ended, in the terms the retry decision needs.
type Outcome struct {
	// Status is the receiver's HTTP status; 0 when none arrived.
	Status int
	// Class is one of the Class constants: the status family ("5xx" also
	// for a status outside 200–599), "transport" when no answer arrived,
	// "refused" when the bridge would not send (the URL guard, or a
	// request configuration that can never be sent).
	Class string
	// RetryAfter is the receiver's Retry-After, counted from Request.At and
	// at least 1 s when the receiver sent one; 0 when it sent none or an
	// unreadable one. Not clamped above: that is the caller's policy.
	RetryAfter time.Duration
	// Permanent marks a failure retrying cannot fix: 410 Gone, or a URL
	// the guard refuses for good. A private address found at dial is not
	// permanent: DNS changes.
	Permanent bool
	// Err is the transport error or the refusal; nil when the receiver
	// answered. It never carries the URL (only the dialled host and port).
	// A cancelled ctx shows as Class "transport" with errors.Is(Err,
	// context.Canceled): the bridge stopping, not the receiver failing.
	Err error
	// Excerpt is the start of a failed answer's body, sanitised to one
	// printable line, with every secret of the request redacted.
	Excerpt string
	// Response is the start of the answer's body as received, with every
	// secret of the request redacted; set only with WithResponseBody.
	Response []byte
	// Duration is the time Send took.
	Duration time.Duration
	// Reauthorized says the receiver answered 401 to the first OAuth 2.0
	// token and this is the outcome of getting a new one and POSTing
	// again with it; the first POST is not reported apart.
	Reauthorized bool
}

// OK reports a 2xx answer: the receiver acknowledged the message.
func (o Outcome) OK() bool { return o.Class == Class2xx }

// Error describes the outcome in one line for a log and a registration's
// lastError, e.g. "receiver answered 503 Service Unavailable: busy" or
// "POST failed: dial tcp 127.0.0.1:9: connect: connection refused". It
// names no secret, token, credential or URL path and query.
func (o Outcome) Error() string {
	switch o.Class {
	case ClassTransport:
		var te *TokenError
		switch {
		case errors.As(o.Err, &te) && o.Reauthorized:
			return "receiver answered 401 Unauthorized; POST not sent again: " + te.Error()
		case errors.As(o.Err, &te):
			return "POST not sent: " + te.Error()
		}
		return "POST failed: " + errText(o.Err)
	case ClassRefused:
		return "POST refused: " + errText(o.Err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "receiver answered %d", o.Status)
	if text := http.StatusText(o.Status); text != "" {
		b.WriteString(" " + text)
	}
	if o.RetryAfter > 0 {
		fmt.Fprintf(&b, " (Retry-After %s)", o.RetryAfter)
	}
	if o.Reauthorized {
		b.WriteString(" to a new OAuth 2.0 token after a 401")
	}
	if o.Class == Class3xx {
		b.WriteString("; redirects are not followed")
	}
	if o.Excerpt != "" {
		b.WriteString(": " + o.Excerpt)
	}
	return b.String()
}

func errText(err error) string {
	if err == nil {
		return "unknown error"
	}
	return err.Error()
}

// classOf maps a status to its class.
func classOf(status int) string {
	switch {
	case status >= 200 && status < 300:
		return Class2xx
	case status >= 300 && status < 400:
		return Class3xx
	case status >= 400 && status < 500:
		return Class4xx
	}
	return Class5xx
}

package webhook

import (
	"net/http"

	"github.com/jetstream-bridge/bridge/projection"
)

// traceHeaders puts the context of the span tracing this POST in place of
// the message's own, so the receiver's trace continues from the POST and
// not from the publisher past it. Without one the message's headers stay
// as the projection set them: the published context, verbatim.
func traceHeaders(h http.Header, r *Request) {
	if r.TraceParent == "" {
		return
	}
	// One array for both values, as for the sender's other headers.
	v := []string{r.TraceParent, r.TraceState}
	h[projection.TraceparentHeader] = v[0:1:1]
	if r.TraceState == "" {
		delete(h, projection.TracestateHeader)
		return
	}
	h[projection.TracestateHeader] = v[1:2:2]
}

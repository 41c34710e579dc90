package cloudevents

import (
	"errors"
	"net/http"
	"strings"

	"github.com/jetstream-bridge/bridge/projection"
)

// BatchContentType is the CloudEvents JSON batch format's media type.
const BatchContentType = "application/cloudevents-batch+json"

var _ projection.Batcher = (*Projection)(nil)

// Batch joins structured-mode events into one JSON batch, in order. The
// batch's id is "<first id>..<last id>": stable for a retry of the same
// batch, and different when a retry finds more events to carry. Receivers
// deduplicate by each event's own id.
func (p *Projection) Batch(msgs []projection.Message) (projection.Message, error) {
	if len(msgs) == 0 {
		return projection.Message{}, errors.New("a CloudEvents batch needs at least one event")
	}
	size := 2 + len(msgs) - 1
	for _, m := range msgs {
		size += len(m.Body)
	}
	body := make([]byte, 0, size)
	body = append(body, '[')
	for i, m := range msgs {
		if !strings.HasPrefix(m.Header.Get("Content-Type"), "application/cloudevents+json") {
			return projection.Message{}, errors.New("a CloudEvents batch can only join structured-mode events")
		}
		if i > 0 {
			body = append(body, ',')
		}
		body = append(body, m.Body...)
	}
	body = append(body, ']')
	id := msgs[0].ID
	if len(msgs) > 1 {
		id += ".." + msgs[len(msgs)-1].ID
	}
	return projection.Message{
		ID:     id,
		Header: batchHeader(msgs),
		Body:   body,
	}, nil
}

// batchHeader carries the trace context of the batch's first event that
// has one: a POST belongs to one trace, and every event keeps its own in
// its traceparent attribute.
func batchHeader(msgs []projection.Message) http.Header {
	h := http.Header{"Content-Type": {BatchContentType}}
	for _, m := range msgs {
		if tp, ok := m.Header[projection.TraceparentHeader]; ok {
			h[projection.TraceparentHeader] = tp
			if ts, ok := m.Header[projection.TracestateHeader]; ok {
				h[projection.TracestateHeader] = ts
			}
			break
		}
	}
	return h
}

// Package projection defines what one journal message is sent as.
//
// It holds the interface the delivery worker calls and the types that cross
// it, and nothing else: implementations (projection/cloudevents,
// projection/a2a) know nothing of the worker, the store or HTTP transport,
// and this package must never import any of them.
package projection

import (
	"net/http"
	"time"
)

// Namespace splits the registrations of one store between the two workers.
//
// It is the store's discriminator, not a per-row predicate: the worker hands
// it to the due query so rows of the other namespace can never fill a bounded
// read and starve this worker's own.
type Namespace string

const (
	// Outbox registrations are the operator's own destinations (CloudEvents).
	Outbox Namespace = "outbox"
	// A2A registrations are caller-supplied push configurations, held to the
	// strict URL guard.
	A2A Namespace = "a2a"
)

// Valid reports whether n is one of the namespaces the bridge serves.
func (n Namespace) Valid() bool { return n == Outbox || n == A2A }

// Record is one journal message, as read from the stream.
type Record struct {
	Stream  string
	Seq     uint64
	Subject string
	// Time is the stream's own timestamp for the message.
	Time time.Time
	// Header holds the NATS headers with the keys exactly as published;
	// lookups that must be case-insensitive are the projection's job.
	Header map[string][]string
	Data   []byte
}

// Target is what a projection may know of the registration it projects for:
// the wire choices, never the secrets or the URL.
type Target struct {
	ID string
	// TaskID is the A2A task a registration follows; empty for outbox.
	TaskID string
	// Format is "binary" (default) or "structured" for CloudEvents.
	Format string
	// DataContentType is used for messages without a Content-Type header.
	DataContentType string
}

// Message is one HTTP request body a receiver gets.
type Message struct {
	// ID is the stable identity of this message across retries and replays;
	// it becomes the webhook-id header and keys the receiver's deduplication.
	ID string
	// Header holds the request headers the projection sets (Content-Type and
	// the protocol's own headers). The sender adds signing and auth headers.
	Header http.Header
	Body   []byte
}

// Result is what one journal message becomes for one registration.
type Result struct {
	// Messages are sent in order; an empty list means nothing to send, and
	// the cursor still advances past the record — that is how a projection
	// filters.
	Messages []Message
	// Terminal reports that this record ends the registration's stream: once
	// every message is acknowledged, the registration is completed.
	Terminal bool
}

// Projection turns journal records into messages for one namespace.
//
// An error from Project is permanent: the record can never be projected for
// this target, so the worker parks the registration with an error naming
// the record's sequence instead of skipping it silently or retrying forever.
// Implementations must be safe for concurrent use.
type Projection interface {
	Namespace() Namespace
	Project(t Target, r *Record) (Result, error)
}

// Batcher is implemented by projections that can carry the messages of
// several consecutive records in one request. The worker projects each
// record with Target.Format "structured", then asks the Batcher to join
// them; the cursor moves past the whole batch only on a 2xx.
type Batcher interface {
	// Batch joins msgs, in order, into one request. Its ID must depend
	// only on the messages joined, so a retry of the same batch carries
	// the same id.
	Batch(msgs []Message) (Message, error)
}

// Event is one journal message as a registration's filter reads it
// (CONTRACT §13): the CloudEvent the registration would be sent.
type Event struct {
	// Attributes are the event's context attributes and extensions by
	// name; time is a time.Time, numbers are int64, the rest strings.
	Attributes map[string]any
	// DataContentType is the event's datacontenttype, empty when unset.
	DataContentType string
	// Data is the event's data as bytes.
	Data []byte
}

// Describer is implemented by projections whose messages a filter can
// read. Describe fails exactly where Project fails for the same target
// and record, with the same permanence.
type Describer interface {
	Describe(t Target, r *Record) (Event, error)
}

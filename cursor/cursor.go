// Package cursor is the registration store: each webhook registration with
// its configuration, its cursor into the journal, its retry and parking
// state, and the admin API's idempotency keys.
//
// It is the only durable state the bridge owns; the payloads stay in the
// journal stream. It never reads the journal, never projects and never
// dials: it must not import the bridge, the journal or any projection.
//
// The cursor of a registration, NextSeq, is the stream sequence of the first
// message its receiver has not acknowledged. It moves forward only
// (max(old, new)) except through an explicit Rewind, so concurrent turns can
// repeat a message but never lose one.
package cursor

import (
	"context"
	"errors"
	"time"
)

// State is where a registration stands.
type State string

const (
	// Active registrations are delivered to.
	Active State = "active"
	// Parked registrations keep their cursor and wait for an operator.
	Parked State = "parked"
	// Completed registrations delivered their terminal message and are never
	// scheduled again; only Purge removes them.
	Completed State = "completed"
)

// Errors callers distinguish with errors.Is.
var (
	ErrNotFound = errors.New("registration not found")
	ErrExists   = errors.New("registration already exists")
	// ErrIdempotencyConflict means an Idempotency-Key was reused with
	// another request body.
	ErrIdempotencyConflict = errors.New("idempotency key was used with a different request")
	// ErrUnavailable means the store did not answer in time: a replicated
	// store's leader is being elected, or its servers cannot be reached.
	// The call may succeed when tried again; nothing was changed by it
	// unless the error says otherwise.
	ErrUnavailable = errors.New("the store is unavailable")
)

// Batch configures CloudEvents batch mode for an outbox registration.
type Batch struct {
	MaxEvents int           `json:"maxEvents,omitempty"`
	MaxBytes  int           `json:"maxBytes,omitempty"`
	MaxDelay  time.Duration `json:"maxDelay,omitempty"`
}

// Config is what an operator or an A2A caller registers. Put replaces it
// whole; the cursor state beside it survives the replacement.
type Config struct {
	ID              string `json:"id"`
	Namespace       string `json:"namespace"`
	Subject         string `json:"subject"`
	TaskID          string `json:"taskId,omitempty"`
	URL             string `json:"url"`
	Format          string `json:"format,omitempty"`
	DataContentType string `json:"dataContentType,omitempty"`
	// Secret is the Standard Webhooks signing key ("whsec_…").
	Secret string `json:"secret,omitempty"`
	// PreviousSecret keeps signing beside Secret until PreviousSecretUntil,
	// so receivers can rotate without dropping a delivery.
	PreviousSecret      string    `json:"previousSecret,omitempty"`
	PreviousSecretUntil time.Time `json:"previousSecretUntil,omitzero"`
	Token               string    `json:"token,omitempty"`
	AuthScheme          string    `json:"authScheme,omitempty"`
	AuthCredentials     string    `json:"authCredentials,omitempty"`
	Batch               *Batch    `json:"batch,omitempty"`
	// Headers are added to every POST of the registration; the admin API
	// refuses the names the bridge sets itself.
	Headers   map[string]string `json:"headers,omitempty"`
	TLS       *TLS              `json:"tls,omitempty"`
	OAuth2    *OAuth2           `json:"oauth2,omitempty"`
	RateLimit *RateLimit        `json:"rateLimit,omitempty"`
	// Ordering, when its key is not the whole registration, lets many
	// POSTs be in flight and keeps order per key (CONTRACT §12).
	Ordering *Ordering `json:"ordering,omitempty"`
	// Filter is a CEL expression over the CloudEvent the registration
	// would send, its data, the NATS headers and subject; a message it
	// answers false for is passed as if acknowledged (CONTRACT §13).
	Filter string `json:"filter,omitempty"`
}

// TLS is how the bridge dials one receiver: the CAs it trusts instead of
// the system pool, the client certificate it presents and the name it
// verifies. The fields are PEM; ClientKey is a secret like Secret.
type TLS struct {
	CACertificates    string `json:"caCertificates,omitempty"`
	ClientCertificate string `json:"clientCertificate,omitempty"`
	ClientKey         string `json:"clientKey,omitempty"`
	ServerName        string `json:"serverName,omitempty"`
}

// OAuth2 is an OAuth 2.0 client-credentials grant whose token the bridge
// sends as the POST's bearer. ClientSecret is a secret like Secret.
type OAuth2 struct {
	TokenURL     string   `json:"tokenUrl"`
	ClientID     string   `json:"clientId"`
	ClientSecret string   `json:"clientSecret,omitempty"`
	Scopes       []string `json:"scopes,omitempty"`
	Audience     string   `json:"audience,omitempty"`
}

// RateLimit bounds how fast a registration is POSTed: PerSecond on
// average, at most Burst at once.
type RateLimit struct {
	PerSecond float64 `json:"perSecond"`
	Burst     int     `json:"burst,omitempty"`
}

// Registration is a Config with its delivery state.
type Registration struct {
	Config
	State   State  `json:"state"`
	NextSeq uint64 `json:"nextSeq"`
	// Attempts counts consecutive failures; 0 after any success.
	Attempts uint32 `json:"attempts"`
	// NextAttemptAt is when the registration is due. Zero means idle: caught
	// up with the journal and woken only by a new message, so idle rows cost
	// nothing per tick.
	NextAttemptAt time.Time `json:"nextAttemptAt,omitzero"`
	LastError     string    `json:"lastError,omitempty"`
	// Delivered counts POSTs answered 2xx.
	Delivered   uint64    `json:"delivered"`
	CreatedAt   time.Time `json:"createdAt"`
	UpdatedAt   time.Time `json:"updatedAt"`
	CompletedAt time.Time `json:"completedAt,omitzero"`
	// Furthest is the furthest cursor the registration had before its
	// last rewind: a POST below HighWater is a replay, not a delivery.
	// Rows written before it existed read 0.
	Furthest uint64 `json:"furthest,omitempty"`
	// Ahead is what the receiver acknowledged past NextSeq, out of order
	// (registrations with ordering keys); a rewind clears it.
	Ahead Ahead `json:"ahead,omitempty"`
	// Filtered counts messages the filter answered false for;
	// FilterErrors those it failed on, the latest named by LastFilterError
	// (CONTRACT §13). Both pass the cursor as acknowledged messages do.
	Filtered        uint64 `json:"filtered,omitempty"`
	FilterErrors    uint64 `json:"filterErrors,omitempty"`
	LastFilterError string `json:"lastFilterError,omitempty"`
}

// HighWater is the furthest cursor the registration ever had.
func (r *Registration) HighWater() uint64 { return max(r.Furthest, r.NextSeq) }

// Progress is one acknowledged step of a registration's turn.
type Progress struct {
	// NextSeq is the new cursor; the store keeps max(old, NextSeq).
	NextSeq uint64
	// Delivered is how many POSTs were answered 2xx since the last Advance.
	Delivered uint64
	// Filtered and FilterErrors count the messages the registration's
	// filter passed over since the last Advance (false, and failed);
	// LastFilterError, when set, replaces the row's.
	Filtered        uint64
	FilterErrors    uint64
	LastFilterError string
	// Idle marks the registration caught up: it leaves the due index until
	// the worker wakes it for a new message.
	Idle bool
	// Complete marks the terminal message acknowledged; the registration
	// becomes Completed in the same write as the cursor.
	Complete bool
	// Window marks the progress of a registration delivered with ordering
	// keys: Ahead is then its whole acknowledged set past NextSeq, and
	// Attempts and LastError are its oldest unacknowledged message's
	// failures, which acknowledgements of other keys do not clear.
	Window    bool
	Ahead     Ahead
	Attempts  uint32
	LastError string
	// RetryAt, with Window and not Idle, is when the registration is due
	// next: now when more is waiting, or the earliest backoff of a failing
	// message, or the end of a pause its receiver asked for.
	RetryAt time.Time
}

// ListOptions filter and page a listing. After is the id the previous page
// ended on; Limit 0 means the store's default page (100). Prefix keeps the
// ids that begin with it; the listing starts and stops at its range, so
// finding one id among many reads only the rows it could be.
type ListOptions struct {
	Namespace string
	State     State
	Prefix    string
	After     string
	Limit     int
}

// Due is the answer of a due query.
type Due struct {
	Rows []Registration
	// Unserved counts due rows of the other namespace: work this worker must
	// not touch, reported so an unscheduled namespace cannot look quiet.
	Unserved int
}

// Idempotency binds a create to an Idempotency-Key.
type Idempotency struct {
	Key string
	// Hash identifies the request body; the same key with another hash is
	// ErrIdempotencyConflict.
	Hash []byte
	// Answer renders the response stored beside the key, in the same
	// transaction as the registration it created.
	Answer func(Registration) ([]byte, error)
}

// Store is the narrow interface the bridge needs. It is kept small on
// purpose: a replicated JetStream key-value backend must be able to
// implement it without changing its callers.
type Store interface {
	// Create stores a new registration (ErrExists when the id is taken).
	// With idem non-nil, a replay of the same key and hash returns the
	// stored answer instead, and nothing new is created.
	Create(ctx context.Context, r Registration, idem *Idempotency) (Registration, []byte, error)
	// Replace swaps the Config of an existing registration, keeping its
	// cursor; attempts and parking are reset and it becomes due at `at`.
	Replace(ctx context.Context, c Config, at time.Time) (Registration, error)
	Get(ctx context.Context, id string) (Registration, error)
	// List pages registrations in id order; next is empty on the last page.
	List(ctx context.Context, opt ListOptions) (rows []Registration, next string, err error)
	// Due returns at most limit active registrations of ns due at or before
	// at, earliest first, reading only the due index.
	Due(ctx context.Context, at time.Time, limit int, ns string) (Due, error)
	// Advance records acknowledged progress. Durability may lag the call,
	// never lead it: a crash repeats deliveries, never loses them. A
	// window that breaks Ahead's invariant is refused (ErrInvalidWindow).
	Advance(ctx context.Context, id string, p Progress) error
	// Retry counts a failure and schedules the next attempt.
	Retry(ctx context.Context, id string, next time.Time, lastErr string) error
	// Park stops delivery, keeping the cursor.
	Park(ctx context.Context, id string, lastErr string) error
	// Unpark makes a parked registration due at `at`; false when it was not
	// parked.
	Unpark(ctx context.Context, id string, at time.Time) (bool, error)
	// Rewind moves the cursor to seq in either direction, resets attempts
	// and leaves the state as it was.
	Rewind(ctx context.Context, id string, seq uint64, at time.Time) (Registration, error)
	// Delete is idempotent.
	Delete(ctx context.Context, id string) error
	Purge(ctx context.Context, p RetentionPolicy) (PurgeReport, error)
	// Flush makes every acknowledged Advance durable.
	Flush(ctx context.Context) error
	// Routes calls fn for every active registration whose filter is
	// exactly filter, so a message's subject finds the registrations it
	// wakes without their being held in memory.
	Routes(ctx context.Context, filter string, fn func(id, ns string)) error
	// WildcardFilters calls fn once per distinct wildcard filter of an
	// active registration.
	WildcardFilters(ctx context.Context, fn func(filter string)) error
	// WakeBehind makes due every idle active registration whose cursor is
	// below seq: those that may have missed messages while nothing
	// followed the stream.
	WakeBehind(ctx context.Context, seq uint64) (int, error)
	// MakeDue makes the active ones among ids due at once.
	MakeDue(ctx context.Context, ids []string) error
	Close() error
}

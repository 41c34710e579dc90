package admin

import (
	"context"
	"time"

	"github.com/jetstream-bridge/bridge/cursor"
)

// Registration is a registration as the API answers it, and as the CLI
// reads it. It is built field by field from the stored one, never by
// embedding it, so a secret added to cursor.Config later cannot reach an
// answer by accident.
type Registration struct {
	ID              string          `json:"id"`
	Namespace       string          `json:"namespace"`
	Subject         string          `json:"subject"`
	TaskID          string          `json:"taskId,omitempty"`
	URL             string          `json:"url"`
	Format          string          `json:"format,omitempty"`
	DataContentType string          `json:"dataContentType,omitempty"`
	Batch           *Batch          `json:"batch,omitempty"`
	Signed          bool            `json:"signed"`
	HasToken        bool            `json:"hasToken"`
	Authentication  *Authentication `json:"authentication,omitempty"`
	OAuth2          *OAuth2         `json:"oauth2,omitempty"`
	State           string          `json:"state"`
	NextSeq         uint64          `json:"nextSeq"`
	Attempts        uint32          `json:"attempts"`
	NextAttemptAt   *time.Time      `json:"nextAttemptAt"`
	LastError       string          `json:"lastError"`
	CreatedAt       time.Time       `json:"createdAt"`
	UpdatedAt       time.Time       `json:"updatedAt"`
	CompletedAt     *time.Time      `json:"completedAt,omitempty"`
	Delivered       uint64          `json:"delivered"`
	// Lag is how many messages of the stream lie at or past NextSeq, on
	// any subject: an upper bound of what is left to deliver; 0 once
	// completed.
	Lag uint64 `json:"lag"`
	// Owner is the bridge delivering the registration now, with several
	// bridges on one store; empty while nobody holds it, absent alone.
	Owner *string `json:"owner,omitempty"`

	// Headers are echoed as registered; TLS says what is set, never the
	// PEM text or the key.
	Headers   map[string]string `json:"headers,omitempty"`
	TLS       *TLS              `json:"tls,omitempty"`
	RateLimit *RateLimit        `json:"rateLimit,omitempty"`

	// Ordering is echoed as registered, maxInFlight filled in (outbox).
	Ordering *Ordering `json:"ordering,omitempty"`
	// InFlight is how many POSTs of the registration this bridge has in
	// flight now; Ahead how many messages past NextSeq the receiver has
	// already acknowledged (CONTRACT §12).
	InFlight int `json:"inFlight"`
	Ahead    int `json:"ahead"`

	// Filter is echoed as registered (outbox); Filtered counts the
	// messages it answered false for, FilterErrors those it failed on,
	// the latest named by LastFilterError (CONTRACT §13).
	Filter          string `json:"filter,omitempty"`
	Filtered        uint64 `json:"filtered"`
	FilterErrors    uint64 `json:"filterErrors"`
	LastFilterError string `json:"lastFilterError,omitempty"`
}

// Batch is a registration's batch limits; the ones left out take the
// worker's defaults. MaxDelay is a Go duration.
type Batch struct {
	MaxEvents int    `json:"maxEvents,omitempty"`
	MaxBytes  int    `json:"maxBytes,omitempty"`
	MaxDelay  string `json:"maxDelay,omitempty"`
}

// Authentication names the scheme only; the credentials stay in the store.
type Authentication struct {
	Scheme string `json:"scheme"`
}

// Page is one page of a listing; Next is the id to list after, empty on
// the last page.
type Page struct {
	Registrations []Registration `json:"registrations"`
	Next          string         `json:"next"`
}

func viewOf(r cursor.Registration) Registration {
	v := Registration{
		ID:              r.ID,
		Namespace:       r.Namespace,
		Subject:         r.Subject,
		TaskID:          r.TaskID,
		URL:             r.URL,
		Format:          r.Format,
		DataContentType: r.DataContentType,
		Signed:          r.Secret != "",
		HasToken:        r.Token != "",
		State:           string(r.State),
		NextSeq:         r.NextSeq,
		Attempts:        r.Attempts,
		NextAttemptAt:   utcOrNil(r.NextAttemptAt),
		LastError:       r.LastError,
		CreatedAt:       r.CreatedAt.UTC(),
		UpdatedAt:       r.UpdatedAt.UTC(),
		CompletedAt:     utcOrNil(r.CompletedAt),
		Delivered:       r.Delivered,
		Ordering:        orderingView(r.Ordering),
		Ahead:           len(r.Ahead),
		Filter:          r.Filter,
		Filtered:        r.Filtered,
		FilterErrors:    r.FilterErrors,
		LastFilterError: r.LastFilterError,
	}
	v.Headers, v.TLS, v.RateLimit = r.Headers, tlsView(r.TLS), rateLimitView(r.RateLimit)
	if r.AuthScheme != "" {
		v.Authentication = &Authentication{Scheme: r.AuthScheme}
	}
	v.OAuth2 = oauth2View(r.OAuth2)
	if b := r.Batch; b != nil {
		v.Batch = &Batch{MaxEvents: b.MaxEvents, MaxBytes: b.MaxBytes}
		if b.MaxDelay > 0 {
			v.Batch.MaxDelay = b.MaxDelay.String()
		}
	}
	return v
}

func utcOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

// view is r as this bridge answers it: with its owner when bridges
// share the store, and its POSTs in flight here.
func (s *server) view(r cursor.Registration) Registration {
	v := viewWith(r, s.head, s.clusterOf)
	if s.inFlight != nil {
		v.InFlight = s.inFlight.InFlight(r.ID)
	}
	return v
}

func viewWith(r cursor.Registration, h *head, c Cluster) Registration {
	v := viewOf(r)
	if r.State != cursor.Completed {
		v.Lag = lagOf(h.lastSeq(context.Background()), r.NextSeq)
	}
	if c != nil {
		owner := c.Owner(r.ID)
		v.Owner = &owner
	}
	return v
}

// Viewer renders registrations as the API answers them, for what shows a
// registration outside an answer: an operational event then carries
// exactly what an answer would, never a secret.
type Viewer struct {
	head    *head
	cluster Cluster
}

// NewViewer renders with the lag against j's last sequence and, when c is
// not nil, the owner c names.
func NewViewer(j Journal, c Cluster) *Viewer { return &Viewer{head: &head{journal: j}, cluster: c} }

// View is r as the API answers it.
func (v *Viewer) View(r cursor.Registration) Registration { return viewWith(r, v.head, v.cluster) }

// renderRegistration is the body of every answer that is one
// registration.
func (s *server) renderRegistration(r cursor.Registration) ([]byte, error) {
	return encodeJSON(s.view(r))
}

// renderCreated is the answer to a create, the one stored beside an
// idempotency key too: a registration just stored has nothing in flight,
// and the delivery engine is not asked while the store holds its write.
func (s *server) renderCreated(r cursor.Registration) ([]byte, error) {
	return encodeJSON(viewWith(r, s.head, s.clusterOf))
}

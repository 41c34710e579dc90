package admin

import (
	"time"

	"github.com/jetstream-bridge/bridge/cursor"
)

// registrationView is a registration as the API shows it. It is built
// field by field from the stored one, never by embedding it, so a secret
// added to cursor.Config later cannot reach an answer by accident.
type registrationView struct {
	ID              string     `json:"id"`
	Namespace       string     `json:"namespace"`
	Subject         string     `json:"subject"`
	TaskID          string     `json:"taskId,omitempty"`
	URL             string     `json:"url"`
	Format          string     `json:"format,omitempty"`
	DataContentType string     `json:"dataContentType,omitempty"`
	Batch           *batchView `json:"batch,omitempty"`
	Signed          bool       `json:"signed"`
	HasToken        bool       `json:"hasToken"`
	Authentication  *authView  `json:"authentication,omitempty"`
	State           string     `json:"state"`
	NextSeq         uint64     `json:"nextSeq"`
	Attempts        uint32     `json:"attempts"`
	NextAttemptAt   *time.Time `json:"nextAttemptAt"`
	LastError       string     `json:"lastError"`
	CreatedAt       time.Time  `json:"createdAt"`
	UpdatedAt       time.Time  `json:"updatedAt"`
	CompletedAt     *time.Time `json:"completedAt,omitempty"`
	Delivered       uint64     `json:"delivered"`
}

type batchView struct {
	MaxEvents int    `json:"maxEvents,omitempty"`
	MaxBytes  int    `json:"maxBytes,omitempty"`
	MaxDelay  string `json:"maxDelay,omitempty"`
}

// authView names the scheme only; the credentials stay in the store.
type authView struct {
	Scheme string `json:"scheme"`
}

type listView struct {
	Registrations []registrationView `json:"registrations"`
	Next          string             `json:"next"`
}

func viewOf(r cursor.Registration) registrationView {
	v := registrationView{
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
	}
	if r.AuthScheme != "" {
		v.Authentication = &authView{Scheme: r.AuthScheme}
	}
	if b := r.Batch; b != nil {
		v.Batch = &batchView{MaxEvents: b.MaxEvents, MaxBytes: b.MaxBytes}
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

// renderRegistration is the body of every answer that is one
// registration, including the one stored beside an idempotency key.
func renderRegistration(r cursor.Registration) ([]byte, error) {
	return encodeJSON(viewOf(r))
}

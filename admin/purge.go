package admin

import (
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/jetstream-bridge/bridge/cursor"
)

// keepKeys is the idempotencyKeyMaxAge that keeps every key.
const keepKeys = "none"

// purgeRequest is the body of POST /v1/purge. Pointers tell an absent
// field (the default) from an explicit value.
type purgeRequest struct {
	CompletedOlderThan   *string `json:"completedOlderThan"`
	BatchSize            *int    `json:"batchSize"`
	MaxBatches           *int    `json:"maxBatches"`
	IdempotencyKeyMaxAge *string `json:"idempotencyKeyMaxAge"`
}

// purge answers POST /v1/purge. The age is required: deleting is never a
// default, so a purge must say how old is old enough.
func (s *server) purge(w http.ResponseWriter, r *http.Request) error {
	var req purgeRequest
	if _, err := decodeBody(w, r, &req); err != nil {
		return err
	}
	policy, err := retentionPolicy(req)
	if err != nil {
		return err
	}
	report, err := s.store.Purge(r.Context(), policy)
	if err != nil {
		return fmt.Errorf("purging completed registrations: %w", err)
	}
	s.audit(r, "purged completed registrations",
		slog.Int64("registrations", report.RegistrationsDeleted),
		slog.Int64("idempotencyKeys", report.IdempotencyKeysDeleted),
		slog.Int("batches", report.Batches), slog.Bool("complete", report.Complete))
	writeJSON(w, http.StatusOK, report)
	return nil
}

func retentionPolicy(req purgeRequest) (cursor.RetentionPolicy, error) {
	if req.CompletedOlderThan == nil {
		return cursor.RetentionPolicy{}, invalid("completedOlderThan is required, e.g. \"720h\"")
	}
	age, err := parseAge("completedOlderThan", *req.CompletedOlderThan)
	if err != nil {
		return cursor.RetentionPolicy{}, err
	}
	p := cursor.NewRetentionPolicy(age)
	if n := req.BatchSize; n != nil {
		if *n < 1 {
			return p, invalid("batchSize must be at least 1, not %d", *n)
		}
		p = p.WithBatchSize(*n)
	}
	if n := req.MaxBatches; n != nil {
		if *n < 0 {
			return p, invalid("maxBatches must be 0 (no bound) or more, not %d", *n)
		}
		p = p.WithMaxBatches(*n)
	}
	if raw := req.IdempotencyKeyMaxAge; raw != nil {
		if *raw == keepKeys {
			return p.WithIdempotencyKeyMaxAge(nil), nil
		}
		keyAge, err := parseAge("idempotencyKeyMaxAge", *raw)
		if err != nil {
			return p, err
		}
		p = p.WithIdempotencyKeyMaxAge(&keyAge)
	}
	return p, nil
}

// parseAge reads a non-negative Go duration.
func parseAge(field, raw string) (time.Duration, error) {
	d, err := time.ParseDuration(raw)
	if err != nil || d < 0 {
		extra := ""
		if field == "idempotencyKeyMaxAge" {
			extra = ` or "none"`
		}
		return 0, invalid("%s must be a non-negative Go duration such as 720h%s, not %q", field, extra, raw)
	}
	return d, nil
}

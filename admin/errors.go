package admin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/jetstream-bridge/bridge/cursor"
)

// Error codes of the admin API; clients switch on these, not on messages.
const (
	codeInvalidArgument     = "invalid_argument"
	codeUnauthenticated     = "unauthenticated"
	codePermissionDenied    = "permission_denied"
	codeNotFound            = "not_found"
	codeAlreadyExists       = "already_exists"
	codeFailedPrecondition  = "failed_precondition"
	codePayloadTooLarge     = "payload_too_large"
	codeIdempotencyConflict = "idempotency_conflict"
	codeMethodNotAllowed    = "method_not_allowed"
	codeUnavailable         = "unavailable"
	codeInternal            = "internal"
)

// apiError is an error the caller is meant to see: a status, a stable code
// and a message naming the field and the problem.
type apiError struct {
	status  int
	code    string
	message string
}

func (e *apiError) Error() string { return e.message }

func errorf(status int, code, format string, args ...any) *apiError {
	return &apiError{status: status, code: code, message: fmt.Sprintf(format, args...)}
}

// invalid is the 400 answer for a request that can never succeed as sent.
func invalid(format string, args ...any) *apiError {
	return errorf(http.StatusBadRequest, codeInvalidArgument, format, args...)
}

// storeError turns the store's sentinel errors into answers; anything else
// is internal and keeps its text, which names the operation that failed.
func storeError(err error, id, op string) error {
	switch {
	case errors.Is(err, cursor.ErrNotFound):
		return errorf(http.StatusNotFound, codeNotFound, "registration %q not found", id)
	case errors.Is(err, cursor.ErrExists):
		return errorf(http.StatusConflict, codeAlreadyExists, "registration %q already exists", id)
	case errors.Is(err, cursor.ErrIdempotencyConflict):
		return errorf(http.StatusUnprocessableEntity, codeIdempotencyConflict,
			"Idempotency-Key was already used with a different request body")
	case errors.Is(err, cursor.ErrUnavailable):
		return errorf(http.StatusServiceUnavailable, codeUnavailable, "%s: %v; try again", op, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (s *server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var ae *apiError
	if !errors.As(err, &ae) {
		s.log.LogAttrs(r.Context(), slog.LevelError, "admin request failed",
			slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.String("error", err.Error()))
		ae = errorf(http.StatusInternalServerError, codeInternal, "%s", err.Error())
	}
	writeJSON(w, ae.status, errorBody{Error: errorDetail{Code: ae.code, Message: ae.message}})
}

// encodeJSON renders v as the API writes it: without HTML escaping, so a
// subject filter reads "journal.>" rather than "journal.\u003e".
func encodeJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := encodeJSON(v)
	if err != nil {
		// Only values built by this package are encoded here; failing is a
		// bug, reported without a half-written body.
		status = http.StatusInternalServerError
		body = []byte(`{"error":{"code":"internal","message":"encoding the answer failed"}}` + "\n")
	}
	writeRaw(w, status, body)
}

func writeRaw(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

package admin

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/jetstream-bridge/bridge/cursor"
	"github.com/jetstream-bridge/bridge/events"
	"github.com/jetstream-bridge/bridge/projection"
)

const (
	defaultListLimit = 100
	maxListLimit     = 1000
	// maxIdempotencyKeyLen bounds what the store keeps per key.
	maxIdempotencyKeyLen = 255
	// secretOverlap is how long a replaced secret keeps signing beside its
	// successor: a day is enough for a receiver to deploy the new key.
	secretOverlap = 24 * time.Hour
)

// create answers POST /v1/registrations.
func (s *server) create(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	dry, err := dryRun(r)
	if err != nil {
		return err
	}
	var req registrationRequest
	body, err := decodeBody(w, r, &req)
	if err != nil {
		return err
	}
	if c := callerOf(ctx); !c.sees(req.ID) || (req.ID == "" && c.prefix != "") {
		return invalid("id must start with %q: token %q reaches only the registrations whose id does", c.prefix, c.name)
	}
	idem, err := s.idempotency(r, body)
	if err != nil {
		return err
	}
	reg, err := s.newRegistration(ctx, &req)
	if err != nil {
		return err
	}
	if dry { // validated like the create; its key is neither stored nor replayed
		return s.planCreate(w, r, reg)
	}
	// A replayed key answers what it answered before and created nothing:
	// only a fresh insert renders an answer, so only it is announced.
	fresh := idem == nil
	if idem != nil {
		render := idem.Answer
		idem.Answer = func(r cursor.Registration) ([]byte, error) { fresh = true; return render(r) }
	}
	stored, answer, err := s.store.Create(ctx, reg, idem)
	if err != nil {
		return storeError(err, reg.ID, "storing the registration")
	}
	if fresh {
		s.announce(r, events.Created, stored)
	}
	if len(answer) == 0 { // no idempotency key: nothing was rendered yet
		if answer, err = s.renderCreated(stored); err != nil {
			return fmt.Errorf("rendering the registration: %w", err)
		}
	}
	if stored.ID != "" { // zero when a replayed key's registration was deleted since
		w.Header().Set("Location", registrationPath(stored.ID))
		s.wake(stored.ID)
		s.auditID(r, "registration created", stored.ID)
	}
	writeRaw(w, http.StatusCreated, answer)
	return nil
}

// newRegistration validates a create and places its cursor.
func (s *server) newRegistration(ctx context.Context, req *registrationRequest) (cursor.Registration, error) {
	cfg, err := s.validConfig(ctx, req)
	if err != nil {
		return cursor.Registration{}, err
	}
	if cfg.ID == "" {
		cfg.ID = newID()
	}
	seq, err := s.startSeq(ctx, projection.Namespace(cfg.Namespace), req.Start)
	if err != nil {
		return cursor.Registration{}, err
	}
	now := s.now()
	return cursor.Registration{
		Config:        cfg,
		State:         cursor.Active,
		NextSeq:       seq,
		NextAttemptAt: now,
		CreatedAt:     now,
		UpdatedAt:     now,
	}, nil
}

func registrationPath(id string) string { return "/v1/registrations/" + url.PathEscape(id) }

// idempotency binds a create to its Idempotency-Key header, if any.
func (s *server) idempotency(r *http.Request, body []byte) (*cursor.Idempotency, error) {
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		return nil, nil
	}
	if len(key) > maxIdempotencyKeyLen || hasControl(key) {
		return nil, invalid("Idempotency-Key must be 1 to %d characters without control characters", maxIdempotencyKeyLen)
	}
	hash, err := canonicalHash(body)
	if err != nil {
		return nil, err
	}
	return &cursor.Idempotency{Key: key, Hash: hash, Answer: s.renderCreated}, nil
}

// newID names a registration created without an id: 96 random bits, so
// two callers never collide.
func newID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b) // crypto/rand.Read never fails; it crashes the process instead.
	return hex.EncodeToString(b)
}

// list answers GET /v1/registrations.
func (s *server) list(w http.ResponseWriter, r *http.Request) error {
	opt, err := listOptions(r)
	if err != nil {
		return err
	}
	var overlaps bool
	if opt.Prefix, overlaps = callerOf(r.Context()).narrow(opt.Prefix); !overlaps {
		writeJSON(w, http.StatusOK, Page{Registrations: []Registration{}})
		return nil
	}
	rows, next, err := s.store.List(r.Context(), opt)
	if err != nil {
		return fmt.Errorf("listing registrations: %w", err)
	}
	out := Page{Registrations: make([]Registration, 0, len(rows)), Next: next}
	for _, reg := range rows {
		out.Registrations = append(out.Registrations, s.view(reg))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func listOptions(r *http.Request) (cursor.ListOptions, error) {
	q := r.URL.Query()
	opt := cursor.ListOptions{
		Namespace: q.Get("namespace"),
		State:     cursor.State(q.Get("state")),
		Prefix:    q.Get("prefix"),
		After:     q.Get("after"),
		Limit:     defaultListLimit,
	}
	if opt.Namespace != "" && !projection.Namespace(opt.Namespace).Valid() {
		return opt, invalid("namespace must be outbox or a2a, not %q", opt.Namespace)
	}
	if !validPrefix(opt.Prefix) {
		return opt, invalid("prefix must be the start of an id: at most %d letters, digits, '.', '_' and '-'", maxIDLen)
	}
	switch opt.State {
	case "", cursor.Active, cursor.Parked, cursor.Completed:
	default:
		return opt, invalid("state must be active, parked or completed, not %q", opt.State)
	}
	if raw := q.Get("limit"); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 1 || n > maxListLimit {
			return opt, invalid("limit must be an integer from 1 to %d, not %q", maxListLimit, raw)
		}
		opt.Limit = n
	}
	return opt, nil
}

// validPrefix reports whether p can begin an id; "." is one, though no id
// is only that.
func validPrefix(p string) bool {
	if len(p) > maxIDLen {
		return false
	}
	for i := range len(p) {
		if !isIDByte(p[i]) {
			return false
		}
	}
	return true
}

// get answers GET /v1/registrations/{id}.
func (s *server) get(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	reg, err := s.store.Get(r.Context(), id)
	if err != nil {
		return storeError(err, id, "reading the registration")
	}
	return s.writeRegistration(w, reg)
}

// replace answers PUT /v1/registrations/{id}: the whole configuration
// again, keeping the cursor. A PUT that would leave the row as it is
// stores nothing; its answer names the change in changeHeader either way.
func (s *server) replace(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	dry, err := dryRun(r)
	if err != nil {
		return err
	}
	var req registrationRequest
	if _, err := decodeBody(w, r, &req); err != nil {
		return err
	}
	now := s.now()
	old, cfg, err := s.replacement(r.Context(), id, &req, now)
	if err != nil {
		return err
	}
	reg, write, err := replaced(old, cfg, now)
	if err != nil {
		return err
	}
	if write && !dry {
		if reg, err = s.store.Replace(r.Context(), cfg, now); err != nil {
			return storeError(err, id, "replacing the registration")
		}
		s.wake(id)
		s.auditID(r, "registration replaced", id)
	}
	w.Header().Set(changeHeader, change(old.Config, cfg))
	return s.writeRegistration(w, reg)
}

// replacement validates a PUT body against the registration it replaces,
// which it returns with the new Config: same id, same namespace (omitted
// means kept), and the old secret kept beside a new one.
func (s *server) replacement(ctx context.Context, id string, req *registrationRequest, now time.Time) (cursor.Registration, cursor.Config, error) {
	if req.ID != "" && req.ID != id {
		return cursor.Registration{}, cursor.Config{}, invalid("id %q in the body does not match %q in the path", req.ID, id)
	}
	req.ID = id
	old, err := s.store.Get(ctx, id)
	if err != nil {
		return old, cursor.Config{}, storeError(err, id, "reading the registration")
	}
	cfg, err := s.replacementOf(ctx, old, req, now)
	return old, cfg, err
}

// replacementOf validates req, whose id is old's, as the Config that
// replaces old's.
func (s *server) replacementOf(ctx context.Context, old cursor.Registration, req *registrationRequest, now time.Time) (cursor.Config, error) {
	if req.Namespace == "" {
		req.Namespace = old.Namespace
	}
	if projection.Namespace(req.Namespace).Valid() && req.Namespace != old.Namespace {
		return cursor.Config{}, invalid("namespace cannot change: registration %q is %s; delete it and register it again", old.ID, old.Namespace)
	}
	cfg, err := s.validConfig(ctx, req)
	if err != nil {
		return cfg, err
	}
	rotateSecret(&cfg, old.Config, now)
	return cfg, nil
}

// rotateSecret keeps a replaced secret signing beside its successor for
// secretOverlap, so a receiver can switch keys without refusing a
// delivery. Removing the secret ends signing at once.
func rotateSecret(c *cursor.Config, old cursor.Config, now time.Time) {
	switch {
	case c.Secret == "":
	case c.Secret != old.Secret && old.Secret != "":
		c.PreviousSecret, c.PreviousSecretUntil = old.Secret, now.Add(secretOverlap)
	case c.Secret == old.Secret && now.Before(old.PreviousSecretUntil):
		c.PreviousSecret, c.PreviousSecretUntil = old.PreviousSecret, old.PreviousSecretUntil
	}
}

// delete answers DELETE /v1/registrations/{id}; deleting what is not there
// succeeds, so a retried delete cannot fail.
func (s *server) delete(w http.ResponseWriter, r *http.Request) error {
	if id, err := pathID(r); err == nil {
		// Read first: registration.deleted shows the registration as it
		// was, and only one that existed.
		was, getErr := s.store.Get(r.Context(), id)
		if err := s.store.Delete(r.Context(), id); err != nil {
			return storeError(err, id, "deleting the registration")
		}
		s.auditID(r, "registration deleted", id)
		if getErr == nil {
			s.announce(r, events.Deleted, was)
		}
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// unpark answers POST /v1/registrations/{id}/unpark.
func (s *server) unpark(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	id, err := pathID(r)
	if err != nil {
		return err
	}
	ok, err := s.store.Unpark(ctx, id, s.now())
	if err != nil {
		return storeError(err, id, "unparking the registration")
	}
	reg, err := s.store.Get(ctx, id)
	if err != nil {
		return storeError(err, id, "reading the registration")
	}
	if !ok {
		return errorf(http.StatusConflict, codeFailedPrecondition, "registration %q is %s, not parked", id, reg.State)
	}
	s.announce(r, events.Unparked, reg)
	s.wake(id)
	s.auditID(r, "registration unparked", id)
	return s.writeRegistration(w, reg)
}

// rewind answers POST /v1/registrations/{id}/rewind.
func (s *server) rewind(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	id, err := pathID(r)
	if err != nil {
		return err
	}
	var p position
	if _, err := decodeBody(w, r, &p); err != nil {
		return err
	}
	if _, err := s.store.Get(ctx, id); err != nil {
		return storeError(err, id, "reading the registration")
	}
	seq, err := s.seqOf(ctx, p, "")
	if err != nil {
		return err
	}
	reg, err := s.store.Rewind(ctx, id, seq, s.now())
	if err != nil {
		return storeError(err, id, "rewinding the registration")
	}
	s.wake(id)
	s.auditID(r, "registration rewound", id, slog.Uint64("nextSeq", seq))
	return s.writeRegistration(w, reg)
}

// pathID is the {id} of the path. An id the API could never have created
// is not found rather than passed to the store, which would call it
// malformed: from outside, such a registration simply does not exist.
func pathID(r *http.Request) (string, error) {
	id := r.PathValue("id")
	if id == "" || validID(id) != nil {
		return id, errorf(http.StatusNotFound, codeNotFound, "registration %q not found", truncate(id, maxIDLen))
	}
	return id, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

func (s *server) writeRegistration(w http.ResponseWriter, reg cursor.Registration) error {
	body, err := s.renderRegistration(reg)
	if err != nil {
		return fmt.Errorf("rendering the registration: %w", err)
	}
	writeRaw(w, http.StatusOK, body)
	return nil
}

// announce publishes an operator's change as an operational event,
// naming the caller as its actor.
func (s *server) announce(r *http.Request, kind events.Kind, reg cursor.Registration) {
	if s.events != nil {
		s.events.Publish(events.Event{Kind: kind, At: s.now(), Registration: reg.ID, Row: &reg, Actor: callerOf(r.Context()).name})
	}
}

// audit logs a change an operator made, with the name of the token that
// made it (never the token); it names the registration and never its
// configuration, which holds secrets.
func (s *server) audit(r *http.Request, msg string, attrs ...slog.Attr) {
	attrs = append(attrs, slog.String("actor", callerOf(r.Context()).name), slog.String("remote", r.RemoteAddr))
	s.log.LogAttrs(r.Context(), slog.LevelInfo, msg, attrs...)
}

// auditID is audit of a change to the registration id.
func (s *server) auditID(r *http.Request, msg, id string, attrs ...slog.Attr) {
	s.audit(r, msg, append(attrs, slog.String("id", id))...)
}

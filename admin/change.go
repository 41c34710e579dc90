package admin

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/jetstream-bridge/bridge/cursor"
)

// A dry run (?dryRun=true on POST and PUT /v1/registrations) answers what
// the call would do without doing it, so a client that applies a file of
// registrations can plan every entry, secrets included, before its first
// write. The change is named in the changeHeader of the answer.
const (
	dryRunParam  = "dryRun"
	changeHeader = "Bridge-Change"

	changeCreate    = "create"
	changeUpdate    = "update"
	changeUnchanged = "unchanged"
)

// dryRun reads the dryRun query parameter. Anything but true or false is
// refused: a misspelt value taken for false would write for real.
func dryRun(r *http.Request) (bool, error) {
	switch v := r.URL.Query().Get(dryRunParam); v {
	case "", "false":
		return false, nil
	case "true":
		return true, nil
	default:
		return false, invalid("%s must be true or false, not %q", dryRunParam, truncate(v, 32))
	}
}

// planCreate answers a dry run of a create: the registration as it would
// be stored, 200 rather than 201 since nothing was. An id in use is 409,
// as the create itself would answer; an id the bridge would generate is
// shown but not reserved.
func (s *server) planCreate(w http.ResponseWriter, r *http.Request, reg cursor.Registration) error {
	switch _, err := s.store.Get(r.Context(), reg.ID); {
	case err == nil:
		return storeError(cursor.ErrExists, reg.ID, "")
	case !errors.Is(err, cursor.ErrNotFound):
		return storeError(err, reg.ID, "reading the registration")
	}
	body, err := s.renderCreated(reg)
	if err != nil {
		return err
	}
	w.Header().Set(changeHeader, changeCreate)
	writeRaw(w, http.StatusOK, body)
	return nil
}

// replaced is old after a PUT of cfg: the Config swapped, attempts and
// parking reset as §3 has it. write is false when that leaves the row as
// it is (the same configuration, nothing to reset), and then the PUT
// stores nothing, so its cursor, attempts and updatedAt stay put.
func replaced(old cursor.Registration, cfg cursor.Config, now time.Time) (next cursor.Registration, write bool, err error) {
	next = old
	if err := cursor.ApplyReplace(&next, cfg, now, now); err != nil {
		return old, false, invalid("%v", err)
	}
	write = !sameConfig(old.Config, cfg) || next.State != old.State ||
		next.Attempts != old.Attempts || next.LastError != old.LastError
	if !write {
		return old, false, nil
	}
	next.UpdatedAt = now
	return next, true, nil
}

// change names what a PUT of cfg does to old's configuration.
func change(old, cfg cursor.Config) string {
	if sameConfig(old, cfg) {
		return changeUnchanged
	}
	return changeUpdate
}

// sameConfig reports whether a and b configure the same delivery. The
// secret a rotation keeps signing for a while is bookkeeping of the
// bridge, not something a caller sets, so it is left out. The Configs
// are compared as the store keeps them (JSON, so an empty map and none
// are one) and in constant time, as they hold secrets.
func sameConfig(a, b cursor.Config) bool {
	a.PreviousSecret, a.PreviousSecretUntil = "", time.Time{}
	b.PreviousSecret, b.PreviousSecretUntil = "", time.Time{}
	ja, errA := json.Marshal(&a)
	jb, errB := json.Marshal(&b)
	return errA == nil && errB == nil && subtle.ConstantTimeCompare(ja, jb) == 1
}

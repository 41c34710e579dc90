package cursor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
)

const (
	// maxIDLen and maxNamespaceLen keep every index key far below bbolt's
	// 32 KiB key limit; the admin API allows much less.
	maxIDLen        = 1024
	maxNamespaceLen = 255
)

// idemRecord is what an Idempotency-Key remembers: the request it was used
// with, the registration it created (by id and incarnation) and the answer
// that was sent.
type idemRecord struct {
	Hash      []byte    `json:"hash"`
	ID        string    `json:"id"`
	Inc       uint64    `json:"inc"`
	Answer    []byte    `json:"answer,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
}

func notFound(id string) error { return fmt.Errorf("cursor: registration %q: %w", id, ErrNotFound) }

// CheckID refuses an id no store keeps: empty, or longer than any index
// key may be. Every Store implementation checks ids with it, so one id is
// valid in all of them.
func CheckID(id string) error {
	switch {
	case id == "":
		return errors.New("cursor: registration id is empty")
	case len(id) > maxIDLen:
		return fmt.Errorf("cursor: registration id is %d bytes; at most %d are stored", len(id), maxIDLen)
	}
	return nil
}

// CheckNew refuses a registration (and idempotency key) Create cannot
// store, with an error naming the problem.
func CheckNew(r *Registration, idem *Idempotency) error {
	if err := CheckID(r.ID); err != nil {
		return err
	}
	switch {
	case r.Namespace == "":
		return fmt.Errorf("cursor: registration %q has an empty namespace", r.ID)
	case len(r.Namespace) > maxNamespaceLen:
		return fmt.Errorf("cursor: registration %q: namespace is %d bytes; at most %d are stored",
			r.ID, len(r.Namespace), maxNamespaceLen)
	case idem != nil && idem.Key == "":
		return fmt.Errorf("cursor: registration %q: idempotency key is empty", r.ID)
	case idem != nil && len(idem.Key) > maxIDLen:
		return fmt.Errorf("cursor: registration %q: idempotency key is %d bytes; at most %d are stored",
			r.ID, len(idem.Key), maxIDLen)
	}
	return nil
}

// Create stores a new, active registration due at once (or at the
// NextAttemptAt the caller set), with NextSeq as given. The store sets
// CreatedAt and UpdatedAt and starts the delivery state from zero: State,
// Attempts, LastError, Delivered and CompletedAt of r are ignored. URLs and
// subjects are the admin API's to validate.
//
// With idem, the key is looked up in the same transaction: a key never seen
// creates the registration and stores the answer idem.Answer renders; the
// same key and hash again returns the stored answer and the registration it
// created (zero when it has since been deleted) and creates nothing; the
// same key with another hash is ErrIdempotencyConflict. A create that fails
// stores nothing of the key, so the client may retry it.
func (db *DB) Create(ctx context.Context, r Registration, idem *Idempotency) (Registration, []byte, error) {
	if err := CheckNew(&r, idem); err != nil {
		return Registration{}, nil, err
	}
	now := db.now()
	r = Fresh(r, now)
	var out Registration
	var answer []byte
	err := db.grouped(ctx, func(t *wtx) error {
		// Set afresh on every run: a group may run this again (see grouped).
		out, answer = r, nil
		if idem != nil {
			rec, ok, err := getIdem(t.Tx, idem.Key)
			if err != nil {
				return err
			}
			if ok {
				if !bytes.Equal(rec.Hash, idem.Hash) {
					return fmt.Errorf("cursor: create %q: %w", r.ID, ErrIdempotencyConflict)
				}
				out, answer = db.replayed(t.Tx, rec), rec.Answer
				return errNoChange
			}
		}
		var err error
		answer, err = insert(t.Tx, &r, idem, now)
		return err
	})
	if err != nil {
		return Registration{}, nil, err
	}
	return out, answer, nil
}

func insert(tx *bolt.Tx, r *Registration, idem *Idempotency, now time.Time) ([]byte, error) {
	regs := tx.Bucket([]byte(bucketRegistrations))
	if regs.Get([]byte(r.ID)) != nil {
		return nil, fmt.Errorf("cursor: registration %q: %w", r.ID, ErrExists)
	}
	inc, err := regs.NextSequence()
	if err != nil {
		return nil, fmt.Errorf("cursor: create %q: %w", r.ID, err)
	}
	if err := putRow(tx, nil, &row{inc: inc, Registration: *r}); err != nil {
		return nil, err
	}
	if idem == nil {
		return nil, nil
	}
	var answer []byte
	if idem.Answer != nil {
		if answer, err = idem.Answer(*r); err != nil {
			return nil, fmt.Errorf("cursor: create %q: render the idempotent answer: %w", r.ID, err)
		}
	}
	rec := idemRecord{Hash: idem.Hash, ID: r.ID, Inc: inc, Answer: answer, CreatedAt: now}
	return answer, putIdem(tx, idem.Key, rec)
}

func getIdem(tx *bolt.Tx, key string) (idemRecord, bool, error) {
	v := tx.Bucket([]byte(bucketIdempotency)).Get([]byte(key))
	if v == nil {
		return idemRecord{}, false, nil
	}
	var rec idemRecord
	if err := json.Unmarshal(v, &rec); err != nil {
		return idemRecord{}, false, fmt.Errorf("cursor: an idempotency key record is unreadable: %w", err)
	}
	return rec, true, nil
}

func putIdem(tx *bolt.Tx, key string, rec idemRecord) error {
	v, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("cursor: encode idempotency key for %q: %w", rec.ID, err)
	}
	if err := tx.Bucket([]byte(bucketIdempotency)).Put([]byte(key), v); err != nil {
		return fmt.Errorf("cursor: store idempotency key for %q: %w", rec.ID, err)
	}
	return tx.Bucket([]byte(bucketIdemByAge)).Put(stampedKey(rec.CreatedAt, key), nil)
}

// replayed is the registration an idempotency key created, if it still
// exists.
func (db *DB) replayed(tx *bolt.Tx, rec idemRecord) Registration {
	r, ok, err := getRow(tx, rec.ID)
	if err != nil || !ok || r.inc != rec.Inc {
		return Registration{}
	}
	return db.overlay(tx, r)
}

// mutate is every explicit write to one registration: in one transaction it
// loads id, folds the registration's acknowledged progress in (so that
// progress can never land after, and over, this write), lets change edit it,
// and stores it when anything changed. Without full, the Config is neither
// decoded nor passed to change, and the Registration returned lacks it.
func (db *DB) mutate(ctx context.Context, id string, full bool, change func(r *Registration, now time.Time) (bool, error)) (Registration, error) {
	if err := CheckID(id); err != nil {
		return Registration{}, err
	}
	var out Registration
	err := db.grouped(ctx, func(t *wtx) error {
		old, ok, err := readRow(t.Tx, id, full)
		if err != nil {
			return err
		}
		if !ok {
			return notFound(id)
		}
		nw := old
		p, claimed := t.claim(id)
		folded := claimed && p.inc == old.inc
		if folded {
			p.apply(&nw.Registration)
		}
		now := db.now()
		changed, err := change(&nw.Registration, now)
		if err != nil {
			return err
		}
		if changed {
			nw.UpdatedAt = now
		}
		out = nw.Registration
		if !changed && !folded {
			return errNoChange
		}
		return putRow(t.Tx, &old, &nw)
	})
	if err != nil {
		return Registration{}, err
	}
	return out, nil
}

// Replace swaps the Config of registration c.ID, keeping NextSeq, Delivered
// and CreatedAt. An active or parked registration becomes active, with no
// failures, due at `at` (now when zero). A completed one stays completed
// with its new Config: completion records that its terminal message was
// delivered, which a new URL does not undo. c.Namespace may be empty (kept)
// but not another namespace.
func (db *DB) Replace(ctx context.Context, c Config, at time.Time) (Registration, error) {
	return db.mutate(ctx, c.ID, true, func(r *Registration, now time.Time) (bool, error) {
		return true, ApplyReplace(r, c, at, now)
	})
}

// Retry counts one failure and schedules the next attempt at next (now when
// zero). A parked or completed registration records the failure but is not
// scheduled.
func (db *DB) Retry(ctx context.Context, id string, next time.Time, lastErr string) error {
	_, err := db.mutate(ctx, id, false, func(r *Registration, now time.Time) (bool, error) {
		ApplyRetry(r, next, now, lastErr)
		return true, nil
	})
	return err
}

// Park stops delivery, keeping the cursor. It counts the failure that
// stopped it, so Attempts reads as the failures a receiver has had. A
// completed registration is left as it is.
func (db *DB) Park(ctx context.Context, id string, lastErr string) error {
	_, err := db.mutate(ctx, id, false, func(r *Registration, _ time.Time) (bool, error) {
		return ApplyPark(r, lastErr), nil
	})
	return err
}

// Unpark makes a parked registration active, with no failures, due at `at`
// (now when zero), at the cursor it was parked with. It reports false, and
// changes nothing, when the registration was not parked.
func (db *DB) Unpark(ctx context.Context, id string, at time.Time) (bool, error) {
	unparked := false
	_, err := db.mutate(ctx, id, false, func(r *Registration, now time.Time) (bool, error) {
		unparked = ApplyUnpark(r, at, now) // set afresh: a group may run this again
		return unparked, nil
	})
	return err == nil && unparked, err
}

// Rewind sets the cursor to seq exactly, back (replay) or forward (skip),
// and clears the failure count; the state stays. An active registration
// becomes due at `at` (now when zero) and forgets its last error; a parked
// one keeps it, since it still explains why it is parked. Progress
// acknowledged before the Rewind is folded first, so it cannot move the
// cursor afterwards.
func (db *DB) Rewind(ctx context.Context, id string, seq uint64, at time.Time) (Registration, error) {
	return db.mutate(ctx, id, true, func(r *Registration, now time.Time) (bool, error) {
		ApplyRewind(r, seq, at, now)
		return true, nil
	})
}

// Delete removes the registration and any progress not yet flushed; a
// missing one is not an error. Its idempotency key stays until Purge, so a
// late retry of its create replays instead of creating it again.
func (db *DB) Delete(ctx context.Context, id string) error {
	if err := CheckID(id); err != nil {
		return err
	}
	return db.grouped(ctx, func(t *wtx) error {
		t.claim(id)
		old, ok, err := getRowState(t.Tx, id)
		if err != nil {
			// An unreadable row can still be removed; its stale index
			// entries point at nothing and are skipped or purged.
			return t.Bucket([]byte(bucketRegistrations)).Delete([]byte(id))
		}
		if !ok {
			return errNoChange
		}
		return deleteRow(t.Tx, &old)
	})
}

// Advance records acknowledged progress in memory and returns; Flush makes
// it durable. A window that breaks Ahead's invariant is refused
// (ErrInvalidWindow). Get and List see it at once, and so does Due, except that a
// row the progress wakes from idle is found once it is flushed. See
// Progress for what each field does and progress.apply for how it lands.
func (db *DB) Advance(ctx context.Context, id string, p Progress) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := CheckWindow(p); err != nil {
		return fmt.Errorf("cursor: advance %q: %w", id, err)
	}
	pr := progress{Progress: p, at: db.now()}
	// Progress already pending knows the row's incarnation; only the first
	// Advance of a flush window reads it, so a busy row costs no read.
	if db.wb.addPending(id, pr) {
		return nil
	}
	// A plain bbolt read: the incarnation does not need the overlay.
	var inc uint64
	err := guarded(db.path, func() error {
		return db.bolt.View(func(tx *bolt.Tx) error {
			var ok bool
			if inc, ok = rowIncarnation(tx, id); !ok {
				return notFound(id)
			}
			return nil
		})
	})
	if err != nil {
		return db.wrapClosed(err)
	}
	pr.inc = inc
	db.wb.add(id, pr)
	return nil
}

// Flush commits every registration's acknowledged progress in one
// transaction. When it fails, the progress stays pending and the next Flush
// tries again. Progress for a registration that was deleted meanwhile is
// dropped; so is progress for a row that can no longer be decoded, which is
// reported after the rest is committed rather than holding every other
// cursor back.
func (db *DB) Flush(ctx context.Context) error {
	if db.wb.size() == 0 {
		return nil
	}
	var unreadable []error
	err := db.update(ctx, func(t *wtx) error {
		unreadable = nil
		all := t.claimAll()
		wrote := false
		for _, id := range slices.Sorted(maps.Keys(all)) {
			p := all[id]
			old, ok, err := getRowState(t.Tx, id)
			if err != nil {
				unreadable = append(unreadable, err)
				continue
			}
			if !ok || old.inc != p.inc {
				continue
			}
			nw := old
			p.apply(&nw.Registration)
			if err := putRow(t.Tx, &old, &nw); err != nil {
				return err
			}
			wrote = true
		}
		if !wrote {
			return errNoChange
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("cursor: flush: %w", err)
	}
	if len(unreadable) > 0 {
		return fmt.Errorf("cursor: flush dropped progress of %d unreadable registrations: %w",
			len(unreadable), errors.Join(unreadable...))
	}
	return nil
}

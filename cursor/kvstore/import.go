package kvstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jetstream-bridge/bridge/cursor"
)

// Outcome is what an import did with one registration or key.
type Outcome string

const (
	// Copied: the store did not hold it, and now does.
	Copied Outcome = "copied"
	// Skipped: the store held it already, identical.
	Skipped Outcome = "skipped"
	// Different: the store holds something else under that id or key,
	// left as it is: an import never overwrites what a bridge may have
	// moved on since.
	Different Outcome = "different"
)

// ImportResult is what Import did with a registration and its keys.
type ImportResult struct {
	Registration Outcome
	// Keys is the outcome of each idempotency key, in the order given.
	Keys []KeyOutcome
}

// KeyOutcome is what an import did with one idempotency key.
type KeyOutcome struct {
	Key     string
	Outcome Outcome
}

// Outcome sums r up for a report: Different when anything was, else
// Copied when anything was (finishing an import that stopped half way),
// else Skipped.
func (r ImportResult) Outcome() Outcome {
	sum := r.Registration
	for _, k := range r.Keys {
		switch {
		case k.Outcome == Different:
			return Different
		case k.Outcome == Copied && sum == Skipped:
			sum = Copied
		}
	}
	return sum
}

// Import copies reg, exactly as given (cursor, state, attempts, times),
// and the idempotency keys that name it, from another store. Each is
// written with Create, so nothing this store holds is ever overwritten:
// an id or key it holds already is compared, Skipped when identical and
// Different, untouched, when not. Importing the same registration again
// is therefore harmless. A key whose registration is Current is tied to
// the imported row, so a replay answers with it; a row found Different
// is not the one the key created, and its replay answers the stored
// bytes alone, as for a deleted registration.
func (s *Store) Import(ctx context.Context, reg cursor.Registration, keys []cursor.StoredKey) (ImportResult, error) {
	if err := cursor.CheckNew(&reg, nil); err != nil {
		return ImportResult{}, err
	}
	nw := &row{Registration: reg, inc: newIncarnation()}
	for _, k := range keys {
		if k.ID != reg.ID {
			return ImportResult{}, fmt.Errorf("kvstore: import %q: idempotency key %q names registration %q", reg.ID, k.Key, k.ID)
		}
		if k.Current {
			nw.idemKey, nw.idemHash = k.Key, k.Hash
		}
	}
	res := ImportResult{Registration: Copied}
	err := s.insert(ctx, nw)
	if errors.Is(err, cursor.ErrExists) {
		res.Registration, err = s.compareRow(ctx, nw)
	}
	if err != nil {
		return ImportResult{}, err
	}
	for _, k := range keys {
		inc := uint64(0) // names no row: kv incarnations are odd
		if k.Current && res.Registration != Different {
			inc = nw.inc
		}
		out, err := s.importKey(ctx, k, inc)
		if err != nil {
			return ImportResult{}, err
		}
		res.Keys = append(res.Keys, KeyOutcome{Key: k.Key, Outcome: out})
	}
	return res, nil
}

// compareRow tells whether the row stored under nw's id is nw: the same
// registration and creating key, whatever its incarnation and rewinds,
// which only this store's own writes give meaning. When it is, nw takes
// its incarnation, so the keys imported beside it name the stored row.
func (s *Store) compareRow(ctx context.Context, nw *row) (Outcome, error) {
	cur, _, err := s.current(ctx, nw.ID)
	if err != nil {
		return "", fmt.Errorf("kvstore: import %q: compare with the stored row: %w", nw.ID, err)
	}
	a, err := json.Marshal(&cur.Registration)
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(&nw.Registration)
	if err != nil {
		return "", err
	}
	if !bytes.Equal(a, b) || cur.idemKey != nw.idemKey || !bytes.Equal(cur.idemHash, nw.idemHash) {
		return Different, nil
	}
	nw.inc = cur.inc
	return Skipped, nil
}

// ImportKey copies an idempotency key whose registration is gone: a late
// retry of its create replays the stored answer, without a registration,
// as it would have from the store it comes from. As Import, it never
// overwrites a key this store holds.
func (s *Store) ImportKey(ctx context.Context, k cursor.StoredKey) (Outcome, error) {
	return s.importKey(ctx, k, 0)
}

// importKey creates k's key naming the row of incarnation inc, or
// compares it with the key stored already. The incarnation is not
// compared: it is this store's, not the request's.
func (s *Store) importKey(ctx context.Context, k cursor.StoredKey, inc uint64) (Outcome, error) {
	if k.Key == "" {
		return "", fmt.Errorf("kvstore: import: an idempotency key of %q is empty", k.ID)
	}
	rec := idemRecord{Hash: k.Hash, ID: k.ID, Inc: inc, Answer: k.Answer, CreatedAt: k.CreatedAt}
	err := s.storeKey(ctx, &cursor.Idempotency{Key: k.Key}, rec)
	if err == nil {
		return Copied, nil
	}
	if !isConflict(err) {
		return "", fmt.Errorf("kvstore: import idempotency key %q: %w", k.Key, err)
	}
	e, err := s.idem.Get(ctx, encodeKey(k.Key))
	if err != nil {
		return "", fmt.Errorf("kvstore: import idempotency key %q: read the stored one: %w", k.Key, err)
	}
	var old idemRecord
	if err := json.Unmarshal(e.Value(), &old); err != nil {
		return "", fmt.Errorf("kvstore: idempotency key %q is unreadable: %w", k.Key, err)
	}
	if !bytes.Equal(old.Hash, rec.Hash) || old.ID != rec.ID || !bytes.Equal(old.Answer, rec.Answer) ||
		!old.CreatedAt.Equal(rec.CreatedAt) {
		return Different, nil
	}
	return Skipped, nil
}

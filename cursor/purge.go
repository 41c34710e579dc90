package cursor

import (
	"bytes"
	"context"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// Purge deletes what p allows and nothing else: completed registrations
// whose CompletedAt is older than p.CompletedMaxAge, and idempotency keys
// older than p.EffectiveIdempotencyKeyMaxAge (none when nil). Active and
// parked registrations are never touched, whatever their age. Ages are
// measured by the store's clock, read once when Purge starts.
//
// Each batch is one transaction of at most p.EffectiveBatchSize() deletions,
// registrations first and then keys, both counting toward the batch, so no
// transaction holds the write turn for long: Flush and every other write
// run between batches. Both are read oldest first from their own indexes
// (completed and idem-by-age), so a batch never scans rows it keeps. Purge
// stops after p.MaxBatches batches (0: until nothing is left); the report's
// Complete says whether anything eligible was left. A ctx cancelled between
// batches stops it with the report so far and ctx's error.
func (db *DB) Purge(ctx context.Context, p RetentionPolicy) (PurgeReport, error) {
	if p.CompletedMaxAge < 0 {
		return PurgeReport{}, fmt.Errorf("cursor: purge: completed age %v is negative", p.CompletedMaxAge)
	}
	now := db.now()
	cut := purgeCut{regs: stamp(now.Add(-p.CompletedMaxAge)), keys: noKeys}
	if age := p.EffectiveIdempotencyKeyMaxAge(); age != nil {
		cut.keys = stamp(now.Add(-*age))
	}
	size := p.EffectiveBatchSize()
	var rep PurgeReport
	for p.MaxBatches <= 0 || rep.Batches < p.MaxBatches {
		regs, keys, err := db.purgeBatch(ctx, cut, size)
		if err != nil {
			return rep, err
		}
		if regs+keys == 0 {
			rep.Complete = true
			return rep, nil
		}
		rep.Batches++
		rep.RegistrationsDeleted += int64(regs)
		rep.IdempotencyKeysDeleted += int64(keys)
		if regs+keys < size {
			rep.Complete = true
			return rep, nil
		}
	}
	left, err := db.purgeLeft(ctx, cut)
	rep.Complete = !left
	return rep, err
}

// noKeys is a key cut no stamp is below: keys are kept.
const noKeys = 0

// purgeCut holds the stamps below which rows and keys are eligible.
type purgeCut struct{ regs, keys uint64 }

// purgeBatch deletes up to size eligible rows and keys in one transaction.
// A batch that finds nothing is rolled back, not committed.
func (db *DB) purgeBatch(ctx context.Context, cut purgeCut, size int) (regs, keys int, err error) {
	err = db.update(ctx, func(t *wtx) error {
		regs, keys = 0, 0
		done := eligible(t.Bucket([]byte(bucketCompleted)).Cursor(), cut.regs, size)
		for _, e := range done {
			if err := purgeRow(t.Tx, e); err != nil {
				return err
			}
		}
		idem := eligible(t.Bucket([]byte(bucketIdemByAge)).Cursor(), cut.keys, size-len(done))
		for _, e := range idem {
			if err := purgeKey(t.Tx, e.key); err != nil {
				return err
			}
		}
		regs, keys = len(done), len(idem)
		if regs+keys == 0 {
			return errNoChange
		}
		return nil
	})
	return regs, keys, err
}

// entry is one index entry, copied out of the transaction's pages.
type entry struct{ key, val []byte }

// eligible returns up to n entries of a stamp-ordered index below cut.
func eligible(c *bolt.Cursor, cut uint64, n int) []entry {
	var out []entry
	for k, v := c.First(); k != nil && len(out) < n && stampAt(k) < cut; k, v = c.Next() {
		out = append(out, entry{bytes.Clone(k), bytes.Clone(v)})
	}
	return out
}

// purgeRow deletes the completed registration behind completed-index entry
// e. The index holds exactly the completed rows (see layout.go) and names
// each row's namespace, so the row is deleted without being decoded.
func purgeRow(tx *bolt.Tx, e entry) error {
	id := e.key[stampLen:]
	if err := tx.Bucket([]byte(bucketRegistrations)).Delete(id); err != nil {
		return fmt.Errorf("cursor: purge registration %q: %w", id, err)
	}
	if err := tx.Bucket([]byte(bucketCompleted)).Delete(e.key); err != nil {
		return fmt.Errorf("cursor: purge registration %q: %w", id, err)
	}
	return addCount(tx, string(e.val), Completed, -1)
}

// purgeKey deletes the idempotency key behind idem-by-age key k.
func purgeKey(tx *bolt.Tx, k []byte) error {
	if err := tx.Bucket([]byte(bucketIdempotency)).Delete(k[stampLen:]); err != nil {
		return fmt.Errorf("cursor: purge an idempotency key: %w", err)
	}
	return tx.Bucket([]byte(bucketIdemByAge)).Delete(k)
}

// purgeLeft reports whether anything is still eligible.
func (db *DB) purgeLeft(ctx context.Context, cut purgeCut) (bool, error) {
	left := false
	err := db.view(ctx, func(tx *bolt.Tx) error {
		left = len(eligible(tx.Bucket([]byte(bucketCompleted)).Cursor(), cut.regs, 1)) > 0 ||
			len(eligible(tx.Bucket([]byte(bucketIdemByAge)).Cursor(), cut.keys, 1)) > 0
		return nil
	})
	return left, err
}

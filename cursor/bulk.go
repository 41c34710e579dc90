package cursor

import (
	"context"
)

// CreateMany stores new registrations the way Create stores each one
// (validated, active, stamped now, due at once or at the NextAttemptAt the
// caller set, NextSeq as given, indexed and counted), all in one
// transaction.
//
// It exists for loading a store with many rows before a bridge opens it —
// a benchmark's hundred thousand idle registrations, a migration — where
// one commit per Create would cost an fsync per row. Callers chunk (ten
// thousand rows per call keeps a transaction's dirty pages modest).
//
// The call is all or nothing: a row that fails validation, an id already
// stored, or an id given twice in rs (ErrExists) stores none of rs.
// Idempotency keys are the admin API's business and are not taken here.
func (db *DB) CreateMany(ctx context.Context, rs []Registration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(rs) == 0 {
		return nil
	}
	now := db.now()
	rows := make([]Registration, len(rs))
	for i := range rs {
		if err := CheckNew(&rs[i], nil); err != nil {
			return err
		}
		rows[i] = Fresh(rs[i], now)
	}
	return db.update(ctx, func(t *wtx) error {
		for i := range rows {
			// insert sees the rows this transaction already put, so an id
			// given twice is ErrExists like an id stored before.
			if _, err := insert(t.Tx, &rows[i], nil, now); err != nil {
				return err
			}
		}
		return nil
	})
}

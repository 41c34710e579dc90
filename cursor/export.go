package cursor

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// StoredKey is an idempotency key as a store keeps it, for copying it to
// another store: a replay there must answer what this store would.
type StoredKey struct {
	Key string
	// Hash identifies the request body the key was used with.
	Hash []byte
	// ID is the registration the key created.
	ID string
	// Current reports that ID still names that registration, not one
	// deleted since or created again under the same id: only then does a
	// replay answer with the registration beside the stored answer.
	Current bool
	// Answer is the response that was sent, byte for byte.
	Answer []byte
	// CreatedAt is when the key was stored; Purge measures its age by it.
	CreatedAt time.Time
}

// IdempotencyKeys returns every stored idempotency key in key order, read
// in one transaction, so each key's Current agrees with the rows of that
// moment. Keys of deleted registrations are included: they stay until
// Purge, so that a late retry of a create replays instead of creating it
// again, and a copy of the store must keep that promise too.
func (db *DB) IdempotencyKeys(ctx context.Context) ([]StoredKey, error) {
	var keys []StoredKey
	err := db.view(ctx, func(tx *bolt.Tx) error {
		return tx.Bucket([]byte(bucketIdempotency)).ForEach(func(k, v []byte) error {
			var rec idemRecord
			if err := json.Unmarshal(v, &rec); err != nil {
				return fmt.Errorf("cursor: idempotency key %q in %s is unreadable: %w", k, db.path, err)
			}
			inc, ok := rowIncarnation(tx, rec.ID)
			keys = append(keys, StoredKey{
				Key:       string(k),
				Hash:      rec.Hash,
				ID:        rec.ID,
				Current:   ok && inc == rec.Inc,
				Answer:    rec.Answer,
				CreatedAt: rec.CreatedAt,
			})
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return keys, nil
}

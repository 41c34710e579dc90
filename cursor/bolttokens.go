package cursor

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

var _ Tokens = (*DB)(nil)

// bucketTokens holds the scoped access tokens: name → JSON Token. It is
// made by the first CreateToken, not by Open, so a file that never had a
// token stays as an older bridge wrote it, and an older bridge still
// opens one that has (checkLayout asks only for the buckets it knows).
// No registration is ever read from it: it is not in allBuckets, and
// nothing that walks registrations walks it.
const bucketTokens = "tokens"

// loadTokens reads every stored token into a new index, which the store
// then keeps equal to the bucket on every write: LookupToken never reads
// the file.
func loadTokens(bdb *bolt.DB, path string) (*TokenIndex, error) {
	idx := NewTokenIndex()
	err := guarded(path, func() error {
		return bdb.View(func(tx *bolt.Tx) error {
			b := tx.Bucket([]byte(bucketTokens))
			if b == nil {
				return nil
			}
			return b.ForEach(func(k, v []byte) error {
				var t Token
				if err := json.Unmarshal(v, &t); err != nil {
					return fmt.Errorf("cursor: token %q in %s is unreadable: %w", k, path, err)
				}
				idx.Put(t)
				return nil
			})
		})
	})
	return idx, err
}

// CreateToken stores t, durably, before LookupToken finds it.
func (db *DB) CreateToken(ctx context.Context, t Token) error {
	v, err := json.Marshal(&t)
	if err != nil {
		return fmt.Errorf("cursor: encode token %q: %w", t.Name, err)
	}
	err = db.update(ctx, func(tx *wtx) error {
		b, err := tx.CreateBucketIfNotExists([]byte(bucketTokens))
		if err != nil {
			return err
		}
		if b.Get([]byte(t.Name)) != nil {
			return ErrTokenExists
		}
		return b.Put([]byte(t.Name), v)
	})
	if err != nil {
		return err
	}
	db.tokens.Put(t)
	return nil
}

// ListTokens returns every token in name order, from the index the
// writes keep.
func (db *DB) ListTokens(ctx context.Context) ([]Token, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return db.tokens.All(), nil
}

// DeleteToken removes the token named name. It leaves the index first,
// so the token is refused from before the delete is durable: a crash in
// between brings it back, never the other way round.
func (db *DB) DeleteToken(ctx context.Context, name string) (bool, error) {
	found := db.tokens.Remove(name)
	err := db.update(ctx, func(tx *wtx) error {
		b := tx.Bucket([]byte(bucketTokens))
		if b == nil || b.Get([]byte(name)) == nil {
			return errNoChange
		}
		found = true
		return b.Delete([]byte(name))
	})
	return found, err
}

// LookupToken answers from memory.
func (db *DB) LookupToken(sum [sha256.Size]byte) (Token, bool) { return db.tokens.Lookup(sum) }

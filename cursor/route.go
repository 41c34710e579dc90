package cursor

import (
	"bytes"
	"context"
	"encoding/binary"
	"time"

	bolt "go.etcd.io/bbolt"
)

// wakeBatch bounds the rows one transaction of WakeBehind makes due, so a
// restart behind a million idle registrations never holds the write turn
// for long.
const wakeBatch = 1000

// Routes calls fn with the id and namespace of every active registration
// whose filter is exactly filter, as last flushed. It reads the routes
// index only: a message's subject finds its registrations without the
// bridge keeping a map of them in memory. fn runs inside a read
// transaction and must not call the store.
func (db *DB) Routes(ctx context.Context, filter string, fn func(id, ns string)) error {
	bucket := bucketRoutes
	if IsWildcard(filter) {
		bucket = bucketWildRoutes
	}
	prefix := append([]byte(filter), 0)
	return db.view(ctx, func(tx *bolt.Tx) error {
		c := tx.Bucket([]byte(bucket)).Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			fn(string(k[len(prefix):]), string(v))
		}
		return nil
	})
}

// WildcardFilters calls fn once for every distinct wildcard filter of an
// active registration, as last flushed. Literal filters are looked up by
// the subject itself (Routes); wildcard ones must be matched against it,
// so the caller holds their distinct filters, not their registrations.
func (db *DB) WildcardFilters(ctx context.Context, fn func(filter string)) error {
	return db.view(ctx, func(tx *bolt.Tx) error {
		c := tx.Bucket([]byte(bucketWildRoutes)).Cursor()
		for k, _ := c.First(); k != nil; {
			i := bytes.IndexByte(k, 0)
			if i < 0 {
				k, _ = c.Next()
				continue
			}
			fn(string(k[:i]))
			next := prefixEnd(k[:i+1])
			if next == nil {
				return nil
			}
			k, _ = c.Seek(next)
		}
		return nil
	})
}

// WakeBehind makes due at once every active registration that is idle with
// its cursor below seq, and returns how many it woke. A bridge calls it
// when it starts following the stream at seq: an idle registration was
// caught up when it went idle, and one whose cursor is at or past seq will
// hear of every message it needs, so only those behind may have missed
// messages while nobody followed. It reads the idle index, not the rows:
// a million registrations caught up cost nothing at start.
//
// Acknowledged progress is flushed first, so a registration that went
// idle just before the call is judged by its current cursor.
func (db *DB) WakeBehind(ctx context.Context, seq uint64) (int, error) {
	if err := db.Flush(ctx); err != nil {
		return 0, err
	}
	total := 0
	var after []byte
	for {
		n, last, err := db.wakeSome(ctx, seq, after)
		total += n
		if err != nil || last == nil {
			return total, err
		}
		after = last
	}
}

// wakeSome makes due up to wakeBatch idle rows below seq whose idle keys
// follow after, and returns how many and the last key it read (nil when it
// read none). Going on after that key, rather than from the start again,
// ends the walk even past a row that cannot be read.
func (db *DB) wakeSome(ctx context.Context, seq uint64, after []byte) (int, []byte, error) {
	var n int
	var last []byte
	err := db.update(ctx, func(t *wtx) error {
		n, last = 0, nil
		keys := idleBelow(t.Tx, seq, after, wakeBatch)
		if len(keys) == 0 {
			return errNoChange
		}
		last = keys[len(keys)-1]
		now := db.now()
		for _, k := range keys {
			woke, err := db.wakeRow(t, string(k[len(keyPrefix(k))+stampLen:]), now)
			if err != nil {
				return err
			}
			if woke {
				n++
			}
		}
		if n == 0 {
			return errNoChange
		}
		return nil
	})
	return n, last, err
}

// wakeRow makes id due at now, folding in its acknowledged progress.
func (db *DB) wakeRow(t *wtx, id string, now time.Time) (bool, error) {
	old, ok, err := getRowState(t.Tx, id)
	if err != nil {
		db.log.Error("cursor: an idle registration cannot be read; it is not woken", "path", db.path, "id", id, "error", err)
		return false, nil
	}
	if !ok {
		return false, nil
	}
	nw := old
	if p, claimed := t.claim(id); claimed && p.inc == old.inc {
		p.apply(&nw.Registration)
	}
	if nw.State == Active {
		nw.NextAttemptAt = now
	}
	return true, putRow(t.Tx, &old, &nw)
}

// idleBelow returns up to n idle-index keys after after whose NextSeq is
// below seq, in every namespace.
func idleBelow(tx *bolt.Tx, seq uint64, after []byte, n int) [][]byte {
	c := tx.Bucket([]byte(bucketIdle)).Cursor()
	var out [][]byte
	k, _ := c.First()
	if after != nil {
		if k, _ = c.Seek(after); bytes.Equal(k, after) {
			k, _ = c.Next()
		}
	}
	for k != nil && len(out) < n {
		p := keyPrefix(k)
		if p == nil || len(k) < len(p)+stampLen {
			k, _ = c.Next()
			continue
		}
		if binary.BigEndian.Uint64(k[len(p):]) < seq {
			out = append(out, bytes.Clone(k))
			k, _ = c.Next()
			continue
		}
		// The rest of this namespace is at or past seq.
		end := prefixEnd(p)
		if end == nil {
			break
		}
		k, _ = c.Seek(end)
	}
	return out
}

// Backlog returns, per namespace, the stream sequences behind the cursors
// of its active and parked registrations as last flushed, last being the
// stream's last sequence: the sum of last+1-NextSeq over them, from two
// keys per state instead of a walk of every row. A cursor past last+1 (a
// rewind beyond the head) counts against the others; the total is never
// below zero.
func (db *DB) Backlog(ctx context.Context, last uint64) (map[string]uint64, error) {
	out := make(map[string]uint64)
	err := db.view(ctx, func(tx *bolt.Tx) error {
		counts, sums := tx.Bucket([]byte(bucketCounts)), tx.Bucket([]byte(bucketSums))
		c := counts.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			p := keyPrefix(k)
			st := State(k[len(p):])
			if p == nil || len(v) != 8 || st == Completed {
				continue
			}
			n, sum := binary.BigEndian.Uint64(v), uint64(0)
			if s := sums.Get(k); len(s) == 8 {
				sum = binary.BigEndian.Uint64(s)
			}
			ns := string(p[1:])
			if want := n * (last + 1); want > sum {
				out[ns] += want - sum
			} else if _, ok := out[ns]; !ok {
				out[ns] = 0
			}
		}
		return nil
	})
	return out, err
}

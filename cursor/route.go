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

// IdleFloor returns the lowest cursor among the idle registrations, after
// flushing acknowledged progress; ok is false when none is idle. A bridge
// that starts without knowing how far it followed the stream reads the
// messages from there on and wakes their registrations, when they are
// fewer than the registrations behind (see WakeBehind). It reads the first
// idle-index key of each namespace, nothing more.
func (db *DB) IdleFloor(ctx context.Context) (floor uint64, ok bool, err error) {
	if err := db.Flush(ctx); err != nil {
		return 0, false, err
	}
	err = db.view(ctx, func(tx *bolt.Tx) error {
		c := tx.Bucket([]byte(bucketIdle)).Cursor()
		for k, _ := c.First(); k != nil; {
			p := keyPrefix(k)
			if p == nil || len(k) < len(p)+stampLen {
				k, _ = c.Next()
				continue
			}
			if seq := binary.BigEndian.Uint64(k[len(p):]); !ok || seq < floor {
				floor, ok = seq, true
			}
			end := prefixEnd(p)
			if end == nil {
				break
			}
			k, _ = c.Seek(end)
		}
		return nil
	})
	return floor, ok, err
}

// MakeDue makes the active ones among ids due at once. A bridge stopping
// calls it for the registrations it woke but did not serve, which only its
// memory knew of, so the store alone tells the next start about them.
func (db *DB) MakeDue(ctx context.Context, ids []string) error {
	for len(ids) > 0 {
		batch := ids[:min(len(ids), wakeBatch)]
		ids = ids[len(batch):]
		err := db.update(ctx, func(t *wtx) error {
			now, wrote := db.now(), false
			for _, id := range batch {
				_, changed, err := db.wakeRow(t, id, now)
				if err != nil {
					return err
				}
				wrote = wrote || changed
			}
			if !wrote {
				return errNoChange
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
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
		now, wrote := db.now(), false
		for _, k := range keys {
			woke, changed, err := db.wakeRow(t, string(k[len(keyPrefix(k))+stampLen:]), now)
			if err != nil {
				return err
			}
			if woke {
				n++
			}
			wrote = wrote || changed
		}
		if !wrote {
			return errNoChange
		}
		return nil
	})
	return n, last, err
}

// wakeRow makes id due at now when it is idle, folding in its
// acknowledged progress first; a row backing off keeps its time. It
// reports whether it woke the row, and changed whether it wrote it.
func (db *DB) wakeRow(t *wtx, id string, now time.Time) (woke, changed bool, err error) {
	old, ok, err := getRowState(t.Tx, id)
	if err != nil {
		db.log.Error("cursor: a registration to wake cannot be read; it is not woken", "path", db.path, "id", id, "error", err)
		return false, false, nil
	}
	if !ok {
		return false, false, nil
	}
	nw := old
	if p, claimed := t.claim(id); claimed && p.inc == old.inc {
		p.apply(&nw.Registration)
		changed = true
	}
	if isIdle(&nw.Registration) {
		nw.NextAttemptAt = now
		woke, changed = true, true
	}
	if !changed {
		return false, false, nil
	}
	return woke, true, putRow(t.Tx, &old, &nw)
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

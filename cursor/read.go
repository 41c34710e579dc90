package cursor

import (
	"bytes"
	"context"
	"encoding/binary"
	"time"

	bolt "go.etcd.io/bbolt"
)

const (
	// DefaultListLimit and MaxListLimit bound one List page.
	DefaultListLimit = 100
	MaxListLimit     = 1000
	// MaxUnserved is where Due stops counting the other namespace's due
	// rows: enough to tell a backlog from a blip, without a sweep reading
	// an unbounded part of the index.
	MaxUnserved = 10_000
)

// overlay is r as a reader of tx sees it: the stored row plus acknowledged
// progress tx does not include yet.
func (db *DB) overlay(tx *bolt.Tx, r row) Registration {
	if p, ok := db.wb.lookup(tx.ID(), r.ID); ok && p.inc == r.inc {
		p.apply(&r.Registration)
	}
	return r.Registration
}

// Get returns the registration with its acknowledged progress, flushed or
// not.
func (db *DB) Get(ctx context.Context, id string) (Registration, error) {
	var out Registration
	err := db.view(ctx, func(tx *bolt.Tx) error {
		r, ok, err := db.getRowCached(tx, id)
		if err != nil {
			return err
		}
		if !ok {
			return notFound(id)
		}
		out = db.overlay(tx, r)
		return nil
	})
	return out, err
}

// List pages registrations in id order, filtered by namespace, state and
// id prefix (all optional). Limit 0 is DefaultListLimit; more than MaxListLimit is
// MaxListLimit. next is the last id of the page when more matching rows
// follow, else empty. A filtered listing reads every row it passes over:
// it is for operators, not for the delivery path.
func (db *DB) List(ctx context.Context, opt ListOptions) ([]Registration, string, error) {
	limit := opt.Limit
	if limit <= 0 {
		limit = DefaultListLimit
	}
	limit = min(limit, MaxListLimit)
	var rows []Registration
	next := ""
	err := db.view(ctx, func(tx *bolt.Tx) error {
		c := tx.Bucket([]byte(bucketRegistrations)).Cursor()
		prefix := []byte(opt.Prefix)
		k, v := c.Seek([]byte(max(opt.After, opt.Prefix)))
		if opt.After != "" && bytes.Equal(k, []byte(opt.After)) {
			k, v = c.Next()
		}
		for ; k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			stored, config, err := decodeState(db.path, k, v)
			if err != nil {
				return err
			}
			stored.Registration = db.overlay(tx, stored)
			if (opt.Namespace != "" && stored.Namespace != opt.Namespace) || (opt.State != "" && stored.State != opt.State) {
				continue
			}
			if len(rows) == limit {
				next = rows[len(rows)-1].ID
				return nil
			}
			if err := decodeConfigInto(db.path, &stored, config); err != nil {
				return err
			}
			rows = append(rows, stored.Registration)
		}
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	return rows, next, nil
}

// Due returns at most limit active registrations of ns due at or before at,
// earliest first, and how many rows of other namespaces are due (up to
// MaxUnserved).
//
// It reads only the due index: a cursor over ns's prefix that stops at the
// first entry after at, plus the row of each entry it returns, so idle rows
// cost nothing. A row whose acknowledged progress made it idle or completed
// is skipped before it is flushed; a row that progress woke from idle
// appears once it is flushed. Unserved is counted from the index alone, so
// it can include rows of the other namespace that went idle since the last
// Flush. A limit of zero or less returns no rows, only Unserved.
func (db *DB) Due(ctx context.Context, at time.Time, limit int, ns string) (Due, error) {
	var out Due
	err := db.view(ctx, func(tx *bolt.Tx) error {
		due := tx.Bucket([]byte(bucketDue))
		pre, end := nsPrefix(ns), stamp(at)
		c := due.Cursor()
		for k, _ := c.Seek(pre); k != nil && bytes.HasPrefix(k, pre) && len(out.Rows) < limit; k, _ = c.Next() {
			rest := k[len(pre):]
			if stampAt(rest) > end {
				break
			}
			stored, ok, err := getRow(tx, string(rest[stampLen:]))
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
			if r := db.overlay(tx, stored); isDue(&r) && !r.NextAttemptAt.After(at) {
				out.Rows = append(out.Rows, r)
			}
		}
		out.Unserved = countUnserved(due.Cursor(), pre, end)
		return nil
	})
	return out, err
}

// countUnserved counts due entries of every namespace but own up to end,
// stopping at MaxUnserved. It skips each namespace's not-yet-due tail with
// one seek.
func countUnserved(c *bolt.Cursor, own []byte, end uint64) int {
	n := 0
	k, _ := c.First()
	for k != nil && n < MaxUnserved {
		p := keyPrefix(k)
		if p == nil || bytes.Equal(p, own) || stampAt(k[len(p):]) > end {
			next := prefixEnd(p)
			if p == nil || next == nil {
				return n
			}
			k, _ = c.Seek(next)
			continue
		}
		n++
		k, _ = c.Next()
	}
	return n
}

// Counts returns how many registrations each namespace has in each state,
// including acknowledged completions not flushed yet. The counts are kept
// beside the rows in every write transaction, so a /metrics scrape reads a
// handful of keys, not every registration.
func (db *DB) Counts(ctx context.Context) (map[string]map[State]int, error) {
	out := make(map[string]map[State]int)
	add := func(ns string, st State, n int) {
		if out[ns] == nil {
			out[ns] = make(map[State]int)
		}
		out[ns][st] += n
	}
	err := db.view(ctx, func(tx *bolt.Tx) error {
		c := tx.Bucket([]byte(bucketCounts)).Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if p := keyPrefix(k); p != nil && len(v) == 8 {
				add(string(p[1:]), State(k[len(p):]), int(binary.BigEndian.Uint64(v)))
			}
		}
		for id, p := range db.wb.completing(tx.ID()) {
			r, ok, err := getRowState(tx, id)
			if err != nil || !ok || r.inc != p.inc || r.State == Completed {
				continue
			}
			add(r.Namespace, r.State, -1)
			add(r.Namespace, Completed, 1)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Position is where one registration stands, without its Config.
type Position struct {
	Namespace string
	State     State
	NextSeq   uint64
}

// Positions calls fn with every registration's position as last flushed,
// decoding only the state records: a gauge over a hundred thousand
// registrations then costs a walk of the file, not a hundred thousand
// JSON decodes of Configs on every scrape. fn runs inside a read
// transaction and must not call the store.
func (db *DB) Positions(ctx context.Context, fn func(Position)) error {
	return db.view(ctx, func(tx *bolt.Tx) error {
		var n int
		return tx.Bucket([]byte(bucketRegistrations)).ForEach(func(k, v []byte) error {
			if n++; n%4096 == 0 && ctx.Err() != nil {
				return ctx.Err()
			}
			_, state, _, err := splitRow(v)
			var r Registration
			if err == nil {
				err = readState(state, &r)
			}
			if err != nil {
				return unreadableRow(db.path, string(k), err)
			}
			fn(Position{Namespace: r.Namespace, State: r.State, NextSeq: r.NextSeq})
			return nil
		})
	})
}

package cursor

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The file's layout. Every write goes through putRow or deleteRow, which keep
// the three derived buckets equal to what the rows imply, in the same
// transaction as the row:
//
//	registrations  id → rowFormat, incarnation (8 bytes BE), JSON Registration
//	due            len(ns), ns, NextAttemptAt (8 bytes BE unix nanos), id → nil
//	               exactly the rows with State Active and a non-zero NextAttemptAt
//	completed      CompletedAt (8 bytes BE unix nanos), id → nil
//	               exactly the rows with State Completed; Purge reads it oldest first
//	counts         len(ns), ns, state → count (8 bytes BE)
//	idempotency    key → JSON idemRecord
//	idem-by-age    createdAt (8 bytes BE unix nanos), key → nil
//	meta           "schema" → schemaVersion; "u:"+key → the caller's PutMeta values
//
// A derived bucket that drifted from the rows would schedule a parked row or
// starve an active one, so nothing else writes them.
const (
	bucketRegistrations = "registrations"
	bucketDue           = "due"
	bucketCompleted     = "completed"
	bucketCounts        = "counts"
	bucketIdempotency   = "idempotency"
	bucketIdemByAge     = "idem-by-age"
	bucketMeta          = "meta"

	metaSchemaKey  = "schema"
	metaUserPrefix = "u:"

	// schemaVersion is bumped by any change a previous bridge could not
	// read; Open refuses a file with a newer one.
	schemaVersion = 1

	// rowFormat leads every registration value so a later encoding can be
	// told apart without a migration.
	rowFormat = 1

	stampLen = 8
)

// allBuckets lists every bucket Open creates; a file with any other root
// bucket is not ours.
func allBuckets() []string {
	return []string{
		bucketRegistrations, bucketDue, bucketCompleted, bucketCounts,
		bucketIdempotency, bucketIdemByAge, bucketMeta,
	}
}

// row is a registration as stored: with its incarnation, a number the store
// assigns at Create and never reuses. Write-behind progress carries the
// incarnation it was acknowledged on, so progress for a deleted registration
// can never land on a new one that took its id.
type row struct {
	inc uint64
	Registration
}

func encodeRow(r *row) ([]byte, error) {
	body, err := json.Marshal(&r.Registration)
	if err != nil {
		return nil, fmt.Errorf("cursor: encode registration %q: %w", r.ID, err)
	}
	v := make([]byte, 0, 1+8+len(body))
	v = append(v, rowFormat)
	v = binary.BigEndian.AppendUint64(v, r.inc)
	return append(v, body...), nil
}

func decodeRow(id, v []byte) (row, error) {
	if len(v) < 9 || v[0] != rowFormat {
		return row{}, fmt.Errorf("cursor: registration %q is unreadable: unknown format", id)
	}
	r := row{inc: binary.BigEndian.Uint64(v[1:9])}
	if err := json.Unmarshal(v[9:], &r.Registration); err != nil {
		return row{}, fmt.Errorf("cursor: registration %q is unreadable: %w", id, err)
	}
	return r, nil
}

// getRow reads id from the registrations bucket; ok is false when absent.
func getRow(tx *bolt.Tx, id string) (r row, ok bool, err error) {
	v := tx.Bucket([]byte(bucketRegistrations)).Get([]byte(id))
	if v == nil {
		return row{}, false, nil
	}
	r, err = decodeRow([]byte(id), v)
	return r, err == nil, err
}

// rowIncarnation reads only the incarnation of id, without decoding it.
func rowIncarnation(tx *bolt.Tx, id string) (uint64, bool) {
	v := tx.Bucket([]byte(bucketRegistrations)).Get([]byte(id))
	if len(v) < 9 {
		return 0, false
	}
	return binary.BigEndian.Uint64(v[1:9]), true
}

// putRow stores nw, replacing old (nil for a new row), and moves its index
// entries and counts with it.
func putRow(tx *bolt.Tx, old, nw *row) error {
	if old != nil {
		if err := unindex(tx, &old.Registration); err != nil {
			return err
		}
	}
	if err := index(tx, &nw.Registration); err != nil {
		return err
	}
	v, err := encodeRow(nw)
	if err != nil {
		return err
	}
	if err := tx.Bucket([]byte(bucketRegistrations)).Put([]byte(nw.ID), v); err != nil {
		return fmt.Errorf("cursor: store registration %q: %w", nw.ID, err)
	}
	return nil
}

// deleteRow removes old and every index entry and count it held.
func deleteRow(tx *bolt.Tx, old *row) error {
	if err := unindex(tx, &old.Registration); err != nil {
		return err
	}
	if err := tx.Bucket([]byte(bucketRegistrations)).Delete([]byte(old.ID)); err != nil {
		return fmt.Errorf("cursor: delete registration %q: %w", old.ID, err)
	}
	return nil
}

func index(tx *bolt.Tx, r *Registration) error {
	if k := dueKey(r); k != nil {
		if err := tx.Bucket([]byte(bucketDue)).Put(k, nil); err != nil {
			return fmt.Errorf("cursor: index registration %q as due: %w", r.ID, err)
		}
	}
	if k := completedKey(r); k != nil {
		if err := tx.Bucket([]byte(bucketCompleted)).Put(k, nil); err != nil {
			return fmt.Errorf("cursor: index registration %q as completed: %w", r.ID, err)
		}
	}
	return addCount(tx, r.Namespace, r.State, 1)
}

func unindex(tx *bolt.Tx, r *Registration) error {
	if k := dueKey(r); k != nil {
		if err := tx.Bucket([]byte(bucketDue)).Delete(k); err != nil {
			return fmt.Errorf("cursor: unindex due registration %q: %w", r.ID, err)
		}
	}
	if k := completedKey(r); k != nil {
		if err := tx.Bucket([]byte(bucketCompleted)).Delete(k); err != nil {
			return fmt.Errorf("cursor: unindex completed registration %q: %w", r.ID, err)
		}
	}
	return addCount(tx, r.Namespace, r.State, -1)
}

// addCount moves the (namespace, state) counter by delta, never below zero.
func addCount(tx *bolt.Tx, ns string, st State, delta int64) error {
	b := tx.Bucket([]byte(bucketCounts))
	k := append(nsPrefix(ns), st...)
	var n uint64
	if v := b.Get(k); len(v) == 8 {
		n = binary.BigEndian.Uint64(v)
	}
	switch {
	case delta >= 0:
		n += uint64(delta)
	case n >= uint64(-delta):
		n -= uint64(-delta)
	default:
		n = 0
	}
	if n == 0 {
		return b.Delete(k)
	}
	return b.Put(k, binary.BigEndian.AppendUint64(nil, n))
}

// isDue is the due index's membership rule.
func isDue(r *Registration) bool { return r.State == Active && !r.NextAttemptAt.IsZero() }

// dueKey is r's key in the due index, or nil when r does not belong there.
func dueKey(r *Registration) []byte {
	if !isDue(r) {
		return nil
	}
	k := nsPrefix(r.Namespace)
	k = binary.BigEndian.AppendUint64(k, stamp(r.NextAttemptAt))
	return append(k, r.ID...)
}

// completedKey is r's key in the completed index, or nil when r is not
// completed.
func completedKey(r *Registration) []byte {
	if r.State != Completed {
		return nil
	}
	return stampedKey(r.CompletedAt, r.ID)
}

func stampedKey(t time.Time, s string) []byte {
	k := binary.BigEndian.AppendUint64(make([]byte, 0, stampLen+len(s)), stamp(t))
	return append(k, s...)
}

// nsPrefix is the namespace's prefix in the due and counts buckets. The
// length byte keeps one namespace from being a prefix of another ("a" of
// "a2a"), so a cursor over one namespace never reads a row of the other.
func nsPrefix(ns string) []byte {
	p := make([]byte, 0, 1+len(ns)+stampLen+32)
	p = append(p, byte(len(ns)))
	return append(p, ns...)
}

// keyPrefix returns the namespace prefix a due or counts key starts with,
// or nil when k is malformed.
func keyPrefix(k []byte) []byte {
	if len(k) == 0 || len(k) < 1+int(k[0]) {
		return nil
	}
	return k[:1+int(k[0])]
}

// prefixEnd is the smallest key greater than every key starting with p, or
// nil when there is none.
func prefixEnd(p []byte) []byte {
	end := bytes.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// stamp orders times as big-endian unix nanoseconds. Times before 1970 are
// stored as 0 and times past 2262 (where UnixNano overflows) as the largest
// value: both ends stay ordered against every time the bridge produces.
func stamp(t time.Time) uint64 {
	switch {
	case t.Unix() < 0:
		return 0
	case t.Year() >= 2262:
		return math.MaxInt64
	}
	return uint64(t.UnixNano())
}

func stampAt(k []byte) uint64 {
	if len(k) < stampLen {
		return math.MaxUint64
	}
	return binary.BigEndian.Uint64(k[:stampLen])
}

package cursor

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The file's layout. Every write of a registration goes through putRow or
// deleteRow, which keep the derived buckets (due, idle, routes, completed,
// counts, sums) equal to what the rows imply, in the same transaction as
// the row; the one exception, purgeRow, deletes completed rows by the
// completed index, which names everything they hold in the others.
//
//	registrations  id → the registration (see codec.go)
//	due            len(ns), ns, NextAttemptAt (8 bytes BE unix nanos), id → nil
//	               exactly the rows with State Active and a non-zero NextAttemptAt
//	idle           len(ns), ns, NextSeq (8 bytes BE), id → nil
//	               exactly the rows with State Active and a zero NextAttemptAt:
//	               caught up, woken only by a message, so a restart finds the
//	               ones that may have missed messages without reading the rest
//	routes         filter, 0, id → namespace, for Active rows whose filter is
//	               literal: the registrations a message's subject wakes, read
//	               from the file instead of held in memory
//	wildroutes     the same for Active rows whose filter has a wildcard
//	completed      CompletedAt (8 bytes BE unix nanos), id → namespace
//	               exactly the rows with State Completed; Purge reads it oldest
//	               first and deletes by it alone, without decoding a row
//	counts         len(ns), ns, state → count (8 bytes BE)
//	sums           len(ns), ns, state → sum of NextSeq (8 bytes BE) of the
//	               active and parked rows, so the backlog gauge is a few keys,
//	               not a walk of every row
//	idempotency    key → JSON idemRecord
//	idem-by-age    createdAt (8 bytes BE unix nanos), key → nil
//	meta           "schema" → schemaVersion; "u:"+key → the caller's PutMeta values
//	tokens         token name → JSON Token (SHA-256 of the secret, never the
//	               secret); made by the first CreateToken, outside allBuckets
//	               (see bolttokens.go)
//
// A derived bucket that drifted from the rows would schedule a parked row or
// starve an active one, so nothing else writes them.
const (
	bucketRegistrations = "registrations"
	bucketDue           = "due"
	bucketCompleted     = "completed"
	bucketCounts        = "counts"
	bucketIdle          = "idle"
	bucketRoutes        = "routes"
	bucketWildRoutes    = "wildroutes"
	bucketSums          = "sums"
	bucketIdempotency   = "idempotency"
	bucketIdemByAge     = "idem-by-age"
	bucketMeta          = "meta"

	metaSchemaKey  = "schema"
	metaUserPrefix = "u:"

	// schemaVersion is bumped by any change a previous bridge could not
	// read; Open refuses a file with a newer one. Version 2 added the idle,
	// routes, wildroutes and sums buckets; Open builds them in a file of
	// version 1 (see migrate).
	schemaVersion = 2

	// rowFormat leads every registration value so a later encoding can be
	// told apart without a migration.
	rowFormat = 1

	stampLen = 8
)

// allBuckets lists every bucket Open creates; a file with any other root
// bucket is not ours.
func allBuckets() []string {
	return append(bucketsV1(), bucketsV2()...)
}

func bucketsV1() []string {
	return []string{
		bucketRegistrations, bucketDue, bucketCompleted, bucketCounts,
		bucketIdempotency, bucketIdemByAge, bucketMeta,
	}
}

// bucketsV2 are the buckets schema version 2 added.
func bucketsV2() []string {
	return []string{bucketIdle, bucketRoutes, bucketWildRoutes, bucketSums}
}

// row is a registration as stored: with its incarnation, a number the store
// assigns at Create and never reuses. Write-behind progress carries the
// incarnation it was acknowledged on, so progress for a deleted registration
// can never land on a new one that took its id.
type row struct {
	inc uint64
	Registration
	// config is the stored Config of a row read without decoding it
	// (getRowState); encodeRow writes it back unchanged. Nil when Config is
	// decoded, and then encoded again.
	config []byte
}

// getRow reads and fully decodes id; ok is false when absent.
func getRow(tx *bolt.Tx, id string) (r row, ok bool, err error) { return readRow(tx, id, true) }

// getRowState reads id's delivery state, leaving its Config encoded: for
// writes that do not change the Config.
func getRowState(tx *bolt.Tx, id string) (r row, ok bool, err error) { return readRow(tx, id, false) }

func readRow(tx *bolt.Tx, id string, full bool) (row, bool, error) {
	v := tx.Bucket([]byte(bucketRegistrations)).Get([]byte(id))
	if v == nil {
		return row{}, false, nil
	}
	r, err := decodeRow(tx.DB().Path(), []byte(id), v, full)
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
// entries and counts with it; entries that did not change are not touched.
func putRow(tx *bolt.Tx, old, nw *row) error {
	var was *Registration
	if old != nil {
		was = &old.Registration
		if (old.State == Active) != (nw.State == Active) {
			if err := subjectsOf(old, nw); err != nil {
				return err
			}
		}
	}
	if err := reindex(tx, was, &nw.Registration); err != nil {
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
	if err := subjectsOf(old); err != nil {
		return err
	}
	if err := reindex(tx, &old.Registration, nil); err != nil {
		return err
	}
	if err := tx.Bucket([]byte(bucketRegistrations)).Delete([]byte(old.ID)); err != nil {
		return fmt.Errorf("cursor: delete registration %q: %w", old.ID, err)
	}
	return nil
}

// reindex moves the index entries, the counts and the sums from what was
// implies (nil: a new row) to what is implies (nil: a deleted row).
func reindex(tx *bolt.Tx, was, is *Registration) error {
	id := is
	if id == nil {
		id = was
	}
	if err := moveKey(tx, bucketDue, dueKey(was), dueKey(is), nil); err != nil {
		return fmt.Errorf("cursor: due index of %q: %w", id.ID, err)
	}
	if err := moveKey(tx, bucketIdle, idleKey(was), idleKey(is), nil); err != nil {
		return fmt.Errorf("cursor: idle index of %q: %w", id.ID, err)
	}
	if err := moveRoute(tx, was, is); err != nil {
		return fmt.Errorf("cursor: routes of %q: %w", id.ID, err)
	}
	var ns []byte
	if is != nil {
		ns = []byte(is.Namespace)
	}
	if err := moveKey(tx, bucketCompleted, completedKey(was), completedKey(is), ns); err != nil {
		return fmt.Errorf("cursor: completed index of %q: %w", id.ID, err)
	}
	if was != nil && is != nil && was.Namespace == is.Namespace && was.State == is.State {
		return addSum(tx, is.Namespace, is.State, int64(is.NextSeq-was.NextSeq))
	}
	if was != nil {
		if err := addCount(tx, was.Namespace, was.State, -1); err != nil {
			return err
		}
		if err := addSum(tx, was.Namespace, was.State, -int64(was.NextSeq)); err != nil {
			return err
		}
	}
	if is != nil {
		if err := addCount(tx, is.Namespace, is.State, 1); err != nil {
			return err
		}
		return addSum(tx, is.Namespace, is.State, int64(is.NextSeq))
	}
	return nil
}

// subjectsOf fills in the Subject of rows read without their Config, for
// a write that moves a row into or out of the routes. Only those writes
// need it, and they are rare (park, unpark, completion, delete): the
// writes of every delivery keep a row active and its route where it is.
func subjectsOf(rows ...*row) error {
	for _, r := range rows {
		if r.Subject != "" || r.config == nil {
			continue
		}
		var c struct {
			Subject string `json:"subject"`
		}
		if err := json.Unmarshal(r.config, &c); err != nil {
			return fmt.Errorf("cursor: registration %q: reading its subject: %w", r.ID, err)
		}
		r.Subject = c.Subject
	}
	return nil
}

// reindexV2 adds the entries of the buckets schema version 2 added for r,
// which the version 1 buckets already hold.
func reindexV2(tx *bolt.Tx, r *Registration) error {
	if err := moveKey(tx, bucketIdle, nil, idleKey(r), nil); err != nil {
		return err
	}
	if err := moveRoute(tx, nil, r); err != nil {
		return err
	}
	return addSum(tx, r.Namespace, r.State, int64(r.NextSeq))
}

// moveRoute replaces was's route (nil: none) with is's, in whichever of
// the two route buckets each filter belongs.
func moveRoute(tx *bolt.Tx, was, is *Registration) error {
	wb, wk := routeKey(was)
	ib, ik := routeKey(is)
	if wb == ib && bytes.Equal(wk, ik) {
		return nil // a row never changes namespace
	}
	if wk != nil {
		if err := tx.Bucket([]byte(wb)).Delete(wk); err != nil {
			return err
		}
	}
	if ik != nil {
		return tx.Bucket([]byte(ib)).Put(ik, []byte(is.Namespace))
	}
	return nil
}

// routeKey is r's bucket and key among the routes, or a nil key when r is
// nil or not active.
func routeKey(r *Registration) (string, []byte) {
	if r == nil || r.State != Active {
		return "", nil
	}
	k := make([]byte, 0, len(r.Subject)+1+len(r.ID))
	k = append(append(append(k, r.Subject...), 0), r.ID...)
	if IsWildcard(r.Subject) {
		return bucketWildRoutes, k
	}
	return bucketRoutes, k
}

// IsWildcard reports whether a subject filter has a wildcard token ("*"
// or ">"), so that it matches more than the one subject it spells.
func IsWildcard(filter string) bool {
	for tok := range strings.SplitSeq(filter, ".") {
		if tok == "*" || tok == ">" {
			return true
		}
	}
	return false
}

// isIdle is the idle index's membership rule.
func isIdle(r *Registration) bool { return r.State == Active && r.NextAttemptAt.IsZero() }

// idleKey is r's key in the idle index, or nil when r is nil or not idle.
func idleKey(r *Registration) []byte {
	if r == nil || !isIdle(r) {
		return nil
	}
	k := nsPrefix(r.Namespace)
	k = binary.BigEndian.AppendUint64(k, r.NextSeq)
	return append(k, r.ID...)
}

// addSum moves the (namespace, state) sum of NextSeq by delta, which wraps
// like the unsigned sum it is: every delta is matched by its reverse when
// the row moves on. Completed rows have no backlog and no sum, so Purge
// deletes them by the completed index alone.
func addSum(tx *bolt.Tx, ns string, st State, delta int64) error {
	if delta == 0 || st == Completed {
		return nil
	}
	b := tx.Bucket([]byte(bucketSums))
	k := append(nsPrefix(ns), st...)
	var n uint64
	if v := b.Get(k); len(v) == 8 {
		n = binary.BigEndian.Uint64(v)
	}
	n += uint64(delta)
	if n == 0 {
		return b.Delete(k)
	}
	return b.Put(k, binary.BigEndian.AppendUint64(nil, n))
}

// moveKey replaces index key from (nil: none) with to (nil: none).
func moveKey(tx *bolt.Tx, bucket string, from, to, val []byte) error {
	if bytes.Equal(from, to) {
		return nil
	}
	b := tx.Bucket([]byte(bucket))
	if from != nil {
		if err := b.Delete(from); err != nil {
			return err
		}
	}
	if to != nil {
		return b.Put(to, val)
	}
	return nil
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

// dueKey is r's key in the due index, or nil when r is nil or does not
// belong there.
func dueKey(r *Registration) []byte {
	if r == nil || !isDue(r) {
		return nil
	}
	k := nsPrefix(r.Namespace)
	k = binary.BigEndian.AppendUint64(k, stamp(r.NextAttemptAt))
	return append(k, r.ID...)
}

// completedKey is r's key in the completed index, or nil when r is nil or
// not completed.
func completedKey(r *Registration) []byte {
	if r == nil || r.State != Completed {
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

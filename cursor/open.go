package cursor

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// openBolt opens path and checks it is a bridge store this bridge can read.
//
// The check reads every page through bbolt's mapping, which would leave the
// whole file resident in the process: a million registrations' pages
// counted against its memory from the start, though a running bridge reads
// only the few it serves. So a file that had pages to check is closed and
// mapped afresh; the pages stay in the kernel's cache, not in the process.
func openBolt(path string, lockTimeout time.Duration, log *slog.Logger) (*bolt.DB, error) {
	bdb, err := openFile(path, lockTimeout)
	if err != nil {
		return nil, err
	}
	walked, err := checkFile(bdb, path, log)
	if err != nil {
		_ = bdb.Close()
		return nil, err
	}
	if !walked {
		return bdb, nil
	}
	if err := bdb.Close(); err != nil {
		return nil, fmt.Errorf("cursor: close %s after checking it: %w", path, err)
	}
	return openFile(path, lockTimeout)
}

// openFile is bolt.Open turned into errors that name the file.
//
// bbolt trusts the file it maps: a damaged one can make it panic, or fault
// on a page past the end of a truncated file. Both are turned into an error
// here — SetPanicOnFault makes the fault a panic on this goroutine only —
// and the file's lock is released and the file closed, so the operator can
// move it aside; the mapping bbolt made of it is not reclaimed until the
// process exits.
func openFile(path string, timeout time.Duration) (bdb *bolt.DB, err error) {
	var file *os.File
	opts := &bolt.Options{
		Timeout:      timeout,
		FreelistType: bolt.FreelistMapType,
		OpenFile: func(name string, flag int, mode os.FileMode) (*os.File, error) {
			f, err := os.OpenFile(name, flag, mode)
			file = f
			return f, err
		},
	}
	defer func() {
		if p := recover(); p != nil {
			if file != nil {
				unlock(file)
				_ = file.Close()
			}
			bdb, err = nil, damaged(path, fmt.Errorf("%v", p))
		}
	}()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))

	bdb, err = bolt.Open(path, 0o600, opts)
	switch {
	case err == nil:
		return bdb, nil
	case errors.Is(err, berrors.ErrTimeout):
		return nil, fmt.Errorf("cursor: %s is locked by another process (another bridge running on this data dir?); gave up after %v",
			path, timeout)
	case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrVersionMismatch),
		errors.Is(err, berrors.ErrChecksum):
		return nil, damaged(path, err)
	}
	// The error of opening the file names it already.
	if pe := (*fs.PathError)(nil); errors.As(err, &pe) && pe.Path == path {
		return nil, fmt.Errorf("cursor: %w", err)
	}
	return nil, fmt.Errorf("cursor: open %s: %w", path, err)
}

// damaged is the error for a file bbolt opened but the bridge cannot trust.
func damaged(path string, cause error) error {
	return fmt.Errorf("cursor: %s is not a bridge store or is damaged (restore it from a backup, or move it aside to start empty): %w",
		path, cause)
}

// guarded runs fn with the panics and faults bbolt raises on a damaged
// file turned into an error naming the file: a page damaged while the store
// is open fails the operation that reads it instead of the process.
func guarded(path string, fn func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("cursor: %s is damaged (restore it from a backup, or move it aside to start empty): %v", path, p)
		}
	}()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	return fn()
}

// checkFile verifies the file's size, layout and every page, creating the
// buckets of a new file and migrating an older one, with the same
// protection against panics and faults as openFile. walked reports that it
// read the pages of an existing file.
func checkFile(bdb *bolt.DB, path string, log *slog.Logger) (walked bool, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = damaged(path, fmt.Errorf("%v", p))
		}
	}()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))

	version := 0
	err = bdb.View(func(tx *bolt.Tx) error {
		if err := checkSize(tx, path); err != nil {
			return err
		}
		var err error
		if version, err = checkLayout(tx, path); err != nil || version == 0 {
			return err
		}
		return checkPages(tx, path, log)
	})
	switch {
	case err != nil:
		return false, err
	case version == 0:
		return false, bdb.Update(createLayout)
	case version < schemaVersion:
		return true, migrate(bdb, path, version, log)
	}
	return true, nil
}

// checkPages walks every page of the file, so that damage the header, the
// size and the buckets do not show is refused here, with an error naming
// the file, rather than found by a panic inside bbolt at the first read or
// write of the damaged page.
//
// The walk reads every key and value first, on this goroutine: a page
// reached through a damaged pointer then faults here, where the fault is
// turned into an error, and not in the goroutine tx.Check runs on, where it
// would end the process. tx.Check then verifies what reading does not: page
// types, key order, and that no page is both used and free or used twice.
// A page neither used nor free is only space lost, not damage, and is
// logged, not refused.
func checkPages(tx *bolt.Tx, path string, log *slog.Logger) error {
	if err := readAll(tx); err != nil {
		return damaged(path, err)
	}
	var problems []error
	leaked, more := 0, 0
	for err := range tx.Check() {
		switch {
		case strings.HasSuffix(err.Error(), ": unreachable unfreed"):
			leaked++
		case len(problems) < 3:
			problems = append(problems, err)
		default:
			more++
		}
	}
	if len(problems) > 0 {
		if more > 0 {
			problems = append(problems, fmt.Errorf("and %d more problems", more))
		}
		return damaged(path, errors.Join(problems...))
	}
	if leaked > 0 {
		log.Warn("cursor: store has pages neither used nor free; the space is lost until the file is compacted",
			"path", path, "pages", leaked)
	}
	return nil
}

// readAll reads every key and value of every bucket, one byte in 512 of
// each: enough to touch every memory page they lie on.
func readAll(tx *bolt.Tx) error {
	var sum byte
	touch := func(b []byte) {
		for i := 0; i < len(b); i += 512 {
			sum ^= b[i]
		}
		if len(b) > 0 {
			sum ^= b[len(b)-1]
		}
	}
	var walk func(b *bolt.Bucket) error
	walk = func(b *bolt.Bucket) error {
		return b.ForEach(func(k, v []byte) error {
			touch(k)
			touch(v)
			if v == nil {
				if child := b.Bucket(k); child != nil {
					return walk(child)
				}
			}
			return nil
		})
	}
	err := tx.ForEach(func(name []byte, b *bolt.Bucket) error {
		touch(name)
		return walk(b)
	})
	_ = sum
	return err
}

// checkSize catches a truncated file: its pages reach past its end.
func checkSize(tx *bolt.Tx, path string) error {
	info, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("cursor: stat %s: %w", path, err)
	}
	if info.Size() < tx.Size() {
		return damaged(path, fmt.Errorf("truncated: %d bytes, but its pages reach %d", info.Size(), tx.Size()))
	}
	return nil
}

// checkLayout returns the file's schema version, 0 when the file is new
// (no buckets at all), and fails when it belongs to something else or to a
// newer bridge.
func checkLayout(tx *bolt.Tx, path string) (version int, err error) {
	meta := tx.Bucket([]byte(bucketMeta))
	if meta == nil {
		if foreign, _ := tx.Cursor().First(); foreign != nil {
			return 0, fmt.Errorf("cursor: %s is not a bridge store: it holds a bucket %q the bridge never creates", path, foreign)
		}
		return 0, nil
	}
	v, err := strconv.Atoi(string(meta.Get([]byte(metaSchemaKey))))
	switch {
	case err != nil || v < 1:
		return 0, damaged(path, fmt.Errorf("schema version %q is unreadable", meta.Get([]byte(metaSchemaKey))))
	case v > schemaVersion:
		return 0, fmt.Errorf("cursor: %s was written by a newer bridge (store schema %d; this bridge reads up to %d)", path, v, schemaVersion)
	}
	want := allBuckets()
	if v == 1 {
		want = bucketsV1()
	}
	for _, name := range want {
		if tx.Bucket([]byte(name)) == nil {
			return 0, damaged(path, fmt.Errorf("bucket %q is missing", name))
		}
	}
	return v, nil
}

// migrate brings a file of schema version 1 to the current one: it builds
// the buckets version 2 added from the rows, a batch of rows per
// transaction so a million rows never sit in one, and records the new
// version last. A crash part way leaves version 1 on the file, and the
// next start builds the buckets again from empty.
func migrate(bdb *bolt.DB, path string, from int, log *slog.Logger) error {
	start := time.Now()
	err := bdb.Update(func(tx *bolt.Tx) error {
		for _, name := range bucketsV2() {
			if err := tx.DeleteBucket([]byte(name)); err != nil && !errors.Is(err, berrors.ErrBucketNotFound) {
				return fmt.Errorf("clear bucket %q: %w", name, err)
			}
			if _, err := tx.CreateBucket([]byte(name)); err != nil {
				return fmt.Errorf("create bucket %q: %w", name, err)
			}
		}
		return nil
	})
	n, after := 0, []byte(nil)
	for err == nil {
		var done int
		done, after, err = migrateSome(bdb, path, after)
		n += done
		if done == 0 {
			break
		}
	}
	if err == nil {
		err = bdb.Update(func(tx *bolt.Tx) error {
			return tx.Bucket([]byte(bucketMeta)).Put([]byte(metaSchemaKey), []byte(strconv.Itoa(schemaVersion)))
		})
	}
	if err != nil {
		return fmt.Errorf("cursor: migrating %s from store schema %d to %d: %w", path, from, schemaVersion, err)
	}
	log.Info("cursor: store migrated", "path", path, "from", from, "to", schemaVersion,
		"registrations", n, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// migrateBatch is how many rows one transaction of migrate indexes.
const migrateBatch = 20_000

// migrateSome indexes up to migrateBatch rows after the id after, and
// returns how many and the last id.
func migrateSome(bdb *bolt.DB, path string, after []byte) (int, []byte, error) {
	n, last := 0, after
	err := bdb.Update(func(tx *bolt.Tx) error {
		c := tx.Bucket([]byte(bucketRegistrations)).Cursor()
		k, v := c.First()
		if after != nil {
			if k, v = c.Seek(after); bytes.Equal(k, after) {
				k, v = c.Next()
			}
		}
		for ; k != nil && n < migrateBatch; k, v = c.Next() {
			r, err := decodeRow(path, k, v, true)
			if err != nil {
				return err
			}
			if err := reindexV2(tx, &r.Registration); err != nil {
				return err
			}
			n, last = n+1, bytes.Clone(k)
		}
		return nil
	})
	return n, last, err
}

func createLayout(tx *bolt.Tx) error {
	for _, name := range allBuckets() {
		if _, err := tx.CreateBucketIfNotExists([]byte(name)); err != nil {
			return fmt.Errorf("cursor: create bucket %q: %w", name, err)
		}
	}
	return tx.Bucket([]byte(bucketMeta)).Put([]byte(metaSchemaKey), []byte(strconv.Itoa(schemaVersion)))
}

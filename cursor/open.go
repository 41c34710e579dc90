package cursor

import (
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
func openBolt(path string, lockTimeout time.Duration, log *slog.Logger) (*bolt.DB, error) {
	bdb, err := openFile(path, lockTimeout)
	if err != nil {
		return nil, err
	}
	if err := checkFile(bdb, path, log); err != nil {
		_ = bdb.Close()
		return nil, err
	}
	return bdb, nil
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
// buckets of a new file, with the same protection against panics and faults
// as openFile.
func checkFile(bdb *bolt.DB, path string, log *slog.Logger) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = damaged(path, fmt.Errorf("%v", p))
		}
	}()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))

	fresh := false
	err = bdb.View(func(tx *bolt.Tx) error {
		if err := checkSize(tx, path); err != nil {
			return err
		}
		var err error
		if fresh, err = checkLayout(tx, path); err != nil || fresh {
			return err
		}
		return checkPages(tx, path, log)
	})
	if err != nil || !fresh {
		return err
	}
	return bdb.Update(createLayout)
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

// checkLayout reports whether the file is new (no buckets at all), and
// fails when it belongs to something else or to a newer bridge.
func checkLayout(tx *bolt.Tx, path string) (fresh bool, err error) {
	meta := tx.Bucket([]byte(bucketMeta))
	if meta == nil {
		if foreign, _ := tx.Cursor().First(); foreign != nil {
			return false, fmt.Errorf("cursor: %s is not a bridge store: it holds a bucket %q the bridge never creates", path, foreign)
		}
		return true, nil
	}
	v, err := strconv.Atoi(string(meta.Get([]byte(metaSchemaKey))))
	switch {
	case err != nil || v < 1:
		return false, damaged(path, fmt.Errorf("schema version %q is unreadable", meta.Get([]byte(metaSchemaKey))))
	case v > schemaVersion:
		return false, fmt.Errorf("cursor: %s was written by a newer bridge (store schema %d; this bridge reads up to %d)", path, v, schemaVersion)
	}
	for _, name := range allBuckets() {
		if tx.Bucket([]byte(name)) == nil {
			return false, damaged(path, fmt.Errorf("bucket %q is missing", name))
		}
	}
	return false, nil
}

func createLayout(tx *bolt.Tx) error {
	for _, name := range allBuckets() {
		if _, err := tx.CreateBucketIfNotExists([]byte(name)); err != nil {
			return fmt.Errorf("cursor: create bucket %q: %w", name, err)
		}
	}
	return tx.Bucket([]byte(bucketMeta)).Put([]byte(metaSchemaKey), []byte(strconv.Itoa(schemaVersion)))
}

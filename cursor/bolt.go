package cursor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// DefaultLockTimeout is how long Open waits for the file lock: long enough
// for a bridge that is just exiting to let go, short enough that a second
// bridge on the same data dir fails fast instead of hanging.
const DefaultLockTimeout = 2 * time.Second

// DB is the bbolt implementation of Store: one file, one process.
//
// Writes are ordered by one write turn (see write); Create, Replace,
// Delete and the worker's Retry, Park, Unpark and Rewind are committed in
// groups, one transaction and one fsync for the writes that queued while
// the previous one committed (see grouped). Advance takes no turn
// and only records progress in memory, which Flush — or the background
// flusher of WithFlushInterval — commits in one transaction for all
// registrations. Reads overlay that progress. Lock order: the write turn,
// then bbolt's writer lock, then the write-behind locks (see writeBehind),
// which are never held across I/O by a writer.
type DB struct {
	bolt *bolt.DB
	path string
	now  func() time.Time
	log  *slog.Logger

	// write is the write turn: a one-slot semaphore every write transaction
	// holds from before it begins until its write-behind claims are settled,
	// so progress taken by a transaction that then fails is back in pending
	// before any later write can look for it. A channel rather than a mutex
	// so waiting honours ctx, and hands the turn over in arrival order: a
	// long Purge yields to a waiting Flush between batches.
	write chan struct{}
	// queue holds the grouped writes waiting for the turn; the caller
	// that gets it commits them all. Its lock is never held with another.
	queue   writeQueue
	wb      writeBehind
	configs *configCache
	// tokens is every scoped access token of bucketTokens, by hash.
	tokens *TokenIndex

	stopFlusher context.CancelFunc
	flusherDone chan struct{}
	closeOnce   sync.Once
	closeErr    error
}

var _ Store = (*DB)(nil)

// Option configures Open.
type Option func(*options)

type options struct {
	lockTimeout   time.Duration
	clock         func() time.Time
	flushInterval time.Duration
	logger        *slog.Logger
}

// WithLockTimeout bounds the wait for the file lock (default
// DefaultLockTimeout). A value of zero or less keeps the default: waiting
// forever is the hang this option exists to prevent.
func WithLockTimeout(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.lockTimeout = d
		}
	}
}

// WithClock sets the clock the store stamps CreatedAt, UpdatedAt,
// CompletedAt and idempotency keys with, and Purge measures ages by.
func WithClock(now func() time.Time) Option {
	return func(o *options) {
		if now != nil {
			o.clock = now
		}
	}
}

// WithFlushInterval starts a goroutine that flushes acknowledged progress
// every d; Close stops it and flushes once more. Zero (the default) leaves
// flushing to the caller.
func WithFlushInterval(d time.Duration) Option {
	return func(o *options) { o.flushInterval = d }
}

// WithLogger is where the background flusher reports failing flushes (once
// when they start failing, once when they recover). Default slog.Default().
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.logger = l
		}
	}
}

// Open opens or creates the store at path (mode 0600).
//
// It fails with an error naming the file, never a hang or a panic, when the
// file is locked by another process, is not a bridge store, was written by
// a newer bridge, or is truncated or damaged: it reads every page of the
// file before trusting it.
func Open(path string, opts ...Option) (*DB, error) {
	o := options{lockTimeout: DefaultLockTimeout, clock: time.Now, logger: slog.Default()}
	for _, opt := range opts {
		opt(&o)
	}
	bdb, err := openBolt(path, o.lockTimeout, o.logger)
	if err != nil {
		return nil, err
	}
	tokens, err := loadTokens(bdb, path)
	if err != nil {
		_ = bdb.Close()
		return nil, err
	}
	db := &DB{
		tokens:  tokens,
		bolt:    bdb,
		path:    path,
		now:     func() time.Time { return o.clock().UTC() },
		log:     o.logger,
		write:   make(chan struct{}, 1),
		configs: newConfigCache(),
	}
	if o.flushInterval > 0 {
		ctx, cancel := context.WithCancel(context.Background())
		db.stopFlusher = cancel
		db.flusherDone = make(chan struct{})
		go db.runFlusher(ctx, o.flushInterval)
	}
	return db, nil
}

// Path is the file the store lives in.
func (db *DB) Path() string { return db.path }

// Pending is how many registrations have acknowledged progress that is not
// durable yet: what a crash now would repeat. For metrics.
func (db *DB) Pending() int { return db.wb.size() }

// Close stops the background flusher, flushes, and closes the file. Progress
// that cannot be flushed is lost and will be delivered again; the error says
// so. Close is idempotent.
func (db *DB) Close() error {
	db.closeOnce.Do(func() {
		db.haltFlusher()
		ferr := db.Flush(context.Background())
		if ferr != nil {
			ferr = fmt.Errorf("%w (%d registrations will repeat deliveries)", ferr, db.wb.size())
		}
		cerr := db.bolt.Close()
		if cerr != nil {
			cerr = fmt.Errorf("cursor: close %s: %w", db.path, cerr)
		}
		db.closeErr = errors.Join(ferr, cerr)
	})
	return db.closeErr
}

func (db *DB) haltFlusher() {
	if db.stopFlusher != nil {
		db.stopFlusher()
		<-db.flusherDone
	}
}

func (db *DB) runFlusher(ctx context.Context, every time.Duration) {
	defer close(db.flusherDone)
	FlushEvery(ctx, every, db.Flush, db.Pending, db.log, "path", db.path)
}

// GetMeta returns the value PutMeta stored under key, or nil when there is
// none.
func (db *DB) GetMeta(ctx context.Context, key string) ([]byte, error) {
	var v []byte
	err := db.view(ctx, func(tx *bolt.Tx) error {
		v = bytes.Clone(tx.Bucket([]byte(bucketMeta)).Get([]byte(metaUserPrefix + key)))
		return nil
	})
	return v, err
}

// PutMeta durably stores val under key, for the bridge's own bookkeeping
// (the journal stream's creation time, say). A nil val deletes the key.
func (db *DB) PutMeta(ctx context.Context, key string, val []byte) error {
	if key == "" {
		return errors.New("cursor: meta key is empty")
	}
	return db.update(ctx, func(t *wtx) error {
		b := t.Bucket([]byte(bucketMeta))
		if val == nil {
			return b.Delete([]byte(metaUserPrefix + key))
		}
		return b.Put([]byte(metaUserPrefix+key), val)
	})
}

// errNoChange ends a write transaction that found nothing to write: it is
// rolled back instead of committed (a commit costs an fsync), and its
// write-behind claims count as consumed.
var errNoChange = errors.New("cursor: nothing to write")

// wtx is a write transaction that can claim write-behind progress.
type wtx struct {
	*bolt.Tx
	db      *DB
	claimed bool
}

// claim takes id's acknowledged progress into this transaction.
func (t *wtx) claim(id string) (progress, bool) {
	p, ok := t.db.wb.claim(t.ID(), id)
	t.claimed = t.claimed || ok
	return p, ok
}

// claimAll takes every registration's acknowledged progress.
func (t *wtx) claimAll() map[string]progress {
	all := t.db.wb.claimAll(t.ID())
	t.claimed = true
	return all
}

// update runs fn alone in one write transaction, holding the write turn
// until the write-behind claims fn made are settled. Writes that may share
// a transaction use grouped instead.
func (db *DB) update(ctx context.Context, fn func(t *wtx) error) error {
	if err := db.acquire(ctx); err != nil {
		return err
	}
	defer db.release()
	_, err := db.commit([]*call{{fn: fn}})
	return err
}

// view runs fn in a read transaction whose overlay lookups (db.overlay,
// wb.lookup) stay consistent with its snapshot. fn must not call view.
// A panic or fault bbolt raises on a page damaged since Open is an error
// naming the file, not the end of the process.
func (db *DB) view(ctx context.Context, fn func(tx *bolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	db.wb.reading.RLock()
	defer db.wb.reading.RUnlock()
	return db.wrapClosed(guarded(db.path, func() error { return db.bolt.View(fn) }))
}

func (db *DB) acquire(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case db.write <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (db *DB) release() { <-db.write }

func (db *DB) wrapClosed(err error) error {
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return fmt.Errorf("cursor: %s is closed: %w", db.path, err)
	}
	return err
}

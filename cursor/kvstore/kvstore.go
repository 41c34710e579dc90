// Package kvstore is the cursor.Store of a cluster of bridges: the
// registrations, their cursors and parking state, the admin API's
// idempotency keys and the bridge's meta values live in replicated
// JetStream key-value buckets (<prefix>_regs, <prefix>_idem,
// <prefix>_meta), so any bridge can die without taking state with it; the
// scoped access tokens of the admin API live beside them in
// <prefix>_tokens (see tokenSet).
//
// Every write is a compare-and-set on the key's revision (Create for a new
// key, Update or Delete with the revision this store last saw otherwise):
// a bridge holding a stale view is refused by the server and never
// silently overwrites a newer row. Refused, an explicit write (Replace,
// Retry, Park, Unpark, Rewind, Delete, WakeBehind, MakeDue) reads the row
// again and applies its change to it; a cursor write of Flush does too,
// unless the fresh row shows another writer overtook the progress (a
// cursor at or past it, a rewind, a delete): then the progress is dropped
// and counted (FencedWrites). This store's writes to one key are
// serialised; Flush writes different keys concurrently.
//
// Reads come from an index of every registration, built at Open from a
// watch of the bucket and kept current by it and by this store's own
// writes: Due, Routes, WildcardFilters, WakeBehind, List, Counts and
// Backlog never ask the server for rows. Get reads the key itself, from
// the bucket's stream leader (the buckets allow no direct gets, which a
// lagging replica could answer), so a write made through any bridge is
// visible to it as soon as that write has answered. A List first waits
// (up to a second) for the watch to apply every change the bucket held
// when it was called, so it shows what another bridge acknowledged.
//
// Not implemented yet: Counts and Backlog see another bridge's writes
// only once the watch delivers them (milliseconds on loopback); Purge
// lists the idempotency bucket's keys and reads each, fine for thousands,
// not millions; deleted and purged keys leave delete markers that nothing
// removes yet (Open's watch reads them all); Flush writes one message per
// key, without atomic batch publish; the bolt store's CreateMany and
// Positions have no counterpart.
package kvstore

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetstream-bridge/bridge/cursor"
	"github.com/jetstream-bridge/bridge/internal/kvwatch"
)

// DefaultPrefix names the buckets when WithPrefix is not given.
const DefaultPrefix = "BRIDGE"

// DefaultReplicas is how many servers hold each bucket: a cluster of three
// survives the loss of one.
const DefaultReplicas = 3

// DefaultFlushConcurrency bounds the cursor writes one Flush has in
// flight. One key at a time waits a round trip per key; BenchmarkFlush on
// one embedded server (2 shared cores, 1,000 registrations a Flush):
// 7,200–10,800 writes/s one by one, 30,200–34,300 with 32 at once, beside
// 12,400–12,700 and 18,900–23,000 for a bare kv.Update loop
// (BenchmarkBareCAS) at the same concurrency.
const DefaultFlushConcurrency = 32

// maxAttempts bounds how often an explicit write re-reads a row another
// writer moved and applies its change again. Eight lost now and then on a
// starved machine (the race-detector suite on two cores, four writers on
// four rows through two stores); sixteen, with pauses growing to 16 ms,
// give a contended row a quarter of a second.
const maxAttempts = 16

// Store is the JetStream key-value implementation of cursor.Store.
//
// Lock order: a key's lock (keyLocks, serialising this store's writes to
// one key, since the server admits one in-flight expected-revision check
// per subject; held across the write, and never two at once) → idx.mu →
// wb.mu, and watching → idx.mu → wb.mu. idx.mu and wb.mu are never held
// across I/O.
type Store struct {
	nc               *nats.Conn // for the bucket's leader elections
	regs, idem, meta jetstream.KeyValue
	tokens           *tokenSet
	now              func() time.Time
	log              *slog.Logger
	flushConcurrency int
	dueFilter        func(id string) bool
	onDue            func(ns string)

	keyLocks [256]sync.Mutex
	idx      index
	wb       writeBehind
	// watching is held while the watch applies a change; a test holds it
	// to make this store's view lag behind another writer's, as a slow
	// or partitioned bridge's would.
	watching sync.Mutex

	// follower applies the bucket's changes to idx (see startWatch).
	follower  *kvwatch.Follower
	fenced    atomic.Uint64
	conflicts atomic.Uint64
	// closing is set before the watch is stopped on purpose; a watch that
	// ends without it has lost the bucket, and says so.
	closing atomic.Bool

	stopWatch   context.CancelFunc
	watchDone   chan struct{}
	stopFlusher context.CancelFunc
	flusherDone chan struct{}
	closeOnce   sync.Once
	closeErr    error
}

var _ cursor.Store = (*Store)(nil)

// Option configures Open.
type Option func(*options)

type options struct {
	prefix           string
	replicas         int
	clock            func() time.Time
	flushInterval    time.Duration
	flushConcurrency int
	logger           *slog.Logger
	dueFilter        func(id string) bool
	onDue            func(ns string)
	shards           int
	shardOf          func(id string) int
}

// WithShardWeights has the store count, in its index, the registrations
// not completed in each of shards shards (shardOf maps an id to one), for
// ShardWeights: the bridges divide their work by registrations, and the
// index every bridge keeps of the bucket is what they agree on.
func WithShardWeights(shards int, shardOf func(id string) int) Option {
	return func(o *options) { o.shards, o.shardOf = shards, shardOf }
}

// WithPrefix names the buckets <prefix>_regs, <prefix>_idem and
// <prefix>_meta (default DefaultPrefix).
func WithPrefix(p string) Option { return func(o *options) { o.prefix = p } }

// WithReplicas sets the buckets' replicas (default DefaultReplicas).
func WithReplicas(n int) Option { return func(o *options) { o.replicas = n } }

// WithClock sets the clock the store stamps rows and keys with.
func WithClock(now func() time.Time) Option {
	return func(o *options) {
		if now != nil {
			o.clock = now
		}
	}
}

// WithFlushInterval starts a goroutine that flushes acknowledged progress
// every d; Close stops it and flushes once more. Zero leaves flushing to
// the caller.
func WithFlushInterval(d time.Duration) Option { return func(o *options) { o.flushInterval = d } }

// WithFlushConcurrency bounds the keys one Flush writes at once (default
// DefaultFlushConcurrency; 1 writes them one by one).
func WithFlushConcurrency(n int) Option {
	return func(o *options) {
		if n > 0 {
			o.flushConcurrency = n
		}
	}
}

// WithDueFilter makes Due return only the rows keep reports true for, so
// a bridge sharing the store with others asks for the registrations it
// delivers and is not handed, earliest first, rows it must skip — which
// would crowd its own out of every limit. keep must not block.
func WithDueFilter(keep func(id string) bool) Option {
	return func(o *options) { o.dueFilter = keep }
}

// WithOnDue calls fn, from the watch, when another writer makes a row
// that passes the due filter due now — a create, unpark or rewind made
// through another bridge — so a worker that sleeps until its next tick
// reads its due index at once. fn must not block.
func WithOnDue(fn func(ns string)) Option {
	return func(o *options) { o.onDue = fn }
}

// WithLogger is where the background flusher and the watch report trouble.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.logger = l
		}
	}
}

// Open creates the buckets when they are missing, reads every registration
// into the index and keeps it current with a watch until Close. ctx bounds
// only the opening. The caller keeps the connection behind js open until
// Close has returned.
func Open(ctx context.Context, js jetstream.JetStream, opts ...Option) (*Store, error) {
	o := options{prefix: DefaultPrefix, replicas: DefaultReplicas, clock: time.Now,
		flushConcurrency: DefaultFlushConcurrency, logger: slog.Default()}
	for _, opt := range opts {
		opt(&o)
	}
	s := &Store{
		nc:               js.Conn(),
		now:              func() time.Time { return o.clock().UTC() },
		log:              o.logger,
		flushConcurrency: o.flushConcurrency,
		dueFilter:        o.dueFilter,
		onDue:            o.onDue,
		idx:              newIndex(),
	}
	if o.shardOf != nil && o.shards > 0 {
		s.idx.shardOf, s.idx.perShard = o.shardOf, make([]int, o.shards)
	}
	var err error
	for _, b := range []struct {
		kv   *jetstream.KeyValue
		name string
	}{{&s.regs, "_regs"}, {&s.idem, "_idem"}, {&s.meta, "_meta"}} {
		cfg := jetstream.KeyValueConfig{Bucket: o.prefix + b.name, History: 1, Replicas: o.replicas}
		if *b.kv, err = openBucket(ctx, js, cfg, s.log); err != nil {
			return nil, fmt.Errorf("kvstore: bucket %s (%d replicas): %w", cfg.Bucket, o.replicas, err)
		}
	}
	tcfg := jetstream.KeyValueConfig{Bucket: o.prefix + "_tokens", History: 1, Replicas: o.replicas}
	if s.tokens, err = openTokens(ctx, js, tcfg, s.log); err != nil {
		return nil, err
	}
	if err := s.startWatch(ctx); err != nil {
		s.tokens.close()
		return nil, err
	}
	if o.flushInterval > 0 {
		fctx, cancel := context.WithCancel(context.Background())
		s.stopFlusher, s.flusherDone = cancel, make(chan struct{})
		go s.runFlusher(fctx, o.flushInterval)
	}
	return s, nil
}

// startWatch builds the index from the bucket's current values and starts
// the goroutine that applies later changes. Deletes are watched too: they
// drop rows.
func (s *Store) startWatch(ctx context.Context) error {
	wctx, cancel := context.WithCancel(context.Background())
	w, err := s.regs.WatchAll(wctx)
	if err != nil {
		cancel()
		return fmt.Errorf("kvstore: watch %s: %w", s.regs.Bucket(), err)
	}
	s.stopWatch, s.watchDone = cancel, make(chan struct{})
	ready := make(chan struct{})
	s.follower = &kvwatch.Follower{KV: s.regs, Conn: s.nc, Log: s.log, Ready: func() { close(ready) },
		Apply: func(e jetstream.KeyValueEntry) {
			s.watching.Lock()
			defer s.watching.Unlock()
			s.applyWatched(e)
		}}
	go s.runWatch(wctx, w)
	select {
	case <-ready:
		return nil
	case <-ctx.Done():
		s.haltWatch(w)
		return fmt.Errorf("kvstore: read %s: %w", s.regs.Bucket(), ctx.Err())
	}
}

// runWatch applies the bucket's changes until the watch ends (see
// kvwatch.Follower).
func (s *Store) runWatch(ctx context.Context, w jetstream.KeyWatcher) {
	defer close(s.watchDone)
	s.follower.Run(ctx, w)
	if !s.closing.Load() {
		s.log.Error("kvstore: the watch of the registrations ended (connection closed?); Due, Routes and List no longer see other bridges' writes",
			"bucket", s.regs.Bucket())
	}
}

// applyWatched folds one change of the bucket into the index.
func (s *Store) applyWatched(e jetstream.KeyValueEntry) {
	id, err := decodeKey(e.Key())
	if err != nil {
		s.log.Error("kvstore: a key in the bucket is not a registration id; skipped", "key", e.Key(), "error", err)
		return
	}
	if e.Operation() != jetstream.KeyValuePut {
		s.idx.removeWatched(id, e.Revision())
		return
	}
	r, err := decodeRow(id, e.Value(), e.Revision())
	if err != nil {
		s.log.Error("kvstore: a registration is unreadable; skipped", "id", id, "error", err)
		return
	}
	s.learn(r)
	s.dueNow(r)
}

// dueNow tells onDue of a watched row due now that this store may serve.
// This store's own writes come back through the watch as well; telling
// of them costs a read of the in-memory due index, nothing more.
func (s *Store) dueNow(r *row) {
	if s.onDue == nil || !isDue(&r.Registration) || r.NextAttemptAt.After(s.now()) {
		return
	}
	if s.dueFilter == nil || s.dueFilter(r.ID) {
		s.onDue(r.Namespace)
	}
}

func (s *Store) haltWatch(w jetstream.KeyWatcher) {
	s.closing.Store(true)
	_ = w.Stop()
	s.stopWatch()
	<-s.watchDone
}

// ShardWeights is how many registrations not completed each shard holds
// (see WithShardWeights), as this store's index of the bucket has them;
// nil without WithShardWeights.
func (s *Store) ShardWeights() []int { return s.idx.shardWeights() }

// FencedWrites counts cursor writes refused because another writer moved
// the row past this store's view (a newer cursor, a rewind, a delete): the
// progress is dropped, and the other writer's cursor stands.
func (s *Store) FencedWrites() uint64 { return s.fenced.Load() }

// Conflicts counts writes the server refused because another writer had
// changed the row since this store read it; each was retried on a fresh
// read or, for a cursor write, fenced.
func (s *Store) Conflicts() uint64 { return s.conflicts.Load() }

// Pending is how many registrations have acknowledged progress not yet
// written: what a crash now would repeat.
func (s *Store) Pending() int { return s.wb.size() }

// Close stops the background flusher, flushes and stops the watch.
// Progress that cannot be flushed is lost and will be delivered again; the
// error says so. Close is idempotent.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		if s.stopFlusher != nil {
			s.stopFlusher()
			<-s.flusherDone
		}
		err := s.Flush(context.Background())
		if err != nil {
			err = fmt.Errorf("%w (%d registrations will repeat deliveries)", err, s.wb.size())
		}
		s.closing.Store(true)
		s.stopWatch()
		<-s.watchDone
		s.tokens.close()
		s.closeErr = err
	})
	return s.closeErr
}

// closeWithoutFlush stops the store as a crash would, keeping nothing of
// its pending progress. For tests.
func (s *Store) closeWithoutFlush() {
	s.closeOnce.Do(func() {
		if s.stopFlusher != nil {
			s.stopFlusher()
			<-s.flusherDone
		}
		s.closing.Store(true)
		s.stopWatch()
		<-s.watchDone
		s.tokens.close()
	})
}

func (s *Store) runFlusher(ctx context.Context, every time.Duration) {
	defer close(s.flusherDone)
	cursor.FlushEvery(ctx, every, s.Flush, s.Pending, s.log, "bucket", s.regs.Bucket())
}

// GetMeta returns the value PutMeta stored under key, or nil.
func (s *Store) GetMeta(ctx context.Context, key string) ([]byte, error) {
	if key == "" {
		return nil, errors.New("kvstore: meta key is empty")
	}
	e, err := s.meta.Get(ctx, encodeKey(key))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("kvstore: meta %q: %w", key, err)
	}
	return e.Value(), nil
}

// PutMeta stores val under key; nil deletes it. Meta values are the
// bridge's own bookkeeping, last writer wins, so this is a plain put.
func (s *Store) PutMeta(ctx context.Context, key string, val []byte) error {
	if key == "" {
		return errors.New("kvstore: meta key is empty")
	}
	var err error
	if val == nil {
		err = s.meta.Delete(ctx, encodeKey(key))
	} else {
		_, err = s.meta.Put(ctx, encodeKey(key), val)
	}
	if err != nil {
		return fmt.Errorf("kvstore: meta %q: %w", key, err)
	}
	return nil
}

// keyLock is the lock serialising this store's writes to id.
func (s *Store) keyLock(id string) *sync.Mutex {
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	return &s.keyLocks[h.Sum32()%uint32(len(s.keyLocks))]
}

// encodeKey turns an id or idempotency key into a KV key: base64url
// without padding is one token of [-_A-Za-z0-9], valid for every id the
// admin API accepts ("a..b", ".x") and never empty for a non-empty id.
func encodeKey(id string) string { return base64.RawURLEncoding.EncodeToString([]byte(id)) }

func decodeKey(k string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(k)
	return string(b), err
}

// record is a registration as stored. Incarnation tells a registration
// from one created later under the same id, and Rewinds the cursor before
// a rewind from the one after it, so progress acknowledged on the one
// never lands on the other.
type record struct {
	Incarnation uint64 `json:"incarnation"`
	Rewinds     uint64 `json:"rewinds,omitempty"`
	IdemKey     string `json:"idemKey,omitempty"`
	IdemHash    []byte `json:"idemHash,omitempty"`
	cursor.Registration
}

func encodeRow(r *row) ([]byte, error) {
	v, err := json.Marshal(record{Incarnation: r.inc, Rewinds: r.epoch, IdemKey: r.idemKey, IdemHash: r.idemHash, Registration: r.Registration})
	if err != nil {
		return nil, fmt.Errorf("kvstore: encode registration %q: %w", r.ID, err)
	}
	return v, nil
}

func decodeRow(id string, v []byte, rev uint64) (*row, error) {
	var rec record
	if err := json.Unmarshal(v, &rec); err != nil {
		return nil, fmt.Errorf("kvstore: registration %q (revision %d) is unreadable: %w", id, rev, err)
	}
	rec.ID = id
	return &row{Registration: rec.Registration, inc: rec.Incarnation, epoch: rec.Rewinds, rev: rev,
		idemKey: rec.IdemKey, idemHash: rec.IdemHash}, nil
}

// newIncarnation is random: bridges creating rows concurrently share no
// counter, and 64 random bits do not collide between two rows of one id.
func newIncarnation() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return binary.BigEndian.Uint64(b[:]) | 1
}

// isConflict reports a write the server refused because the key's
// revision moved (replicated buckets answer with another code; nats.go
// maps both).
func isConflict(err error) bool {
	return errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists)
}

func notFound(id string) error {
	return fmt.Errorf("kvstore: registration %q: %w", id, cursor.ErrNotFound)
}

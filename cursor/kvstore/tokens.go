package kvstore

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetstream-bridge/bridge/cursor"
	"github.com/jetstream-bridge/bridge/internal/kvwatch"
)

var _ cursor.Tokens = (*Store)(nil)

// tokenSet keeps the scoped access tokens of the bucket <prefix>_tokens
// (key: the encoded name, value: JSON cursor.Token) in an in-memory index,
// fed by a watch of the bucket and by this store's own writes, so a token
// made or revoked through any bridge is found or refused by every other
// within cursor.LookupLag — in practice the watch's few milliseconds.
//
// Writes and the watch may deliver one change in either order, so the
// index takes a put only at a revision newer than what it holds for the
// name, and a name this store deleted keeps a tombstone (the revision it
// had) until the watch passes the delete: a late watch event of the old
// token can never bring a revoked one back.
type tokenSet struct {
	kv  jetstream.KeyValue
	idx *cursor.TokenIndex
	log *slog.Logger

	mu    sync.Mutex
	revs  map[string]uint64
	tombs map[string]uint64

	stop context.CancelFunc
	done chan struct{}
	// closing is set before the watch is stopped on purpose; a watch that
	// ends without it would leave revocations through other bridges
	// unseen, and says so.
	closing atomic.Bool
	// endConfirm stops the checks of the tokens against the bucket
	// while the watch is being replaced; only the watch's goroutine
	// touches it.
	endConfirm context.CancelFunc
}

// openTokens binds the bucket and waits until the watch has read every
// token stored.
func openTokens(ctx context.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig, log *slog.Logger) (*tokenSet, error) {
	kv, err := openBucket(ctx, js, cfg, log)
	if err != nil {
		return nil, fmt.Errorf("kvstore: bucket %s (%d replicas): %w", cfg.Bucket, cfg.Replicas, err)
	}
	ts := &tokenSet{kv: kv, idx: cursor.NewTokenIndex(), log: log,
		revs: map[string]uint64{}, tombs: map[string]uint64{}, done: make(chan struct{})}
	wctx, cancel := context.WithCancel(context.Background())
	w, err := kv.WatchAll(wctx)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("kvstore: watch %s: %w", kv.Bucket(), err)
	}
	ts.stop = cancel
	ready := make(chan struct{})
	go ts.run(wctx, js.Conn(), w, ready)
	select {
	case <-ready:
		return ts, nil
	case <-ctx.Done():
		ts.close()
		return nil, fmt.Errorf("kvstore: read %s: %w", kv.Bucket(), ctx.Err())
	}
}

// run applies the bucket's changes until the watch ends (see
// kvwatch.Follower).
func (ts *tokenSet) run(ctx context.Context, nc *nats.Conn, w jetstream.KeyWatcher, ready chan struct{}) {
	defer close(ts.done)
	f := kvwatch.Follower{KV: ts.kv, Conn: nc, Log: ts.log, Ready: func() { close(ready) },
		Apply: ts.applyWatched, Opening: ts.opening}
	f.Run(ctx, w)
	if !ts.closing.Load() {
		ts.log.Error("kvstore: the watch of the tokens ended (connection closed?); tokens made or revoked through other bridges are not seen here",
			"bucket", ts.kv.Bucket())
	}
}

// applyWatched folds one change of the bucket into the index.
func (ts *tokenSet) applyWatched(e jetstream.KeyValueEntry) {
	name, err := decodeKey(e.Key())
	if err != nil {
		ts.log.Error("kvstore: a key of the tokens bucket is not a token name; skipped", "bucket", ts.kv.Bucket(), "error", err)
		return
	}
	if e.Operation() != jetstream.KeyValuePut {
		ts.forget(name, e.Revision())
		return
	}
	var t cursor.Token
	if err := json.Unmarshal(e.Value(), &t); err != nil {
		ts.log.Error("kvstore: a token is unreadable; skipped", "name", name, "error", err)
		return
	}
	ts.learn(t, e.Revision())
}

func (ts *tokenSet) close() {
	ts.closing.Store(true)
	ts.stop()
	<-ts.done
}

// learn indexes t at rev unless the index holds that revision or a newer
// one, or this store deleted it since.
func (ts *tokenSet) learn(t cursor.Token, rev uint64) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if rev <= ts.tombs[t.Name] || rev <= ts.revs[t.Name] {
		return
	}
	ts.revs[t.Name] = rev
	ts.idx.Put(t)
}

// forget drops name for a delete at rev.
func (ts *tokenSet) forget(name string, rev uint64) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.tombs[name] < rev {
		delete(ts.tombs, name)
	}
	if ts.revs[name] < rev {
		delete(ts.revs, name)
		ts.idx.Remove(name)
	}
}

// CreateToken stores t; a name taken through any bridge is
// cursor.ErrTokenExists.
func (s *Store) CreateToken(ctx context.Context, t cursor.Token) error {
	v, err := json.Marshal(&t)
	if err != nil {
		return fmt.Errorf("kvstore: encode token %q: %w", t.Name, err)
	}
	rev, err := s.tokens.kv.Create(ctx, encodeKey(t.Name), v)
	switch {
	case errors.Is(err, jetstream.ErrKeyExists):
		return cursor.ErrTokenExists
	case err != nil:
		return unavailable(fmt.Errorf("kvstore: create token %q: %w", t.Name, err))
	}
	s.tokens.learn(t, rev)
	return nil
}

// ListTokens returns every token in name order, as the index has them.
func (s *Store) ListTokens(ctx context.Context) ([]cursor.Token, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return s.tokens.idx.All(), nil
}

// DeleteToken removes the token named name from the bucket. This store
// refuses it from before the delete is sent; the others when their watch
// brings the delete.
func (s *Store) DeleteToken(ctx context.Context, name string) (bool, error) {
	ts := s.tokens
	key := encodeKey(name)
	e, err := ts.kv.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return ts.drop(name, 0), nil
	case err != nil:
		return false, unavailable(fmt.Errorf("kvstore: read token %q: %w", name, err))
	}
	ts.drop(name, e.Revision())
	if err := ts.kv.Delete(ctx, key); err != nil {
		return false, unavailable(fmt.Errorf("kvstore: delete token %q: %w", name, err))
	}
	return true, nil
}

// drop takes name out of the index and keeps a tombstone at rev.
func (ts *tokenSet) drop(name string, rev uint64) bool {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.dropLocked(name, rev)
}

func (ts *tokenSet) dropLocked(name string, rev uint64) bool {
	ts.tombs[name] = max(ts.tombs[name], rev, ts.revs[name])
	delete(ts.revs, name)
	return ts.idx.Remove(name)
}

// confirmEvery is how often each token is read from the bucket while the
// watch is being replaced: well within cursor.LookupLag.
const confirmEvery = 250 * time.Millisecond

// opening checks every token in the index against the bucket, every
// confirmEvery, from when the watch starts being replaced (on is true)
// until the new watch runs. After a server's loss the old watch's
// consumer may have died with it, and until the cluster has elected its
// meta leader no new consumer can be placed: seconds in which a token
// revoked through another bridge would still be taken here. A read of a
// key needs only the bucket's leader, which answers meanwhile.
func (ts *tokenSet) opening(on bool) {
	if ts.endConfirm != nil {
		ts.endConfirm()
		ts.endConfirm = nil
	}
	if on {
		ctx, cancel := context.WithCancel(context.Background())
		ts.endConfirm = cancel
		go ts.confirm(ctx)
	}
}

// confirm drops each token gone from the bucket, every confirmEvery,
// until ctx ends.
func (ts *tokenSet) confirm(ctx context.Context) {
	t := time.NewTicker(confirmEvery)
	defer t.Stop()
	for {
		for _, tok := range ts.idx.All() {
			if !ts.confirmOne(ctx, tok.Name) {
				break // the bucket does not answer: the next pass asks again
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// confirmOne reads name from the bucket and drops it from the index when
// the bucket has it no more, unless a newer revision was learnt
// meanwhile. It reports whether the bucket answered.
func (ts *tokenSet) confirmOne(ctx context.Context, name string) bool {
	ts.mu.Lock()
	rev := ts.revs[name]
	ts.mu.Unlock()
	rctx, cancel := context.WithTimeout(ctx, confirmEvery)
	defer cancel()
	_, err := ts.kv.Get(rctx, encodeKey(name))
	if !errors.Is(err, jetstream.ErrKeyNotFound) {
		return err == nil
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.revs[name] == rev {
		if ts.dropLocked(name, rev) {
			ts.log.Info("kvstore: a token gone from the bucket is refused from now on; its delete had not come through the watch, which is being replaced", "name", name)
		}
	}
	return true
}

// LookupToken answers from memory.
func (s *Store) LookupToken(sum [sha256.Size]byte) (cursor.Token, bool) {
	return s.tokens.idx.Lookup(sum)
}

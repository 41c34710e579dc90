package kvstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetstream-bridge/bridge/cursor"
	"github.com/jetstream-bridge/bridge/internal/ask"
)

// idemRecord is what an Idempotency-Key remembers, as in the bolt store.
type idemRecord struct {
	Hash      []byte    `json:"hash"`
	ID        string    `json:"id"`
	Inc       uint64    `json:"inc"`
	Answer    []byte    `json:"answer,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
}

// Create stores a new, active registration as cursor.DB.Create does. The
// row is created first and the idempotency key beside it, each with
// Create, so a concurrent create of the same id (through any bridge) is
// ErrExists and one of the same key loses the key's Create: its row is
// taken back and the winner's answer replayed (or the conflict reported).
// The row names the key it was created with, so a create of the same id
// and key that finds the row before the key replays too (see
// createdWith). The answer is rendered before anything is written, so a
// failing one stores nothing.
func (s *Store) Create(ctx context.Context, r cursor.Registration, idem *cursor.Idempotency) (cursor.Registration, []byte, error) {
	if err := cursor.CheckNew(&r, idem); err != nil {
		return cursor.Registration{}, nil, err
	}
	if idem != nil {
		if out, answer, done, err := s.replay(ctx, r.ID, idem); done || err != nil {
			return out, answer, err
		}
	}
	now := s.now()
	r = cursor.Fresh(r, now)
	var answer []byte
	if idem != nil && idem.Answer != nil {
		var err error
		if answer, err = idem.Answer(r); err != nil {
			return cursor.Registration{}, nil, fmt.Errorf("kvstore: create %q: render the idempotent answer: %w", r.ID, err)
		}
	}
	nw := &row{Registration: r, inc: newIncarnation()}
	if idem == nil {
		return r, nil, s.insert(ctx, nw)
	}
	nw.idemKey, nw.idemHash = idem.Key, idem.Hash
	if err := s.insert(ctx, nw); err != nil {
		if !errors.Is(err, cursor.ErrExists) {
			return cursor.Registration{}, nil, err
		}
		if out, answer, done, werr := s.createdWith(ctx, r.ID, idem); done || werr != nil {
			return out, answer, werr
		}
		return cursor.Registration{}, nil, err
	}
	return s.keyCreate(ctx, nw, idem, idemRecord{Hash: idem.Hash, ID: r.ID, Inc: nw.inc, Answer: answer, CreatedAt: now})
}

// keyCreate stores the idempotency key of the row nw just created. When
// the key is taken by another create, nw is deleted again and that
// create's answer replayed (or the conflict reported) — unless the key
// names nw, stored by a create that found nw first (see createdWith).
func (s *Store) keyCreate(ctx context.Context, nw *row, idem *cursor.Idempotency, rec idemRecord) (cursor.Registration, []byte, error) {
	err := s.storeKey(ctx, idem, rec)
	if err == nil {
		return nw.Registration, rec.Answer, nil
	}
	if isConflict(err) {
		if _, ans, done, rerr := s.replay(ctx, nw.ID, idem); rerr == nil && done && s.keyNames(ctx, idem, nw) {
			return nw.Registration, ans, nil
		}
	}
	err = fmt.Errorf("kvstore: create %q: store its idempotency key: %w", nw.ID, err)
	if uerr := s.removeLocked(ctx, nw.ID, nw.rev); uerr != nil {
		return cursor.Registration{}, nil, errors.Join(err, uerr)
	}
	if isConflict(err) {
		if out, answer, done, rerr := s.replay(ctx, nw.ID, idem); done || rerr != nil {
			return out, answer, rerr
		}
	}
	return cursor.Registration{}, nil, err
}

// storeKey creates idem's key with rec; a key stored already is a
// conflict (ErrKeyExists).
func (s *Store) storeKey(ctx context.Context, idem *cursor.Idempotency, rec idemRecord) error {
	v, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("kvstore: encode idempotency key for %q: %w", rec.ID, err)
	}
	_, err = s.idem.Create(ctx, encodeKey(idem.Key), v)
	return err
}

// keyNames reports whether idem's stored key names the row nw.
func (s *Store) keyNames(ctx context.Context, idem *cursor.Idempotency, nw *row) bool {
	e, err := s.idem.Get(ctx, encodeKey(idem.Key))
	if err != nil {
		return false
	}
	var rec idemRecord
	return json.Unmarshal(e.Value(), &rec) == nil && rec.ID == nw.ID && rec.Inc == nw.inc
}

// idemWait bounds how long a create that found its id taken by a create
// with the same idempotency key waits for that create to store the key.
const idemWait = 2 * time.Second

// createdWith answers a create whose id is taken, when the row was
// created with the same idempotency key: another hash is
// ErrIdempotencyConflict; the same hash is a replay of the create that
// won, whose key is stored right after its row. It waits for that key up
// to idemWait; a creator that stopped between its two writes never stores
// it, and then this create stores the key itself, rendering the answer
// from the row as it is now.
func (s *Store) createdWith(ctx context.Context, id string, idem *cursor.Idempotency) (cursor.Registration, []byte, bool, error) {
	cur, reg, err := s.current(ctx, id)
	if err != nil || cur.idemKey != idem.Key {
		return cursor.Registration{}, nil, false, nil
	}
	if !bytes.Equal(cur.idemHash, idem.Hash) {
		return cursor.Registration{}, nil, false, fmt.Errorf("kvstore: create %q: %w", id, cursor.ErrIdempotencyConflict)
	}
	deadline := time.Now().Add(idemWait)
	for {
		if out, answer, done, err := s.replay(ctx, id, idem); done || err != nil {
			return out, answer, done, err
		}
		if time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return cursor.Registration{}, nil, false, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	var answer []byte
	if idem.Answer != nil {
		if answer, err = idem.Answer(reg); err != nil {
			return cursor.Registration{}, nil, false, fmt.Errorf("kvstore: create %q: render the idempotent answer: %w", id, err)
		}
	}
	err = s.storeKey(ctx, idem, idemRecord{Hash: idem.Hash, ID: id, Inc: cur.inc, Answer: answer, CreatedAt: s.now()})
	if isConflict(err) {
		return s.replay(ctx, id, idem)
	}
	if err != nil {
		return cursor.Registration{}, nil, false, fmt.Errorf("kvstore: create %q: store its idempotency key: %w", id, err)
	}
	return reg, answer, true, nil
}

// insert creates nw's key and indexes it.
func (s *Store) insert(ctx context.Context, nw *row) error {
	v, err := encodeRow(nw)
	if err != nil {
		return err
	}
	mu := s.keyLock(nw.ID)
	mu.Lock()
	defer mu.Unlock()
	rev, err := s.regs.Create(ctx, encodeKey(nw.ID), v)
	if isConflict(err) {
		return fmt.Errorf("kvstore: registration %q: %w", nw.ID, cursor.ErrExists)
	}
	if err != nil {
		return fmt.Errorf("kvstore: create %q: %w", nw.ID, err)
	}
	nw.rev = rev
	s.idx.mu.Lock()
	defer s.idx.mu.Unlock()
	s.wb.forget(nw.ID)
	s.idx.put(nw)
	return nil
}

// replay answers a create whose idempotency key is already stored: done
// with the stored answer and the registration it created (zero when that
// is gone), or ErrIdempotencyConflict for another hash.
func (s *Store) replay(ctx context.Context, id string, idem *cursor.Idempotency) (cursor.Registration, []byte, bool, error) {
	e, err := s.idem.Get(ctx, encodeKey(idem.Key))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return cursor.Registration{}, nil, false, nil
	}
	if err != nil {
		return cursor.Registration{}, nil, false, fmt.Errorf("kvstore: create %q: read its idempotency key: %w", id, err)
	}
	var rec idemRecord
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		return cursor.Registration{}, nil, false, fmt.Errorf("kvstore: an idempotency key record is unreadable: %w", err)
	}
	if !bytes.Equal(rec.Hash, idem.Hash) {
		return cursor.Registration{}, nil, false, fmt.Errorf("kvstore: create %q: %w", id, cursor.ErrIdempotencyConflict)
	}
	r, reg, err := s.current(ctx, rec.ID)
	if err != nil || r.inc != rec.Inc {
		return cursor.Registration{}, rec.Answer, true, nil
	}
	return reg, rec.Answer, true, nil
}

// read gets id's row from the bucket itself, the freshest view a write
// can start from, and refreshes the index with it. The caller holds id's
// key lock, so the row cannot hold progress of a write still in flight
// (see learn): a write of this store to id either settled or was refused.
//
// A key the read does not find leaves the index alone: on a cluster the
// watch can deliver a create before the stream leader answers reads of
// it, and dropping the row then left a new registration out of this
// bridge's due index and routes for good, never delivered. Only a delete
// marker from the watch, or this store's own delete, removes a row.
func (s *Store) read(ctx context.Context, id string) (row, error) {
	e, err := s.get(ctx, encodeKey(id))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return row{}, notFound(id)
	}
	if err != nil {
		return row{}, fmt.Errorf("kvstore: read %q: %w", id, unavailable(err))
	}
	r, err := decodeRow(id, e.Value(), e.Revision())
	if err != nil {
		return row{}, err
	}
	s.idx.mu.Lock()
	defer s.idx.mu.Unlock()
	s.idx.put(r)
	return *r, nil
}

// get reads key from the bucket's leader, asking again after
// readAttemptWait without an answer (see package ask): a read sent while
// the bucket elected a leader held a turn for five seconds after the new
// leader was already serving.
func (s *Store) get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	return ask.Again(ctx, readAttempts, readAttemptWait,
		func(err error) bool { return errors.Is(unavailable(err), cursor.ErrUnavailable) },
		func(ctx context.Context) (jetstream.KeyValueEntry, error) { return s.regs.Get(ctx, key) })
}

// readAttempts × readAttemptWait is the longest a read waits, as one
// request did before.
const (
	readAttempts    = 5
	readAttemptWait = time.Second
)

// learn puts a row the watch delivered into the index, except while this
// store has a write of that key in flight: the row may be that write's,
// holding the progress readers still overlay until the write settles, and
// would count it twice. The write puts its own result; a refused one
// re-reads.
func (s *Store) learn(r *row) {
	s.idx.mu.Lock()
	defer s.idx.mu.Unlock()
	if !s.wb.writing(r.ID) {
		s.idx.put(r)
	}
}

// current is id's registration as Get and a replayed Create answer it:
// read from the bucket, with this store's progress overlaid.
func (s *Store) current(ctx context.Context, id string) (row, cursor.Registration, error) {
	mu := s.keyLock(id)
	mu.Lock()
	defer mu.Unlock()
	r, err := s.read(ctx, id)
	if err != nil {
		return row{}, cursor.Registration{}, err
	}
	return r, s.overlay(r), nil
}

// change edits a row for mutate and reports whether it changed.
type change func(r *row, now time.Time) (bool, error)

// mutate is every explicit write to one registration. Holding id's key
// lock, it folds the registration's acknowledged progress in (so that
// progress can never land after, and over, this write), applies ch and
// writes the row with the revision it was read at. Refused because
// another writer moved the row, it reads the row again and starts over,
// at most maxAttempts times.
func (s *Store) mutate(ctx context.Context, id string, ch change) (cursor.Registration, error) {
	if err := cursor.CheckID(id); err != nil {
		return cursor.Registration{}, err
	}
	if err := ctx.Err(); err != nil {
		return cursor.Registration{}, err
	}
	mu := s.keyLock(id)
	mu.Lock()
	defer mu.Unlock()
	old, ok := s.idx.get(id)
	if !ok {
		var err error
		if old, err = s.read(ctx, id); err != nil {
			return cursor.Registration{}, err
		}
	}
	p, claimed := s.wb.claim(id)
	for attempt := 1; ; attempt++ {
		nw, err := s.edit(old, p, claimed, ch)
		if err != nil || nw == nil {
			s.wb.settle(id, err != nil)
			if nw == nil && err == nil {
				return s.overlay(old), nil
			}
			return cursor.Registration{}, err
		}
		err = s.write(ctx, nw, old.rev)
		if err == nil {
			return nw.Registration, nil
		}
		if !isConflict(err) || attempt == maxAttempts {
			s.wb.settle(id, true)
			return cursor.Registration{}, fmt.Errorf("kvstore: write %q: %w", id, err)
		}
		s.conflicts.Add(1)
		if err := pause(ctx, attempt); err != nil {
			s.wb.settle(id, true)
			return cursor.Registration{}, err
		}
		if old, err = s.read(ctx, id); err != nil {
			s.wb.settle(id, !errors.Is(err, cursor.ErrNotFound))
			return cursor.Registration{}, err
		}
	}
}

// edit applies claimed progress (when it belongs to old's incarnation) and
// ch to a copy of old. It returns nil when there is nothing to write.
func (s *Store) edit(old row, p progress, claimed bool, ch change) (*row, error) {
	nw := old
	folded := claimed && p.on(&old)
	if folded {
		p.apply(&nw.Registration)
	}
	now := s.now()
	changed, err := ch(&nw, now)
	if err != nil {
		return nil, err
	}
	if changed {
		nw.UpdatedAt = now
	}
	if !changed && !folded {
		return nil, nil
	}
	return &nw, nil
}

// write stores nw over revision rev and, in one critical section, indexes
// it and settles its claimed progress as written. The caller holds nw's
// key lock.
func (s *Store) write(ctx context.Context, nw *row, rev uint64) error {
	v, err := encodeRow(nw)
	if err != nil {
		return err
	}
	nrev, err := s.regs.Update(ctx, encodeKey(nw.ID), v, rev)
	if err != nil {
		return err
	}
	nw.rev = nrev
	s.idx.mu.Lock()
	defer s.idx.mu.Unlock()
	s.idx.put(nw)
	s.wb.settle(nw.ID, false)
	return nil
}

// Replace swaps the Config of c.ID as cursor.DB.Replace does.
func (s *Store) Replace(ctx context.Context, c cursor.Config, at time.Time) (cursor.Registration, error) {
	return s.mutate(ctx, c.ID, func(r *row, now time.Time) (bool, error) {
		return true, cursor.ApplyReplace(&r.Registration, c, at, now)
	})
}

// Retry counts one failure and schedules the next attempt at next (now
// when zero); a parked or completed row records it but is not scheduled.
func (s *Store) Retry(ctx context.Context, id string, next time.Time, lastErr string) error {
	_, err := s.mutate(ctx, id, func(r *row, now time.Time) (bool, error) {
		cursor.ApplyRetry(&r.Registration, next, now, lastErr)
		return true, nil
	})
	return err
}

// Park stops delivery, keeping the cursor and counting the failure; a
// completed row is left as it is.
func (s *Store) Park(ctx context.Context, id string, lastErr string) error {
	_, err := s.mutate(ctx, id, func(r *row, _ time.Time) (bool, error) {
		return cursor.ApplyPark(&r.Registration, lastErr), nil
	})
	return err
}

// Unpark makes a parked row active, with no failures, due at `at`; false,
// and no change, when it was not parked.
func (s *Store) Unpark(ctx context.Context, id string, at time.Time) (bool, error) {
	unparked := false
	_, err := s.mutate(ctx, id, func(r *row, now time.Time) (bool, error) {
		unparked = cursor.ApplyUnpark(&r.Registration, at, now) // set afresh on every attempt
		return unparked, nil
	})
	return err == nil && unparked, err
}

// Rewind sets the cursor to seq exactly, as cursor.DB.Rewind does.
func (s *Store) Rewind(ctx context.Context, id string, seq uint64, at time.Time) (cursor.Registration, error) {
	return s.mutate(ctx, id, func(r *row, now time.Time) (bool, error) {
		cursor.ApplyRewind(&r.Registration, seq, at, now)
		r.epoch++
		return true, nil
	})
}

// Delete removes the registration and its unwritten progress; a missing
// one is not an error. Its idempotency key stays until Purge.
func (s *Store) Delete(ctx context.Context, id string) error {
	if err := cursor.CheckID(id); err != nil {
		return err
	}
	mu := s.keyLock(id)
	mu.Lock()
	defer mu.Unlock()
	for attempt := 1; ; attempt++ {
		old, err := s.read(ctx, id)
		if errors.Is(err, cursor.ErrNotFound) {
			s.wb.forget(id)
			return nil
		}
		if err != nil {
			return err
		}
		err = s.remove(ctx, id, old.rev)
		if err == nil || !isConflict(err) || attempt == maxAttempts {
			return err
		}
		s.conflicts.Add(1)
		if err := pause(ctx, attempt); err != nil {
			return err
		}
	}
}

// removeLocked deletes id's key if it is still at rev, taking the key's
// lock.
func (s *Store) removeLocked(ctx context.Context, id string, rev uint64) error {
	mu := s.keyLock(id)
	mu.Lock()
	defer mu.Unlock()
	return s.remove(ctx, id, rev)
}

// remove deletes id's key if it is still at rev, with its progress. The
// caller holds id's key lock.
func (s *Store) remove(ctx context.Context, id string, rev uint64) error {
	if err := s.regs.Delete(ctx, encodeKey(id), jetstream.LastRevision(rev)); err != nil {
		if isConflict(err) {
			return err
		}
		return fmt.Errorf("kvstore: delete %q: %w", id, err)
	}
	s.idx.mu.Lock()
	defer s.idx.mu.Unlock()
	s.idx.removeLocal(id, rev)
	s.wb.forget(id)
	return nil
}

// Advance records acknowledged progress in memory; Flush writes it. Get
// and List see it at once, Due too except that a row it wakes from idle
// is found once it is written — as in the bolt store. A window that
// breaks its invariant is refused (cursor.ErrInvalidWindow).
func (s *Store) Advance(ctx context.Context, id string, p cursor.Progress) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := cursor.CheckWindow(p); err != nil {
		return fmt.Errorf("kvstore: advance %q: %w", id, err)
	}
	pr := progress{Progress: p, at: s.now()}
	if s.wb.add(id, pr, true) {
		return nil
	}
	r, ok := s.idx.get(id)
	if !ok {
		var err error
		if r, _, err = s.current(ctx, id); err != nil {
			return err
		}
	}
	pr.inc, pr.epoch = r.inc, r.epoch
	s.wb.add(id, pr, false)
	return nil
}

// Flush writes every registration's acknowledged progress, at most
// flushConcurrency keys at once and one write at a time per key. Progress
// whose write failed stays pending for the next Flush; progress of a row
// deleted or overtaken by another writer is dropped and counted
// (FencedWrites).
func (s *Store) Flush(ctx context.Context) error {
	ids := s.wb.ids()
	if len(ids) == 0 {
		return nil
	}
	slices.Sort(ids)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		sem  = make(chan struct{}, s.flushConcurrency)
	)
	for _, id := range ids {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := s.flushOne(ctx, id); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return fmt.Errorf("kvstore: flush: %d of %d registrations not written: %w", len(errs), len(ids), errors.Join(errs...))
	}
	return nil
}

// flushOne writes id's progress with the revision the index holds. When
// refused it reads the row once more: a row deleted, recreated, rewound or
// already at or past the progress's cursor belongs to another writer now,
// and the progress is dropped and counted as fenced; otherwise it is
// applied to the fresh row (max of the cursors) and written again, at
// most maxAttempts times in all.
// A row the watch showed deleted, recreated or rewound drops the progress
// without a write (and is not counted: no write was refused).
func (s *Store) flushOne(ctx context.Context, id string) error {
	mu := s.keyLock(id)
	mu.Lock()
	defer mu.Unlock()
	p, ok := s.wb.claim(id)
	if !ok {
		return nil
	}
	old, ok := s.idx.get(id)
	if !ok || !p.on(&old) {
		s.wb.settle(id, false)
		return nil
	}
	for attempt := 1; ; attempt++ {
		nw := old
		p.apply(&nw.Registration)
		err := s.write(ctx, &nw, old.rev)
		if !isConflict(err) {
			return s.keepOnError(id, err)
		}
		s.conflicts.Add(1)
		if attempt == maxAttempts {
			return s.keepOnError(id, err)
		}
		if err := pause(ctx, attempt); err != nil {
			return s.keepOnError(id, err)
		}
		cur, err := s.read(ctx, id)
		switch {
		case errors.Is(err, cursor.ErrNotFound):
			s.fence(id)
			return nil
		case err != nil:
			return s.keepOnError(id, err)
		case !p.on(&cur) || cur.NextSeq >= p.NextSeq:
			s.fence(id)
			return nil
		}
		old = cur
	}
}

// pause waits a random while, longer with each attempt, before a write
// refused attempt times is tried again: writers that keep meeting on one
// key fall out of step instead of refusing each other to the end.
func pause(ctx context.Context, attempt int) error {
	t := time.NewTimer(rand.N(time.Duration(attempt) * time.Millisecond))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (s *Store) keepOnError(id string, err error) error {
	if err != nil {
		s.wb.settle(id, true)
		return fmt.Errorf("kvstore: write %q: %w", id, err)
	}
	return nil
}

func (s *Store) fence(id string) {
	s.fenced.Add(1)
	s.wb.settle(id, false)
}

// unavailable marks err as cursor.ErrUnavailable when it says the bucket
// did not answer in time (an election, a lost server, no responders), so
// the admin API answers 503 with the reason instead of 500.
func unavailable(err error) error {
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout),
		errors.Is(err, nats.ErrNoResponders), errors.Is(err, jetstream.ErrNoStreamResponse),
		errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, nats.ErrConnectionReconnecting):
		return fmt.Errorf("%w: %w", cursor.ErrUnavailable, err)
	}
	return err
}

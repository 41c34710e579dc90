package kvstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetstream-bridge/bridge/cursor"
	"github.com/jetstream-bridge/bridge/internal/kvwatch"
)

// overlay is r with the acknowledged progress not written yet, as the
// bolt store's readers see it.
func (s *Store) overlay(r row) cursor.Registration {
	if p, ok := s.wb.lookup(r.ID); ok && p.on(&r) {
		p.apply(&r.Registration)
	}
	return r.Registration
}

// Get reads the registration from the bucket, not from the index: a write
// made through another bridge is visible as soon as it has answered. It
// overlays this store's acknowledged progress, and waits for a write of
// this store to the key that is under way (one round trip at most).
func (s *Store) Get(ctx context.Context, id string) (cursor.Registration, error) {
	if err := cursor.CheckID(id); err != nil {
		return cursor.Registration{}, err
	}
	_, r, err := s.current(ctx, id)
	return r, err
}

// List pages registrations in id order from the index, as cursor.DB.List
// does.
func (s *Store) List(ctx context.Context, opt cursor.ListOptions) ([]cursor.Registration, string, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	s.catchUp(ctx)
	limit := opt.Limit
	if limit <= 0 {
		limit = cursor.DefaultListLimit
	}
	limit = min(limit, cursor.MaxListLimit)
	s.idx.mu.RLock()
	defer s.idx.mu.RUnlock()
	i, found := slices.BinarySearch(s.idx.ids, max(opt.After, opt.Prefix))
	if found && opt.After >= opt.Prefix && opt.After != "" {
		i++
	}
	var rows []cursor.Registration
	for _, id := range s.idx.ids[i:] {
		if !strings.HasPrefix(id, opt.Prefix) {
			break
		}
		r := s.overlay(*s.idx.rows[id])
		if (opt.Namespace != "" && r.Namespace != opt.Namespace) || (opt.State != "" && r.State != opt.State) {
			continue
		}
		if len(rows) == limit {
			return rows, rows[len(rows)-1].ID, nil
		}
		rows = append(rows, r)
	}
	return rows, "", nil
}

// catchUpWait bounds how long a List waits for the watch.
const catchUpWait = time.Second

// catchUp waits until the watch has applied every change the bucket held
// when it was called, so that a List through this bridge shows a write
// another bridge has acknowledged (the admin API promises it). Past
// catchUpWait, or with the server unreachable, the index answers as it
// is: a list a write behind is better than none.
func (s *Store) catchUp(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, catchUpWait)
	defer cancel()
	last, err := kvwatch.LastRevision(ctx, s.regs)
	if err != nil {
		return
	}
	for s.follower.Applied() < last && ctx.Err() == nil {
		time.Sleep(time.Millisecond)
	}
}

// Due returns at most limit active rows of ns due at or before at,
// earliest first, and how many rows of other namespaces are due (up to
// cursor.MaxUnserved), reading the sorted due entries of the index only.
func (s *Store) Due(ctx context.Context, at time.Time, limit int, ns string) (cursor.Due, error) {
	if err := ctx.Err(); err != nil {
		return cursor.Due{}, err
	}
	end := at.UnixNano()
	var out cursor.Due
	s.idx.mu.RLock()
	defer s.idx.mu.RUnlock()
	for _, k := range s.idx.due[ns] {
		if len(out.Rows) >= limit || k.at > end {
			break
		}
		if s.dueFilter != nil && !s.dueFilter(k.id) {
			continue
		}
		if r := s.overlay(*s.idx.rows[k.id]); isDue(&r) && !r.NextAttemptAt.After(at) {
			out.Rows = append(out.Rows, r)
		}
	}
	for other, q := range s.idx.due {
		if other == ns {
			continue
		}
		n, _ := slices.BinarySearchFunc(q, dueKey{end + 1, ""}, compareDue)
		out.Unserved += n
	}
	out.Unserved = min(out.Unserved, cursor.MaxUnserved)
	return out, nil
}

// Counts returns how many registrations each namespace has in each state,
// including acknowledged completions not written yet.
func (s *Store) Counts(ctx context.Context) (map[string]map[cursor.State]int, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.idx.mu.RLock()
	defer s.idx.mu.RUnlock()
	out := make(map[string]map[cursor.State]int, len(s.idx.counts))
	for ns, m := range s.idx.counts {
		out[ns] = maps.Clone(m)
	}
	for _, id := range s.wb.ids() {
		r, ok := s.idx.rows[id]
		if !ok || r.State == cursor.Completed {
			continue
		}
		if p, ok := s.wb.lookup(id); ok && p.Complete && p.on(r) {
			out[r.Namespace][r.State]--
			out[r.Namespace][cursor.Completed]++
		}
	}
	return out, nil
}

// Backlog returns, per namespace, the sequences behind the cursors of its
// active and parked registrations as last written, as cursor.DB.Backlog
// does.
func (s *Store) Backlog(ctx context.Context, last uint64) (map[string]uint64, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.idx.mu.RLock()
	defer s.idx.mu.RUnlock()
	out := make(map[string]uint64)
	for ns, counts := range s.idx.counts {
		for _, st := range []cursor.State{cursor.Active, cursor.Parked} {
			n, ok := counts[st]
			if !ok {
				continue
			}
			want, sum := uint64(n)*(last+1), s.idx.sums[ns][st]
			if want > sum {
				out[ns] += want - sum
			} else if _, ok := out[ns]; !ok {
				out[ns] = 0
			}
		}
	}
	return out, nil
}

// Routes calls fn, in id order, for every active registration whose
// filter is exactly filter. fn must not call the store.
func (s *Store) Routes(ctx context.Context, filter string, fn func(id, ns string)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.idx.mu.RLock()
	defer s.idx.mu.RUnlock()
	ids := s.idx.routes[filter]
	for _, id := range slices.Sorted(maps.Keys(ids)) {
		fn(id, ids[id])
	}
	return nil
}

// WildcardFilters calls fn once, in byte order, for every distinct
// wildcard filter of an active registration. fn must not call the store.
func (s *Store) WildcardFilters(ctx context.Context, fn func(filter string)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.idx.mu.RLock()
	defer s.idx.mu.RUnlock()
	var wild []string
	for f := range s.idx.routes {
		if cursor.IsWildcard(f) {
			wild = append(wild, f)
		}
	}
	slices.Sort(wild)
	for _, f := range wild {
		fn(f)
	}
	return nil
}

// WakeBehind makes due every idle active registration whose cursor is
// below seq, after flushing, as cursor.DB.WakeBehind does.
func (s *Store) WakeBehind(ctx context.Context, seq uint64) (int, error) {
	if err := s.Flush(ctx); err != nil {
		return 0, err
	}
	s.idx.mu.RLock()
	var behind []string
	for id := range s.idx.idle {
		if s.idx.rows[id].NextSeq < seq {
			behind = append(behind, id)
		}
	}
	s.idx.mu.RUnlock()
	slices.Sort(behind)
	n := 0
	for _, id := range behind {
		woke, err := s.wake(ctx, id, seq)
		if err != nil {
			return n, err
		}
		if woke {
			n++
		}
	}
	return n, nil
}

// IdleFloor returns the lowest cursor among the idle registrations, after
// flushing acknowledged progress; ok is false when none is idle. As
// cursor.DB's: a start that does not know how far the stream was followed
// reads from there instead of waking every idle registration.
func (s *Store) IdleFloor(ctx context.Context) (floor uint64, ok bool, err error) {
	if err := s.Flush(ctx); err != nil {
		return 0, false, err
	}
	s.idx.mu.RLock()
	defer s.idx.mu.RUnlock()
	for id := range s.idx.idle {
		if seq := s.idx.rows[id].NextSeq; !ok || seq < floor {
			floor, ok = seq, true
		}
	}
	return floor, ok, nil
}

// MakeDue makes the idle active ones among ids due at once; missing ids
// are skipped.
func (s *Store) MakeDue(ctx context.Context, ids []string) error {
	for _, id := range ids {
		if _, err := s.wake(ctx, id, 0); err != nil {
			return err
		}
	}
	return nil
}

// wake makes id due now when it is idle (and, with below non-zero, its
// cursor below it), judged by the row as written and its progress.
func (s *Store) wake(ctx context.Context, id string, below uint64) (bool, error) {
	woke := false
	_, err := s.mutate(ctx, id, func(r *row, now time.Time) (bool, error) {
		woke = isIdle(&r.Registration) && (below == 0 || r.NextSeq < below)
		if woke {
			r.NextAttemptAt = now
		}
		return woke, nil
	})
	if errors.Is(err, cursor.ErrNotFound) {
		return false, nil
	}
	return woke, err
}

// Purge deletes completed registrations and idempotency keys older than p
// allows, as cursor.DB.Purge does, each delete a compare-and-set on the
// revision it was judged by. Idempotency keys are found by listing and
// reading the bucket's keys.
func (s *Store) Purge(ctx context.Context, p cursor.RetentionPolicy) (cursor.PurgeReport, error) {
	if p.CompletedMaxAge < 0 {
		return cursor.PurgeReport{}, fmt.Errorf("kvstore: purge: completed age %v is negative", p.CompletedMaxAge)
	}
	now := s.now()
	regs := s.completedBefore(now.Add(-p.CompletedMaxAge))
	var keys []keyRev
	if age := p.EffectiveIdempotencyKeyMaxAge(); age != nil {
		var err error
		if keys, err = s.idemBefore(ctx, now.Add(-*age)); err != nil {
			return cursor.PurgeReport{}, err
		}
	}
	size := p.EffectiveBatchSize()
	var rep cursor.PurgeReport
	// skipped counts what another writer changed since it was judged: not
	// deleted, so the report cannot claim completeness.
	skipped := 0
	for len(regs)+len(keys) > 0 {
		if p.MaxBatches > 0 && rep.Batches == p.MaxBatches {
			return rep, nil
		}
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		n := min(size, len(regs))
		for _, r := range regs[:n] {
			switch err := s.removeLocked(ctx, r.key, r.rev); {
			case err == nil:
				rep.RegistrationsDeleted++
			case isConflict(err):
				skipped++
			default:
				return rep, err
			}
		}
		regs = regs[n:]
		m := min(size-n, len(keys))
		for _, k := range keys[:m] {
			switch err := s.idem.Delete(ctx, k.key, jetstream.LastRevision(k.rev)); {
			case err == nil:
				rep.IdempotencyKeysDeleted++
			case isConflict(err):
				skipped++
			default:
				return rep, fmt.Errorf("kvstore: purge an idempotency key: %w", err)
			}
		}
		keys = keys[m:]
		rep.Batches++
	}
	rep.Complete = skipped == 0
	return rep, nil
}

// keyRev is a key (an id, or an encoded idempotency key) and the revision
// it was judged at.
type keyRev struct {
	key string
	rev uint64
}

// completedBefore lists the completed rows whose CompletedAt is before
// cut, oldest first.
func (s *Store) completedBefore(cut time.Time) []keyRev {
	s.idx.mu.RLock()
	defer s.idx.mu.RUnlock()
	var rows []*row
	for _, r := range s.idx.rows {
		if r.State == cursor.Completed && r.CompletedAt.Before(cut) {
			rows = append(rows, r)
		}
	}
	slices.SortFunc(rows, func(a, b *row) int { return a.CompletedAt.Compare(b.CompletedAt) })
	out := make([]keyRev, len(rows))
	for i, r := range rows {
		out[i] = keyRev{r.ID, r.rev}
	}
	return out
}

// idemBefore lists the idempotency keys created before cut.
func (s *Store) idemBefore(ctx context.Context, cut time.Time) ([]keyRev, error) {
	// Cancelled on return, so the lister's goroutine ends even when the
	// keys are not read to the end.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	lister, err := s.idem.ListKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("kvstore: purge: list idempotency keys: %w", err)
	}
	defer func() { _ = lister.Stop() }()
	var out []keyRev
	for k := range lister.Keys() {
		e, err := s.idem.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("kvstore: purge: read an idempotency key: %w", err)
		}
		var rec idemRecord
		if json.Unmarshal(e.Value(), &rec) == nil && rec.CreatedAt.Before(cut) {
			out = append(out, keyRev{k, e.Revision()})
		}
	}
	return out, nil
}

// EachID calls fn with the id of every registration in the index, in no
// order, for counts by shard; fn must not call the store.
func (s *Store) EachID(fn func(id string)) {
	s.idx.mu.RLock()
	defer s.idx.mu.RUnlock()
	for id := range s.idx.rows {
		fn(id)
	}
}

// Ping asks the server for the registrations bucket's status: it fails
// while the server cannot be reached or the bucket's stream has no
// leader. A server cut off from its cluster still answers the status of
// its replica, with no leader named, and then takes no write.
func (s *Store) Ping(ctx context.Context) error {
	st, err := s.regs.Status(ctx)
	if err != nil {
		return fmt.Errorf("the key-value store %s cannot be reached: %w", s.regs.Bucket(), err)
	}
	if b, ok := st.(*jetstream.KeyValueBucketStatus); ok {
		if c := b.StreamInfo().Cluster; c != nil && c.Leader == "" {
			return fmt.Errorf("the key-value store %s has no leader: the NATS cluster has lost its quorum or is electing one", s.regs.Bucket())
		}
	}
	return nil
}

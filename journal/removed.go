package journal

import (
	"context"
	"fmt"
	"slices"

	"github.com/nats-io/nats.go/jetstream"
)

// removedSet is what the reader knows the stream no longer holds: every
// sequence below first, and the interior deletes listed. It is replaced
// whole, never changed, so Removed reads it without a lock.
type removedSet struct {
	first   uint64
	deleted uint64 // the stream's count of interior deletes it was built from
	seqs    map[uint64]struct{}
}

// Removed reports whether the stream no longer holds seq, as of the
// reader's last look at the stream's state (every Info; the daemon asks
// once a second). A message the stream removed after a cache or a caller
// read it must not be delivered then (CONTRACT §5: the bridge's memory of
// the stream does not outlive the stream).
func (r *Reader) Removed(seq uint64) bool {
	rs := r.removed.Load()
	if rs == nil {
		return false
	}
	if seq < rs.first {
		return true
	}
	_, ok := rs.seqs[seq]
	return ok
}

// learnRemoved brings the removed set up to st and, when the stream
// deleted messages from inside since the last look, asks which and drops
// them from the caches, so no read serves them again. Only a change of the
// deleted count costs a request.
func (r *Reader) learnRemoved(ctx context.Context, s jetstream.Stream, st StreamState) error {
	old := r.removed.Load()
	if old != nil && old.deleted == st.Deleted {
		if old.first != st.FirstSeq {
			r.removed.Store(&removedSet{first: st.FirstSeq, deleted: old.deleted, seqs: old.seqs})
		}
		return nil
	}
	seqs := map[uint64]struct{}{}
	if st.Deleted > 0 {
		info, err := s.Info(ctx, jetstream.WithDeletedDetails(true))
		if err != nil {
			return fmt.Errorf("journal: deleted messages of %s: %w", r.stream, err)
		}
		for _, q := range info.State.Deleted {
			seqs[q] = struct{}{}
		}
	}
	fresh := &removedSet{first: st.FirstSeq, deleted: st.Deleted, seqs: seqs}
	r.removed.Store(fresh)
	if old == nil {
		return nil
	}
	var gone []uint64
	for q := range seqs {
		if _, known := old.seqs[q]; !known {
			gone = append(gone, q)
		}
	}
	if len(gone) > 0 {
		r.forget(slices.Sorted(slices.Values(gone)))
	}
	return nil
}

// forget drops deleted messages from the caches: from the ring, which
// then holds every message the stream still stores in its range, and the
// cached runs, which are read again from the server when needed.
func (r *Reader) forget(seqs []uint64) {
	r.mu.Lock()
	r.runs.clear()
	r.mu.Unlock()
	r.ring.drop(seqs)
	r.log.Info("journal messages deleted from the stream; dropped from the reader's caches", "stream", r.stream, "deleted", len(seqs))
}

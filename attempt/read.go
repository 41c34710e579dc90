package attempt

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/nats-io/nats.go"
)

// Read limits (CONTRACT §7).
const (
	DefaultLimit = 100
	MaxLimit     = 1000
)

// getBatch is how many records one direct get request asks for.
const getBatch = 1000

// Registration returns the newest attempts of registration id stored
// before the attempts stream's sequence before (0: the newest of all),
// newest first, at most limit of them, and the before of the next page
// (0 on the last).
//
// The log is read with batched direct gets on the subject filter
// <prefix>.<id>.>, not with consumers: a read creates no server state,
// and the server walks only the blocks holding the filter's subjects.
// JetStream reads forward only, so the newest page is found by reading
// windows of stream sequences backwards from before, each four times the
// last, until it is full: one window when the registration is busy, a
// handful when its attempts are rare among many others'.
func (l *Log) Registration(ctx context.Context, id string, limit int, before uint64) ([]Attempt, uint64, error) {
	return l.newest(ctx, l.prefix+"."+encodeID(id)+".>", limit, before)
}

// Sequence returns every registration's attempts for journal sequence
// seq, newest first, at most MaxLimit: the filter <prefix>.*.<seq>.*.
func (l *Log) Sequence(ctx context.Context, seq uint64) ([]Attempt, error) {
	out, _, err := l.newest(ctx, l.prefix+".*."+strconv.FormatUint(seq, 10)+".*", MaxLimit, 0)
	return out, err
}

func (l *Log) newest(ctx context.Context, filter string, limit int, before uint64) ([]Attempt, uint64, error) {
	limit = min(max(limit, 1), MaxLimit)
	info, err := l.js.Stream(ctx, l.stream)
	if err != nil {
		return nil, 0, fmt.Errorf("attempt log: looking up stream %s: %w", l.stream, err)
	}
	st := info.CachedInfo().State
	hi := st.LastSeq + 1
	if before != 0 && before < hi {
		hi = before
	}
	need := limit + 1 // one more says whether a next page exists
	var got []*nats.Msg
	for w := uint64(4 * need); hi > st.FirstSeq && len(got) < need; w *= 4 {
		lo := st.FirstSeq
		if hi-lo > w {
			lo = hi - w
		}
		part, err := l.window(ctx, filter, lo, hi, need-len(got))
		if err != nil {
			return nil, 0, err
		}
		got = append(part, got...)
		hi = lo
	}
	var next uint64
	if len(got) > limit {
		got = got[len(got)-limit:]
		next = seqOf(got[0])
	}
	out := make([]Attempt, 0, len(got))
	for _, m := range slices.Backward(got) {
		var a Attempt
		if err := json.Unmarshal(m.Data, &a); err != nil {
			return nil, 0, fmt.Errorf("attempt log: record %d of stream %s is unreadable: %w", seqOf(m), l.stream, err)
		}
		a.streamSeq = seqOf(m)
		out = append(out, a)
	}
	return out, next, nil
}

// window returns the newest keep messages matching filter with stream
// sequence in [lo, hi), oldest first.
func (l *Log) window(ctx context.Context, filter string, lo, hi uint64, keep int) ([]*nats.Msg, error) {
	var out []*nats.Msg
	for from := lo; from < hi; {
		msgs, err := l.get(ctx, getRequest{Seq: from, NextBy: filter, Batch: int(min(hi-from, getBatch))})
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			if seqOf(m) >= hi {
				break
			}
			out = append(out, m)
		}
		if len(out) > keep {
			out = append(out[:0], out[len(out)-keep:]...)
		}
		if len(msgs) == 0 || seqOf(msgs[len(msgs)-1]) >= hi-1 || len(msgs) < min(int(hi-from), getBatch) {
			break
		}
		from = seqOf(msgs[len(msgs)-1]) + 1
	}
	return out, nil
}

func seqOf(m *nats.Msg) uint64 {
	n, _ := strconv.ParseUint(m.Header.Get(nats.JSSequence), 10, 64)
	return n
}

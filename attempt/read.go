package attempt

import (
	"bytes"
	"cmp"
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

// getBatch is how many messages one direct get request asks for.
const getBatch = 1000

// A record's position in the log is its message's stream sequence and
// its place in the message's array: posBits of place, since a message
// holds at most publishBatch records.
const (
	posBits = 8
	posMask = 1<<posBits - 1
)

// Registration returns the newest attempts of registration id stored
// before position before (0: the newest of all), newest first, at most
// limit of them, and the before of the next page (0 on the last).
//
// The log is read with batched direct gets on the subject filter
// <prefix>.*.<id>, not with consumers: a read creates no server state,
// and the server walks only the blocks holding the filter's subjects.
// JetStream reads forward only, so the newest page is found by reading
// windows of stream sequences backwards from before, each four times the
// last, until it is full: one window when the registration is busy, a
// handful when its attempts are rare among many others'.
func (l *Log) Registration(ctx context.Context, id string, limit int, before uint64) ([]Attempt, uint64, error) {
	return l.newest(ctx, l.prefix+".*."+encodeID(id), limit, before)
}

// Sequence returns every registration's attempts for journal sequence
// seq, newest first, at most MaxLimit: the messages of seq's bucket,
// <prefix>.<bucket>.*, and of their records those for seq. They are read
// in one forward pass: a bucket's messages are few (one per registration
// and turn), and backward windows would each have the server return the
// matches past the window only to be dropped. Records of several
// registrations published together are ordered by when their POSTs
// began, not by where they sit in the stream.
func (l *Log) Sequence(ctx context.Context, seq uint64) ([]Attempt, error) {
	info, err := l.js.Stream(ctx, l.stream)
	if err != nil {
		return nil, fmt.Errorf("attempt log: looking up stream %s: %w", l.stream, err)
	}
	st := info.CachedInfo().State
	msgs, err := l.window(ctx, l.bucketPrefix(seq)+".*", st.FirstSeq, st.LastSeq+1, getBatch)
	if err != nil {
		return nil, err
	}
	out, err := l.expand(msgs, cut{seq: st.LastSeq + 1}, seq)
	if err != nil {
		return nil, err
	}
	out = out[max(len(out)-MaxLimit, 0):]
	slices.SortStableFunc(out, func(a, b Attempt) int { return cmp.Or(b.At.Compare(a.At), cmp.Compare(b.pos, a.pos)) })
	return out, nil
}

// newest reads the newest limit records of filter before position
// before.
func (l *Log) newest(ctx context.Context, filter string, limit int, before uint64) ([]Attempt, uint64, error) {
	limit = min(max(limit, 1), MaxLimit)
	info, err := l.js.Stream(ctx, l.stream)
	if err != nil {
		return nil, 0, fmt.Errorf("attempt log: looking up stream %s: %w", l.stream, err)
	}
	st := info.CachedInfo().State
	c := cut{seq: st.LastSeq + 1}
	if s := before >> posBits; before != 0 && s <= st.LastSeq {
		c = cut{seq: s, place: int(before & posMask)}
	}
	hi := c.seq + 1
	need := limit + 1 // one more says whether a next page exists
	var got []Attempt // oldest first
	for w := uint64(4 * need); hi > st.FirstSeq && len(got) < need; w *= 4 {
		lo := st.FirstSeq
		if hi-lo > w {
			lo = hi - w
		}
		msgs, err := l.window(ctx, filter, lo, hi, 2*need)
		if err != nil {
			return nil, 0, err
		}
		part, err := l.expand(msgs, c, 0)
		if err != nil {
			return nil, 0, err
		}
		got = append(part, got...)
		hi = lo
	}
	var next uint64
	if len(got) > limit {
		got = got[len(got)-limit:]
		next = got[0].pos
	}
	slices.Reverse(got)
	return got, next, nil
}

// cut is where a read starts: the records of messages before seq, and of
// message seq those before place.
type cut struct {
	seq   uint64
	place int
}

// expand unpacks msgs, oldest first, into the records that lie before c
// and are of journal sequence seq (any when 0).
func (l *Log) expand(msgs []*nats.Msg, c cut, seq uint64) ([]Attempt, error) {
	var out []Attempt
	for _, m := range msgs {
		s := seqOf(m)
		lines := records(m.Data)
		for i, line := range lines {
			if s == c.seq && i >= c.place {
				break
			}
			if n, ok := quickSeq(line); seq != 0 && ok && n != seq {
				continue
			}
			var a Attempt
			if err := json.Unmarshal(line, &a); err != nil {
				return nil, fmt.Errorf("attempt log: record %d of message %d of stream %s is unreadable: %w", i, s, l.stream, err)
			}
			if seq == 0 || a.Seq == seq {
				a.pos = s<<posBits | uint64(i)
				out = append(out, a)
			}
		}
	}
	return out, nil
}

// records splits a message's array into its records' JSON, one per line
// as encodeGroup writes them.
func records(data []byte) [][]byte {
	var out [][]byte
	for line := range bytes.SplitSeq(data, []byte{'\n'}) {
		line = bytes.TrimSuffix(line, []byte{','})
		if len(line) > 1 && line[0] == '{' {
			out = append(out, line)
		}
	}
	return out
}

// quickSeq reads a record's seq without decoding it: the member follows
// the registration id, which holds no quote or backslash. A sequence
// lookup then decodes only its own records of the bucket's sixteen.
func quickSeq(rec []byte) (uint64, bool) {
	_, rest, ok := bytes.Cut(rec, []byte(`","seq":`))
	if !ok {
		return 0, false
	}
	end := bytes.IndexByte(rest, ',')
	if end < 0 {
		return 0, false
	}
	n, err := strconv.ParseUint(string(rest[:end]), 10, 64)
	return n, err == nil
}

// window returns the messages matching filter with stream sequence in
// [lo, hi), oldest first, asking for at most batch per request. A batched
// direct get cannot stop at hi: the server goes on to batch matches past
// it, which are dropped, so a window read backwards asks for little more
// than it needs.
func (l *Log) window(ctx context.Context, filter string, lo, hi uint64, batch int) ([]*nats.Msg, error) {
	var out []*nats.Msg
	limit := uint64(min(batch, getBatch))
	for from := lo; from < hi; {
		msgs, err := l.get(ctx, getRequest{Seq: from, NextBy: filter, Batch: int(min(hi-from, limit))})
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			if seqOf(m) >= hi {
				break
			}
			out = append(out, m)
		}
		if len(msgs) == 0 || seqOf(msgs[len(msgs)-1]) >= hi-1 || uint64(len(msgs)) < min(hi-from, limit) {
			break
		}
		from = seqOf(msgs[len(msgs)-1]) + 1
	}
	return out, nil
}

// bucketOf reads every message of one registration's bucket, oldest
// first, and returns its records: what numbering a POST of that bucket
// must count after.
func (l *Log) bucketOf(ctx context.Context, reg string, seq uint64) ([]Attempt, error) {
	msgs, err := l.window(ctx, l.bucketSubject(reg, seq), 1, ^uint64(0), getBatch)
	if err != nil {
		return nil, err
	}
	return l.expand(msgs, cut{seq: ^uint64(0)}, 0)
}

func seqOf(m *nats.Msg) uint64 {
	n, _ := strconv.ParseUint(m.Header.Get(nats.JSSequence), 10, 64)
	return n
}

package journal

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// reply is a batched direct get reply as the server sends it: the stored
// message with the server's headers, naming the sequence before it.
func reply(seq, prev, pending uint64) *nats.Msg {
	h := nats.Header{}
	h.Set(nats.JSStream, "S")
	h.Set(nats.JSSubject, "a.b")
	h.Set(nats.JSSequence, strconv.FormatUint(seq, 10))
	h.Set(nats.JSTimeStamp, time.Unix(1700000000, 0).UTC().Format(time.RFC3339Nano))
	h.Set(numPendingHeader, strconv.FormatUint(pending, 10))
	h.Set(nats.JSLastSequence, strconv.FormatUint(prev, 10))
	return &nats.Msg{Header: h, Data: []byte("x")}
}

func endOf(last, pending uint64) *nats.Msg {
	h := nats.Header{}
	h.Set("Status", "204")
	h.Set(numPendingHeader, strconv.FormatUint(pending, 10))
	h.Set(nats.JSLastSequence, strconv.FormatUint(last, 10))
	return &nats.Msg{Header: h}
}

// gather feeds replies to one answer as route would, and returns what the
// waiting reader is handed.
func gather(t *testing.T, replies ...*nats.Msg) answerResult {
	t.Helper()
	a := &answer{handoff: newHandoff(0)}
	for i, m := range replies {
		if a.add("S", m) {
			if i != len(replies)-1 {
				t.Fatalf("answer complete after reply %d of %d", i+1, len(replies))
			}
			return a.result
		}
	}
	t.Fatal("answer never complete")
	return answerResult{}
}

func TestAnswerGathersABatch(t *testing.T) {
	r := gather(t, reply(3, 0, 2), reply(7, 3, 1), reply(9, 7, 0), endOf(9, 0))
	if r.err != nil {
		t.Fatal(r.err)
	}
	var seqs []uint64
	for _, rec := range r.recs {
		seqs = append(seqs, rec.Seq)
		if rec.Header != nil {
			t.Errorf("message %d keeps server headers %v", rec.Seq, rec.Header)
		}
	}
	if len(seqs) != 3 || seqs[0] != 3 || seqs[1] != 7 || seqs[2] != 9 {
		t.Errorf("records %v, want [3 7 9]", seqs)
	}
	if !r.caughtUp {
		t.Error("end of batch with nothing pending is not caught up")
	}
}

// A reply lost between the server and the subscription (a slow consumer)
// must fail the read: handing back the rest would read as "no message
// there" and the cursor would move past it.
func TestAnswerFailsOnALostReply(t *testing.T) {
	r := gather(t, reply(3, 0, 2), reply(9, 7, 0))
	if r.err == nil || !strings.Contains(r.err.Error(), "lost messages after 3") {
		t.Errorf("error %v, want one naming the lost messages after 3", r.err)
	}
	r = gather(t, reply(3, 0, 2), reply(7, 3, 1), endOf(9, 0))
	if r.err == nil || !strings.Contains(r.err.Error(), "lost messages after 7") {
		t.Errorf("lost last reply: error %v, want one naming the lost messages after 7", r.err)
	}
}

func TestAnswerOfAnOldServerIsOneMessage(t *testing.T) {
	m := reply(5, 0, 0)
	delete(m.Header, numPendingHeader)
	delete(m.Header, nats.JSLastSequence)
	r := gather(t, m)
	if r.err != nil || len(r.recs) != 1 || r.recs[0].Seq != 5 || r.caughtUp {
		t.Errorf("got %d records, caught up %v, error %v; want message 5 alone, not caught up", len(r.recs), r.caughtUp, r.err)
	}
}

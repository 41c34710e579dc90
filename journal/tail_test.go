package journal_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetstream-bridge/bridge/journal"
)

type note struct {
	subject string
	seq     uint64
}

// tail runs r.Tail until the test ends and returns its notifications of
// messages.
func tail(t *testing.T, e *env, r *journal.Reader) <-chan note {
	t.Helper()
	notes, _ := tailWithStarts(t, e, r)
	return notes
}

// tailWithStarts is tail that also returns the start notes: the first
// sequence each run of the tail reports.
func tailWithStarts(t *testing.T, e *env, r *journal.Reader) (notes <-chan note, starts <-chan uint64) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	msgs, runs := make(chan note, 10000), make(chan uint64, 100)
	done := make(chan error, 1)
	go func() {
		done <- r.Tail(ctx, func(subject string, seq uint64) {
			if subject == "" {
				runs <- seq
				return
			}
			msgs <- note{subject, seq}
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Tail returned %v after its context ended; want nil", err)
		}
	})
	waitTail(t, e, msgs)
	return msgs, runs
}

// waitTail publishes markers until the tail reports one, so everything
// published afterwards is published while it runs, then swallows the
// notifications of the markers.
func waitTail(t *testing.T, e *env, notes <-chan note) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	var last uint64
	for {
		last = e.publish("journal.marker", "", nil)
		select {
		case n := <-notes:
			for n.seq < last {
				n = next(t, notes)
			}
			return
		case <-time.After(20 * time.Millisecond):
		case <-deadline:
			t.Fatal("tail never reported a message")
		}
	}
}

func next(t *testing.T, notes <-chan note) note {
	t.Helper()
	select {
	case n := <-notes:
		return n
	case <-time.After(10 * time.Second):
		t.Fatal("no notification within 10s")
		return note{}
	}
}

func expectNotes(t *testing.T, notes <-chan note, want []published) {
	t.Helper()
	for _, w := range want {
		if n := next(t, notes); n.seq != w.seq || n.subject != w.subject {
			t.Fatalf("notified %s #%d, want %s #%d", n.subject, n.seq, w.subject, w.seq)
		}
	}
}

func TestTailNotifiesNewMessagesInOrder(t *testing.T) {
	e := newEnv(t)
	e.stream(jetstream.StreamConfig{Name: "JOURNAL", AllowDirect: true})
	before := e.interleave(10) // stored before the tail: never notified
	r := e.reader("JOURNAL")
	notes, starts := tailWithStarts(t, e, r)
	// The start note comes first and names the first sequence the tail
	// reports: everything before it is the caller's to look for.
	var first uint64
	select {
	case first = <-starts:
		if first <= before[len(before)-1].seq {
			t.Errorf("the tail says it starts at %d, inside the 10 messages stored before it (up to %d)", first, before[len(before)-1].seq)
		}
	default:
		t.Error("the tail reported messages without saying where it started")
	}
	fresh := e.interleave(200)
	if fresh[0].seq < first {
		t.Errorf("the tail said it starts at %d, after the first message it reports (%d)", first, fresh[0].seq)
	}
	expectNotes(t, notes, fresh)
	if err := r.Tail(context.Background(), func(string, uint64) {}); err == nil {
		t.Fatal("a second Tail on one reader started")
	}
}

func TestTailSurvivesAServerRestart(t *testing.T) {
	e := newEnv(t)
	e.stream(jetstream.StreamConfig{Name: "JOURNAL", AllowDirect: true})
	r := e.reader("JOURNAL")
	notes := tail(t, e, r)
	before := e.interleave(5)
	expectNotes(t, notes, before)

	e.restart()
	var after []published
	deadline := time.Now().Add(20 * time.Second)
	for len(after) < 5 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		ack, err := e.js.Publish(ctx, "journal.orders.after", []byte("after"))
		cancel()
		if err != nil {
			if time.Now().After(deadline) {
				t.Fatalf("publishing after the restart: %v", err)
			}
			time.Sleep(50 * time.Millisecond)
			continue
		}
		after = append(after, published{seq: ack.Sequence, subject: "journal.orders.after", data: "after"})
	}
	expectNotes(t, notes, after)

	// The ring holds what the tail saw on both sides of the restart.
	got, _ := drain(t, r, "journal.orders.>", before[0].seq, 256)
	sameRecords(t, "JOURNAL", got, matching(append(before, after...), "journal.orders.>"))
}

func TestReadsInsideTheRingAskTheServerNothing(t *testing.T) {
	e := newEnv(t)
	e.stream(jetstream.StreamConfig{Name: "JOURNAL", AllowDirect: true})
	old := e.interleave(100)
	r := e.reader("JOURNAL")
	notes := tail(t, e, r)
	fresh := e.interleave(600)
	expectNotes(t, notes, fresh)

	before := r.Stats()
	got, pages := drain(t, r, "journal.orders.>", fresh[0].seq, 100)
	sameRecords(t, "JOURNAL", got, matching(fresh, "journal.orders.>"))
	after := r.Stats()
	if after.ServerRequests != before.ServerRequests {
		t.Fatalf("%d pages inside the ring made %d server requests", pages, after.ServerRequests-before.ServerRequests)
	}
	if after.TailMessages < uint64(len(fresh)) {
		t.Fatalf("tail counted %d messages, want at least %d", after.TailMessages, len(fresh))
	}

	// A page that starts before the ring is stitched: server, then ring.
	before = r.Stats()
	pg, err := r.Read(context.Background(), "journal.>", old[50].seq, 1000)
	if err != nil {
		t.Fatal(err)
	}
	all := append(append([]published{}, old...), fresh...)
	var want []published
	for _, p := range all {
		if p.seq >= old[50].seq {
			want = append(want, p)
		}
	}
	// The tail's markers sit between the old and the fresh messages.
	var recs = pg.Records[:0:0]
	for _, rec := range pg.Records {
		if rec.Subject != "journal.marker" {
			recs = append(recs, rec)
		}
	}
	sameRecords(t, "JOURNAL", recs, want)
	if !pg.CaughtUp {
		t.Fatal("a read that reached the ring's head is not caught up")
	}
	if d := r.Stats().Fetches - before.Fetches; d != 1 {
		t.Fatalf("stitched page made %d fetches, want 1", d)
	}
}

func TestInfoSeesTheStreamRecreated(t *testing.T) {
	e := newEnv(t)
	e.stream(jetstream.StreamConfig{Name: "JOURNAL", AllowDirect: true})
	e.interleave(30)
	r := e.reader("JOURNAL")
	notes := tail(t, e, r)
	ctx := context.Background()
	first, err := r.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if first.LastSeq < 30 || !first.AllowDirect || first.Created.IsZero() {
		t.Fatalf("info %+v", first)
	}
	if _, err := r.Read(ctx, "journal.orders.>", 1, 256); err != nil {
		t.Fatal(err)
	}

	if err := e.js.DeleteStream(ctx, "JOURNAL"); err != nil {
		t.Fatal(err)
	}
	e.stream(jetstream.StreamConfig{Name: "JOURNAL", AllowDirect: true})
	second, err := r.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if second.Created.Equal(first.Created) || second.LastSeq != 0 {
		t.Fatalf("after re-creation info %+v; before %+v", second, first)
	}

	// Nothing cached for the old stream is served for the new one, and the
	// tail follows the new stream.
	fresh := e.interleave(4)
	for {
		n := next(t, notes)
		if n.seq == fresh[0].seq && n.subject == fresh[0].subject {
			break
		}
		if n.subject != "journal.marker" && n.seq > fresh[0].seq {
			t.Fatalf("tail notified %s #%d before the new stream's first message", n.subject, n.seq)
		}
	}
	expectNotes(t, notes, fresh[1:])
	// Reads wait for the caller to confirm the new stream.
	if _, err := r.Read(ctx, "journal.orders.>", 1, 256); !errors.Is(err, journal.ErrStreamRecreated) {
		t.Fatalf("read before confirming the new stream: %v; want ErrStreamRecreated", err)
	}
	if !r.ConfirmStream(second.Created) {
		t.Fatal("ConfirmStream refused the stream Info reported")
	}
	got, _ := drain(t, r, "journal.orders.>", 1, 256)
	sameRecords(t, "JOURNAL", got, matching(fresh, "journal.orders.>"))
}

func TestSeqAtTime(t *testing.T) {
	for _, direct := range []bool{true, false} {
		t.Run(map[bool]string{true: "direct", false: "message get"}[direct], func(t *testing.T) {
			e := newEnv(t)
			e.stream(jetstream.StreamConfig{Name: "JOURNAL", AllowDirect: direct, MaxMsgs: 8})
			e.interleave(10) // 3..10 remain
			mid := time.Now()
			later := e.interleave(5)
			r := e.reader("JOURNAL")
			ctx := context.Background()
			for _, c := range []struct {
				at   time.Time
				want uint64
			}{
				{time.Time{}, 8},                       // before everything: the first held message
				{mid, later[0].seq},                    // the first one stored at or after mid
				{time.Now().Add(time.Hour), 16},        // after everything: last + 1
				{mid.Add(-time.Hour), 8},               // before the first held message
				{time.Now().Add(-time.Nanosecond), 16}, // after the last one
			} {
				got, err := r.SeqAtTime(ctx, c.at)
				if err != nil {
					t.Fatal(err)
				}
				if got != c.want {
					t.Errorf("SeqAtTime(%v) = %d, want %d", c.at, got, c.want)
				}
			}
		})
	}
}

func TestEnsureStream(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()

	_, err := journal.EnsureStream(ctx, e.js, "JOURNAL", []string{"journal.>"}, false)
	var nf *journal.NotFoundError
	if !errors.As(err, &nf) || !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("err = %v; want a NotFoundError", err)
	}
	want := "stream JOURNAL not found on " + e.srv.ClientURL() + "; create it or run with --create-stream"
	if err.Error() != want {
		t.Fatalf("err = %q, want %q", err, want)
	}

	s, err := journal.EnsureStream(ctx, e.js, "JOURNAL", []string{"journal.>"}, true)
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	if !cfg.AllowDirect || cfg.Storage != jetstream.FileStorage || len(cfg.Subjects) != 1 || cfg.Subjects[0] != "journal.>" {
		t.Fatalf("created %+v", cfg)
	}
	if _, err := journal.EnsureStream(ctx, e.js, "JOURNAL", []string{"journal.>"}, false); err != nil {
		t.Fatalf("existing stream: %v", err)
	}

	e.stream(jetstream.StreamConfig{Name: "OLD", Subjects: []string{"old.>"}, Storage: jetstream.MemoryStorage})
	s, err = journal.EnsureStream(ctx, e.js, "OLD", []string{"journal.>"}, true)
	if err != nil {
		t.Fatal(err)
	}
	if cfg := s.CachedInfo().Config; cfg.AllowDirect || cfg.Subjects[0] != "old.>" {
		t.Fatalf("an existing stream was changed: %+v", cfg)
	}
}

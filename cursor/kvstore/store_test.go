package kvstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetstream-bridge/bridge/cursor"
)

// Two stores on the same buckets are two bridges: what one writes, the
// other's Get sees as soon as the write has answered, and its index
// catches up through the watch.
func TestTwoStoresShareTheBuckets(t *testing.T) {
	ctx := context.Background()
	url := startNATS(t)
	a, b := openKV(t, url), openKV(t, url)
	idem := &cursor.Idempotency{Key: "k", Hash: []byte("h"), Answer: func(r cursor.Registration) ([]byte, error) {
		return json.Marshal(r.ID)
	}}
	_, first, err := a.Create(ctx, reg("x", "outbox"), idem)
	must(t, err)
	if r := get(t, b, "x"); r.ID != "x" || r.State != cursor.Active {
		t.Fatalf("b reads %+v right after a's Create", r)
	}
	if _, again, err := b.Create(ctx, reg("x", "outbox"), idem); err != nil || string(again) != string(first) {
		t.Fatalf("replay through b = %q, %v; want %q", again, err, first)
	}
	_, _, err = b.Create(ctx, reg("x", "outbox"), nil)
	wantErrIs(t, err, cursor.ErrExists)
	must(t, b.Park(ctx, "x", "410 Gone"))
	if r := get(t, a, "x"); r.State != cursor.Parked {
		t.Fatalf("a reads %s right after b's Park", r.State)
	}
	eventually(t, "a's index to see the park", func() bool {
		ids, _ := dueIDs(t, a, time.Now().Add(time.Hour), 10, "outbox")
		return len(ids) == 0
	})
	must(t, a.Delete(ctx, "x"))
	_, err = b.Get(ctx, "x")
	wantErrIs(t, err, cursor.ErrNotFound)
	eventually(t, "b's index to drop the row", func() bool {
		rows, _, err := b.List(ctx, cursor.ListOptions{})
		return err == nil && len(rows) == 0
	})
}

// A store whose view is stale (its watch lags) cannot move a cursor over
// a newer one: its write is refused, counted, and the newer cursor stands.
// Progress past the newer cursor still lands, on the fresh row.
func TestAStaleWriterIsFenced(t *testing.T) {
	ctx := context.Background()
	url := startNATS(t)
	a, b := openKV(t, url), openKV(t, url)
	create(t, a, reg("x", "outbox"))
	get(t, b, "x")
	a.watching.Lock()
	held := true
	release := func() {
		if held {
			a.watching.Unlock()
			held = false
		}
	}
	defer release()

	advance(t, a, "x", cursor.Progress{NextSeq: 7, Delivered: 7})
	advance(t, b, "x", cursor.Progress{NextSeq: 10, Delivered: 10})
	flush(t, b)
	flush(t, a)
	if n := a.FencedWrites(); n != 1 {
		t.Fatalf("FencedWrites = %d, want 1", n)
	}
	if r := get(t, b, "x"); r.NextSeq != 10 || r.Delivered != 10 {
		t.Fatalf("after the stale flush the row is %+v; want b's cursor 10", r)
	}
	if n := a.Pending(); n != 0 {
		t.Fatalf("the fenced progress is still pending (%d)", n)
	}

	// b rewinds; a's progress acknowledged before it must not land.
	advance(t, a, "x", cursor.Progress{NextSeq: 12, Delivered: 2})
	if _, err := b.Rewind(ctx, "x", 4, time.Time{}); err != nil {
		t.Fatal(err)
	}
	flush(t, a)
	if r := get(t, b, "x"); r.NextSeq != 4 || a.FencedWrites() != 2 {
		t.Fatalf("after a stale flush over a rewind: NextSeq %d, fenced %d; want 4 and 2", r.NextSeq, a.FencedWrites())
	}

	// Progress past the stored cursor, on the same rewind: applied to the
	// fresh row after one refusal.
	advance(t, b, "x", cursor.Progress{NextSeq: 6, Delivered: 2})
	flush(t, b)
	advance(t, a, "x", cursor.Progress{NextSeq: 9, Delivered: 3})
	conflicts := a.Conflicts()
	flush(t, a)
	if r := get(t, b, "x"); r.NextSeq != 9 || a.FencedWrites() != 2 || a.Conflicts() != conflicts+1 {
		t.Fatalf("NextSeq %d fenced %d conflicts %d; want 9, 2 and one more conflict", r.NextSeq, a.FencedWrites(), a.Conflicts()-conflicts)
	}
	release()

	// An explicit write from a stale view re-reads and applies its change.
	must(t, b.Retry(ctx, "x", time.Now(), "503"))
	a.watching.Lock()
	held = true
	must(t, b.Retry(ctx, "x", time.Now(), "503"))
	must(t, a.Park(ctx, "x", "410 Gone"))
	release()
	if r := get(t, b, "x"); r.State != cursor.Parked || r.Attempts != 3 || r.NextSeq != 9 {
		t.Fatalf("after a's Park from a stale view: %+v", r)
	}
}

// The row is stored only through compare-and-set: a bare write of another
// writer in between is never overwritten by this store's Flush.
func TestFlushNeverOverwritesAnotherWritersCursor(t *testing.T) {
	url := startNATS(t)
	s := openKV(t, url)
	create(t, s, reg("x", "outbox"))
	kv, err := connect(t, url).KeyValue(context.Background(), DefaultPrefix+"_regs")
	must(t, err)
	s.watching.Lock()
	advance(t, s, "x", cursor.Progress{NextSeq: 5})
	e, err := kv.Get(context.Background(), encodeKey("x"))
	must(t, err)
	var rec record
	must(t, json.Unmarshal(e.Value(), &rec))
	rec.NextSeq = 50
	v, _ := json.Marshal(rec)
	_, err = kv.Update(context.Background(), encodeKey("x"), v, e.Revision())
	must(t, err)
	flush(t, s)
	s.watching.Unlock()
	if r := get(t, s, "x"); r.NextSeq != 50 || s.FencedWrites() != 1 {
		t.Fatalf("NextSeq %d fenced %d; want the other writer's 50, fenced once", r.NextSeq, s.FencedWrites())
	}
}

// indexMatches compares s's index, derived entries included, with a
// fresh read of every key and an index built from those rows alone.
func indexMatches(t testing.TB, s *Store) error {
	t.Helper()
	ctx := context.Background()
	want := newIndex()
	keys, err := s.regs.ListKeys(ctx)
	must(t, err)
	for k := range keys.Keys() {
		id, _ := decodeKey(k)
		e, err := s.regs.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		must(t, err)
		r, err := decodeRow(id, e.Value(), e.Revision())
		must(t, err)
		want.put(r)
	}
	s.idx.mu.RLock()
	defer s.idx.mu.RUnlock()
	got := &s.idx
	if fmt.Sprint(got.ids) != fmt.Sprint(want.ids) {
		return fmt.Errorf("ids %v, want %v", got.ids, want.ids)
	}
	for id, w := range want.rows {
		if g := got.rows[id]; g.rev != w.rev || g.NextSeq != w.NextSeq || g.State != w.State {
			return fmt.Errorf("row %s: rev %d NextSeq %d %s, want rev %d NextSeq %d %s", id, g.rev, g.NextSeq, g.State, w.rev, w.NextSeq, w.State)
		}
	}
	for _, pair := range [][2]any{{got.due, want.due}, {got.idle, want.idle}, {got.routes, want.routes}, {got.counts, want.counts}, {got.sums, want.sums}} {
		if fmt.Sprint(pair[0]) != fmt.Sprint(pair[1]) {
			return fmt.Errorf("derived index %v, want %v", pair[0], pair[1])
		}
	}
	return nil
}

func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10 s for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Creates of one id with one idempotency key, racing through two stores:
// one registration, and every caller gets the first answer byte for byte.
func TestRacingIdempotentCreatesThroughTwoStores(t *testing.T) {
	ctx := context.Background()
	url := startNATS(t)
	stores := []*Store{openKV(t, url), openKV(t, url)}
	answers := make([][]byte, 8)
	var wg sync.WaitGroup
	for i := range answers {
		wg.Go(func() {
			idem := &cursor.Idempotency{Key: "k", Hash: []byte("h"), Answer: func(r cursor.Registration) ([]byte, error) {
				return fmt.Appendf(nil, "caller %d created %s", i, r.ID), nil
			}}
			_, ans, err := stores[i%2].Create(ctx, reg("x", "outbox"), idem)
			if err != nil {
				t.Errorf("caller %d: %v", i, err)
			}
			answers[i] = ans
		})
	}
	wg.Wait()
	for i, a := range answers {
		if string(a) != string(answers[0]) || len(a) == 0 {
			t.Fatalf("caller %d got %q, caller 0 %q", i, a, answers[0])
		}
	}
	rows, _, err := stores[0].List(ctx, cursor.ListOptions{})
	if err != nil || len(rows) != 1 {
		t.Fatalf("List = %d rows, %v", len(rows), err)
	}
}

func TestMetaValues(t *testing.T) {
	ctx := context.Background()
	s := openKV(t, startNATS(t))
	if v, err := s.GetMeta(ctx, "journal.created"); v != nil || err != nil {
		t.Fatalf("GetMeta of a missing key = %q, %v", v, err)
	}
	must(t, s.PutMeta(ctx, "journal.created", []byte("2026-03-01")))
	if v, err := s.GetMeta(ctx, "journal.created"); string(v) != "2026-03-01" || err != nil {
		t.Fatalf("GetMeta = %q, %v", v, err)
	}
	must(t, s.PutMeta(ctx, "journal.created", nil))
	if v, err := s.GetMeta(ctx, "journal.created"); v != nil || err != nil {
		t.Fatalf("GetMeta after delete = %q, %v", v, err)
	}
	if err := s.PutMeta(ctx, "", []byte("x")); err == nil {
		t.Fatal("PutMeta with an empty key succeeded")
	}
}

// A server that cannot hold the replicas asked for: Open fails naming the
// bucket and the number, and leaves nothing running.
func TestOpenNamesReplicasTheServerCannotHold(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := Open(ctx, connect(t, startNATS(t)), WithReplicas(3), WithPrefix("R3"))
	if err == nil || !strings.Contains(err.Error(), "R3_regs") || !strings.Contains(err.Error(), "3 replicas") {
		t.Fatalf("Open with 3 replicas on one server: %v", err)
	}
}

// A create that stopped between its row and its idempotency key (a crash)
// is completed by the next create of the same id, key and hash: it stores
// the key and answers, and every later replay gets that answer.
func TestACreateStoppedBeforeItsKeyIsCompletedByTheRetry(t *testing.T) {
	ctx := context.Background()
	url := startNATS(t)
	a, b := openKV(t, url), openKV(t, url)
	half := &row{Registration: cursor.Fresh(reg("x", "outbox"), t0), inc: newIncarnation(), idemKey: "k", idemHash: []byte("h")}
	must(t, a.insert(ctx, half))
	idem := &cursor.Idempotency{Key: "k", Hash: []byte("h"), Answer: func(r cursor.Registration) ([]byte, error) {
		return json.Marshal(r.ID)
	}}
	r, ans, err := b.Create(ctx, reg("x", "outbox"), idem)
	if err != nil || r.ID != "x" || string(ans) != `"x"` {
		t.Fatalf("retry of the stopped create = %+v, %q, %v", r, ans, err)
	}
	if _, again, err := a.Create(ctx, reg("x", "outbox"), idem); err != nil || string(again) != `"x"` {
		t.Fatalf("replay = %q, %v", again, err)
	}
	_, _, err = a.Create(ctx, reg("x", "outbox"), &cursor.Idempotency{Key: "k", Hash: []byte("other")})
	wantErrIs(t, err, cursor.ErrIdempotencyConflict)
	_, _, err = a.Create(ctx, reg("x", "outbox"), &cursor.Idempotency{Key: "k2", Hash: []byte("h")})
	wantErrIs(t, err, cursor.ErrExists)
}

// Progress acknowledged on a registration another bridge then deleted, or
// deleted and created again, never lands: not on a deleted key (it would
// bring the row back), not on the new registration (it would skip its
// messages).
func TestProgressNeverLandsOnADeletedOrRecreatedRow(t *testing.T) {
	ctx := context.Background()
	url := startNATS(t)
	a, b := openKV(t, url), openKV(t, url)
	create(t, a, reg("gone", "outbox"))
	create(t, a, reg("again", "outbox"))
	get(t, b, "gone")
	get(t, b, "again")
	a.watching.Lock()
	advance(t, a, "gone", cursor.Progress{NextSeq: 9})
	advance(t, a, "again", cursor.Progress{NextSeq: 9})
	must(t, b.Delete(ctx, "gone"))
	must(t, b.Delete(ctx, "again"))
	create(t, b, reg("again", "outbox"))
	flush(t, a)
	a.watching.Unlock()
	if _, err := b.Get(ctx, "gone"); !errors.Is(err, cursor.ErrNotFound) {
		t.Fatalf("the deleted row after a stale flush: %v", err)
	}
	if r := get(t, b, "again"); r.NextSeq != 0 {
		t.Fatalf("the recreated row took the old one's progress: NextSeq %d", r.NextSeq)
	}
	if n := a.FencedWrites(); n != 2 {
		t.Fatalf("FencedWrites = %d, want 2", n)
	}
}

// A read that finds no key does not overrule the watch: on a cluster the
// watch can deliver a create before the stream leader answers reads of
// it, and a row dropped then was never due or routed on this bridge again.
// The row goes when the watch delivers the delete marker.
func TestAReadThatFindsNothingLeavesTheWatchedRow(t *testing.T) {
	ctx := context.Background()
	url := startNATS(t)
	a, b := openKV(t, url), openKV(t, url)
	create(t, b, reg("x", "outbox"))
	eventually(t, "a's watch to deliver x", func() bool {
		rows, _, err := a.List(ctx, cursor.ListOptions{})
		return err == nil && len(rows) == 1
	})
	kv, err := connect(t, url).KeyValue(ctx, DefaultPrefix+"_regs")
	must(t, err)
	a.watching.Lock()
	must(t, kv.Delete(ctx, encodeKey("x")))
	_, err = a.Get(ctx, "x")
	wantErrIs(t, err, cursor.ErrNotFound)
	due, err := a.Due(ctx, time.Now(), 10, "outbox")
	must(t, err)
	var routed []string
	must(t, a.Routes(ctx, reg("x", "outbox").Subject, func(id, _ string) { routed = append(routed, id) }))
	a.watching.Unlock()
	if len(due.Rows) != 1 || len(routed) != 1 {
		t.Fatalf("after a Get that found nothing, before the watch's delete: due %d rows, routed %v; want x in both", len(due.Rows), routed)
	}
	eventually(t, "the watch's delete marker to drop x", func() bool {
		rows, _, err := a.List(ctx, cursor.ListOptions{})
		return err == nil && len(rows) == 0
	})
}

// ShardWeights counts the registrations not completed per shard, as the
// bridges' split reads them, through creates, completions and deletes.
func TestShardWeightsCountRegistrations(t *testing.T) {
	shardOf := func(id string) int { return int(id[len(id)-1]-'0') % 4 }
	s := openKV(t, startNATS(t), WithShardWeights(4, shardOf))
	ctx := context.Background()
	for _, id := range []string{"r0", "r1", "r5", "r2"} {
		_, _, err := s.Create(ctx, cursor.Registration{Config: cursor.Config{ID: id, Namespace: "outbox", Subject: "journal.>", URL: "https://x.example/"}, NextSeq: 1}, nil)
		must(t, err)
	}
	if got := s.ShardWeights(); !slices.Equal(got, []int{1, 2, 1, 0}) {
		t.Fatalf("weights %v after four creates, want [1 2 1 0]", got)
	}
	must(t, s.Advance(ctx, "r5", cursor.Progress{NextSeq: 2, Complete: true}))
	must(t, s.Flush(ctx))
	must(t, s.Delete(ctx, "r0"))
	if got := s.ShardWeights(); !slices.Equal(got, []int{0, 1, 1, 0}) {
		t.Fatalf("weights %v after a completion and a delete, want [0 1 1 0]", got)
	}
	if openKV(t, startNATS(t)).ShardWeights() != nil {
		t.Fatal("weights without WithShardWeights")
	}
}

// A read the bucket does not answer in time is cursor.ErrUnavailable, so
// the admin API can say "try again" rather than fail.
func TestAReadThatTimesOutIsUnavailable(t *testing.T) {
	s := openKV(t, startNATS(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	if _, err := s.Get(ctx, "r1"); !errors.Is(err, cursor.ErrUnavailable) {
		t.Fatalf("Get past its deadline: %v, want cursor.ErrUnavailable", err)
	}
}

package kvstore

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jetstream-bridge/bridge/cursor"
)

// parkedRow is a registration with every field of its delivery state set,
// as a bolt store holds one a receiver has failed for a while.
func parkedRow(id string) cursor.Registration {
	r := reg(id, "outbox")
	r.Batch = &cursor.Batch{MaxEvents: 10, MaxDelay: time.Second}
	r.State = cursor.Parked
	r.NextSeq = 42
	r.Attempts = 32
	r.LastError = "POST https://receiver.example/hook: 503"
	r.Delivered = 41
	r.CreatedAt = t0.Add(-48 * time.Hour)
	r.UpdatedAt = t0.Add(-time.Hour)
	return r
}

// sameJSON fails unless got and want encode alike: every field, times to
// the nanosecond.
func sameJSON(t *testing.T, what string, got, want cursor.Registration) {
	t.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if string(g) != string(w) {
		t.Fatalf("%s:\n got %s\nwant %s", what, g, w)
	}
}

func importOne(t *testing.T, s *Store, r cursor.Registration, keys ...cursor.StoredKey) ImportResult {
	t.Helper()
	res, err := s.Import(context.Background(), r, keys)
	if err != nil {
		t.Fatalf("Import(%q): %v", r.ID, err)
	}
	return res
}

func TestImportCopiesARegistrationExactlyAndNeverOverwrites(t *testing.T) {
	ctx := context.Background()
	url := startNATS(t)
	s := openKV(t, url, WithPrefix("MIG"))
	parked := parkedRow("parked")
	due := reg("due", "outbox")
	due.State, due.NextSeq, due.NextAttemptAt = cursor.Active, 7, t0
	due.CreatedAt, due.UpdatedAt = t0, t0

	for _, r := range []cursor.Registration{parked, due} {
		if res := importOne(t, s, r); res.Registration != Copied || res.Outcome() != Copied {
			t.Fatalf("first Import(%q) = %+v, want copied", r.ID, res)
		}
	}
	sameJSON(t, "parked as stored", get(t, s, "parked"), parked)
	// The index learnt the rows: the due one is due, the parked one not.
	if ids, _ := dueIDs(t, s, t0, 10, "outbox"); len(ids) != 1 || ids[0] != "due" {
		t.Fatalf("Due after Import = %v, want [due]", ids)
	}
	// Another bridge on the buckets sees the rows too.
	other := openKV(t, url, WithPrefix("MIG"))
	rows, _, err := other.List(ctx, cursor.ListOptions{})
	must(t, err)
	if len(rows) != 2 {
		t.Fatalf("List through another store = %d rows, want 2", len(rows))
	}
	sameJSON(t, "parked through another store", rows[1], parked)

	if res := importOne(t, s, parked); res.Registration != Skipped || res.Outcome() != Skipped {
		t.Fatalf("second Import = %+v, want skipped", res)
	}
	// A bridge moves the row on; importing the old copy leaves its move.
	if _, err := other.Unpark(ctx, "parked", t0); err != nil {
		t.Fatal(err)
	}
	if res := importOne(t, s, parked); res.Registration != Different {
		t.Fatalf("Import over a changed row = %+v, want different", res)
	}
	if r := get(t, s, "parked"); r.State != cursor.Active || r.Attempts != 0 {
		t.Fatalf("after Import over a changed row: %+v; the row must be left as the bridge wrote it", r)
	}

	bad := parkedRow("")
	if _, err := s.Import(ctx, bad, nil); err == nil || !strings.Contains(err.Error(), "id is empty") {
		t.Fatalf("Import without an id: %v", err)
	}
}

func TestImportedKeysReplayTheStoredAnswer(t *testing.T) {
	ctx := context.Background()
	url := startNATS(t)
	s := openKV(t, url)
	r := parkedRow("a")
	key := cursor.StoredKey{Key: "k-a", Hash: []byte("hash-a"), ID: "a", Current: true,
		Answer: []byte(`{"id":"a","state":"active"}`), CreatedAt: t0}
	gone := cursor.StoredKey{Key: "k-gone", Hash: []byte("hash-gone"), ID: "gone",
		Answer: []byte(`{"id":"gone"}`), CreatedAt: t0}

	res := importOne(t, s, r, key)
	if res.Outcome() != Copied || len(res.Keys) != 1 || res.Keys[0] != (KeyOutcome{"k-a", Copied}) {
		t.Fatalf("Import with a key = %+v", res)
	}
	if out, err := s.ImportKey(ctx, gone); err != nil || out != Copied {
		t.Fatalf("ImportKey = %v, %v", out, err)
	}

	// A replay through another bridge answers the stored bytes, with the
	// registration the key created when it is still there.
	other := openKV(t, url)
	replay := func(k cursor.StoredKey, hash string) (cursor.Registration, []byte, error) {
		return other.Create(ctx, reg(k.ID, "outbox"), &cursor.Idempotency{Key: k.Key, Hash: []byte(hash)})
	}
	got, answer, err := replay(key, "hash-a")
	must(t, err)
	if string(answer) != string(key.Answer) || got.ID != "a" || got.NextSeq != 42 {
		t.Fatalf("replay = %+v, %q; want the imported row and its stored answer", got, answer)
	}
	got, answer, err = replay(gone, "hash-gone")
	must(t, err)
	if string(answer) != string(gone.Answer) || got.ID != "" {
		t.Fatalf("replay of a deleted registration's key = %+v, %q; want the answer alone", got, answer)
	}
	if _, err := other.Get(ctx, "gone"); err == nil {
		t.Fatal("the replay created the deleted registration")
	}
	_, _, err = replay(key, "another body")
	wantErrIs(t, err, cursor.ErrIdempotencyConflict)

	// Again: nothing is written twice.
	if res := importOne(t, s, r, key); res.Outcome() != Skipped || res.Keys[0].Outcome != Skipped {
		t.Fatalf("second Import = %+v, want all skipped", res)
	}
	changed := gone
	changed.Answer = []byte(`{"id":"gone","other":true}`)
	if out, err := s.ImportKey(ctx, changed); err != nil || out != Different {
		t.Fatalf("ImportKey of a changed answer = %v, %v; want different", out, err)
	}
	if _, answer, _ := replay(gone, "hash-gone"); string(answer) != string(gone.Answer) {
		t.Fatalf("after a different import the key answers %q; it must be left as it was", answer)
	}

	// A row imported earlier without its key gets the key now: that
	// finishes an import, and counts as copied.
	b := parkedRow("b")
	importOne(t, s, b)
	bKey := cursor.StoredKey{Key: "k-b", Hash: []byte("h"), ID: "b", Answer: []byte("{}"), CreatedAt: t0}
	if res := importOne(t, s, b, bKey); res.Registration != Skipped || res.Outcome() != Copied {
		t.Fatalf("Import finishing a half-done one = %+v, want row skipped, copied in all", res)
	}
	if _, err := s.Import(ctx, parkedRow("c"), []cursor.StoredKey{key}); err == nil || !strings.Contains(err.Error(), `names registration "a"`) {
		t.Fatalf("Import with another registration's key: %v", err)
	}
}

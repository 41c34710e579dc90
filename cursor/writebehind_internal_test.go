package cursor

import (
	"context"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

func TestProgressMerges(t *testing.T) {
	at1, at2 := time.Unix(1, 0), time.Unix(2, 0)
	older := progress{inc: 1, Progress: Progress{NextSeq: 10, Delivered: 2, Idle: true, Complete: true}, at: at1}
	newer := progress{inc: 1, Progress: Progress{NextSeq: 7, Delivered: 3, Idle: false}, at: at2}
	got := older.then(newer)
	want := progress{inc: 1, Progress: Progress{NextSeq: 10, Delivered: 5, Idle: false, Complete: true}, at: at2}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("then = %+v, want %+v", got, want)
	}
	other := progress{inc: 2, Progress: Progress{NextSeq: 1, Delivered: 1}, at: at2}
	if got := older.then(other); !reflect.DeepEqual(got, other) {
		t.Fatalf("progress of another incarnation merged: %+v", got)
	}
}

func TestASettledFailureKeepsOlderProgressUnderNewer(t *testing.T) {
	var w writeBehind
	w.add("a", progress{inc: 1, Progress: Progress{NextSeq: 10, Delivered: 4}})
	claimed := w.claimAll(7)
	if len(claimed) != 1 {
		t.Fatalf("claimed %d entries", len(claimed))
	}
	w.add("a", progress{inc: 1, Progress: Progress{NextSeq: 8, Delivered: 1, Idle: true}})
	if p, _ := w.lookup(6, "a"); p.NextSeq != 10 || p.Delivered != 5 {
		t.Fatalf("reader older than the claim sees %+v", p)
	}
	if p, _ := w.lookup(7, "a"); p.NextSeq != 8 || p.Delivered != 1 {
		t.Fatalf("reader that sees the commit sees %+v", p)
	}
	w.settle(false)
	p, ok := w.lookup(7, "a")
	if !ok || p.NextSeq != 10 || p.Delivered != 5 || !p.Idle {
		t.Fatalf("after a failed commit = %+v", p)
	}
}

// TestProgressNeverLandsOnANewIncarnation covers an Advance that read the
// row just before a Delete and recorded its progress just after, when the
// id has been created again meanwhile.
func TestProgressNeverLandsOnANewIncarnation(t *testing.T) {
	ctx := context.Background()
	db, err := Open(filepath.Join(t.TempDir(), "bridge.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	r := Registration{Config: Config{ID: "a", Namespace: "outbox"}, NextSeq: 3}
	if _, _, err := db.Create(ctx, r, nil); err != nil {
		t.Fatal(err)
	}
	stale := progress{inc: 1_000, Progress: Progress{NextSeq: 99, Delivered: 5, Complete: true}, at: time.Now()}
	db.wb.add("a", stale)
	got, err := db.Get(ctx, "a")
	if err != nil || got.NextSeq != 3 || got.State != Active {
		t.Fatalf("Get overlays stale progress: %+v, %v", got, err)
	}
	if err := db.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if db.Pending() != 0 {
		t.Fatal("stale progress was kept")
	}
	if got, _ := db.Get(ctx, "a"); got.NextSeq != 3 || got.Delivered != 0 {
		t.Fatalf("Flush landed stale progress: %+v", got)
	}
}

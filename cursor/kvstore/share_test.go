package kvstore

import (
	"context"
	"crypto/sha256"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jetstream-bridge/bridge/cursor"
	"github.com/jetstream-bridge/bridge/cursor/cursortest"
)

// Due with a filter skips the rows the filter refuses without counting
// them against the limit: a bridge holding a third of the shards is not
// handed the earliest rows of the other two thirds in place of its own.
func TestDueFilterLeavesOtherBridgesRowsOut(t *testing.T) {
	url := startNATS(t)
	mine := func(id string) bool { return strings.HasPrefix(id, "m") }
	s := openKV(t, url, WithDueFilter(mine))
	for _, id := range []string{"o1", "o2", "o3", "m1", "o4", "m2"} {
		r := reg(id, "outbox")
		r.NextAttemptAt = t0
		create(t, s, r)
	}
	ids, _ := dueIDs(t, s, t0.Add(time.Second), 2, "outbox")
	if !slices.Equal(ids, []string{"m1", "m2"}) {
		t.Fatalf("Due with a filter and limit 2 = %v, want [m1 m2]", ids)
	}
}

// A bucket's stream answers Gets from its leader only, so a read through
// one bridge right after another's write never sees a lagging replica.
func TestBucketsReadFromTheLeader(t *testing.T) {
	url := startNATS(t)
	openKV(t, url)
	js := connect(t, url)
	for _, b := range []string{"_regs", "_idem", "_meta"} {
		st, err := js.Stream(context.Background(), "KV_"+DefaultPrefix+b)
		if err != nil {
			t.Fatal(err)
		}
		if st.CachedInfo().Config.AllowDirect {
			t.Errorf("bucket %s allows direct gets: a replica may answer stale", DefaultPrefix+b)
		}
	}
	// Opened again, as a second bridge does, the buckets are bound and
	// left as they are.
	s2 := openKV(t, url)
	if _, err := s2.Get(context.Background(), "nobody"); err == nil {
		t.Fatal("Get of a missing id succeeded")
	}
}

// A row another bridge makes due now is announced by the watch, for the
// rows the filter passes only.
func TestOnDueAnnouncesRowsMadeDueElsewhere(t *testing.T) {
	url := startNATS(t)
	due := make(chan string, 16)
	a := openKV(t, url)
	openKV(t, url,
		WithDueFilter(func(id string) bool { return strings.HasPrefix(id, "m") }),
		WithOnDue(func(ns string) { due <- ns }))
	other := reg("o1", "outbox")
	other.NextAttemptAt = time.Now()
	create(t, a, other)
	mine := reg("m1", "a2a")
	mine.NextAttemptAt = time.Now()
	create(t, a, mine)
	select {
	case ns := <-due:
		if ns != "a2a" {
			t.Fatalf("onDue(%q) first; want a2a, of m1 (o1 is filtered out)", ns)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no onDue for m1, made due through another store")
	}
}

// A List through one bridge shows a create another bridge acknowledged,
// although this bridge's watch is behind when the List starts.
func TestListWaitsForTheWatch(t *testing.T) {
	url := startNATS(t)
	a, b := openKV(t, url), openKV(t, url)
	b.watching.Lock() // b's watch stalls, as a busy bridge's would
	create(t, a, reg("fresh", "outbox"))
	time.AfterFunc(100*time.Millisecond, b.watching.Unlock)
	rows, _, err := b.List(context.Background(), cursor.ListOptions{})
	must(t, err)
	if len(rows) != 1 || rows[0].ID != "fresh" {
		t.Fatalf("List through b right after a's create = %v, want [fresh]", rows)
	}
}

// A token revoked through one store while another's watch of the tokens
// is being replaced, its old consumer dead with a lost server and no new
// one placed yet, is refused by the other within cursor.LookupLag: each
// token it holds is read from the bucket meanwhile.
func TestTokenRevokedWhileTheWatchIsReplacedIsRefused(t *testing.T) {
	url := startNATS(t)
	a, b := openKV(t, url), openKV(t, url)
	ctx := context.Background()
	tok := cursortest.Tok("ops", "team-", cursor.Operator)
	sum := sha256.Sum256([]byte("secret-ops"))
	must(t, a.CreateToken(ctx, tok))
	must(t, a.CreateToken(ctx, cursortest.Tok("kept", "team-", cursor.Viewer)))
	waitFound := func(name string, sum [sha256.Size]byte, want bool) {
		t.Helper()
		deadline := time.Now().Add(cursor.LookupLag)
		for _, ok := b.LookupToken(sum); ok != want; _, ok = b.LookupToken(sum) {
			if time.Now().After(deadline) {
				t.Fatalf("LookupToken(%s) through the other store = %v after %v, want %v", name, ok, cursor.LookupLag, want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitFound("ops", sum, true)
	waitFound("kept", sha256.Sum256([]byte("secret-kept")), true)
	// b's watch ends as one whose consumer died; its replacement opens.
	b.tokens.stop()
	<-b.tokens.done
	b.tokens.opening(true)
	t.Cleanup(func() { b.tokens.opening(false) })
	if _, err := a.DeleteToken(ctx, "ops"); err != nil {
		t.Fatal(err)
	}
	waitFound("ops", sum, false)
	if _, ok := b.LookupToken(sha256.Sum256([]byte("secret-kept"))); !ok {
		t.Fatal("a token still in the bucket was dropped")
	}
}

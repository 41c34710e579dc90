package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetstream-bridge/bridge/cursor"
	"github.com/jetstream-bridge/bridge/cursor/kvstore"
	"github.com/jetstream-bridge/bridge/internal/testutil"
)

// answerFor renders an idempotent create's answer as the admin API would
// store it: bytes a replay must return unchanged.
func answerFor(r cursor.Registration) ([]byte, error) {
	return []byte(`{"id":"` + r.ID + `","state":"active"}`), nil
}

// boltFixture builds a bolt store as a bridge leaves it: a registration
// that advanced, one parked after failures, one created with an
// idempotency key, and the key of one deleted since. It returns the
// file's path and the registrations as the bolt store reads them.
func boltFixture(t *testing.T) (string, map[string]cursor.Registration) {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "bridge.db")
	db, err := cursor.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	newReg := func(id string) cursor.Registration {
		return cursor.Registration{Config: cursor.Config{ID: id, Namespace: "outbox", Subject: "journal.orders.>",
			URL: "https://receiver.example/" + id, Secret: "whsec_c2VjcmV0"}}
	}
	create := func(id string, idem *cursor.Idempotency) {
		t.Helper()
		if _, _, err := db.Create(ctx, newReg(id), idem); err != nil {
			t.Fatalf("Create(%q): %v", id, err)
		}
	}
	create("advanced", nil)
	create("parked", nil)
	create("keyed", &cursor.Idempotency{Key: "key-1", Hash: []byte("body-1"), Answer: answerFor})
	create("gone", &cursor.Idempotency{Key: "key-2", Hash: []byte("body-2"), Answer: answerFor})
	steps := []error{
		db.Advance(ctx, "advanced", cursor.Progress{NextSeq: 10, Delivered: 9, Idle: true}),
		db.Retry(ctx, "parked", time.Now().Add(time.Minute), "POST: 503"),
		db.Park(ctx, "parked", "POST: 503 (32 attempts)"),
		db.Delete(ctx, "gone"),
		db.Flush(ctx),
	}
	for _, err := range steps {
		if err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]cursor.Registration{}
	for _, id := range []string{"advanced", "parked", "keyed"} {
		if want[id], err = db.Get(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return path, want
}

// openTestKV opens the kv store migrate writes to, as a bridge of the
// cluster would, on its own connection.
func openTestKV(t *testing.T, url string) *kvstore.Store {
	t.Helper()
	js, err := jetstream.New(testConn(t, url))
	if err != nil {
		t.Fatal(err)
	}
	s, err := kvstore.Open(t.Context(), js, kvstore.WithReplicas(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestMigrateCopiesABoltStoreOnceAndNeverOverwrites(t *testing.T) {
	cleanEnv(t)
	ctx := context.Background()
	path, want := boltFixture(t)
	url := testutil.NATS(t, t.TempDir(), -1).ClientURL()
	migrate := func(args ...string) cliResult {
		return cli(t, "", append([]string{"migrate", "--from-bolt", path, "--nats-url", url, "--kv-replicas", "1"}, args...)...)
	}

	r := migrate()
	r.want(t, 0)
	if r.out != "copied 3, skipped 0, different 0\n" {
		t.Fatalf("first run printed %q", r.out)
	}

	// The kv store serves what the bolt store held, and replays its keys.
	kv := openTestKV(t, url)
	for id, w := range want {
		got, err := kv.Get(ctx, id)
		if err != nil {
			t.Fatalf("Get(%q) from the kv store: %v", id, err)
		}
		g, _ := json.Marshal(got)
		b, _ := json.Marshal(w)
		if string(g) != string(b) {
			t.Errorf("%s in the kv store:\n got %s\nwant %s", id, g, b)
		}
	}
	if got := want["advanced"]; got.NextSeq != 10 || got.Delivered != 9 {
		t.Fatalf("the fixture did not advance: %+v", got)
	}
	if got := want["parked"]; got.State != cursor.Parked || got.Attempts != 2 || got.LastError == "" {
		t.Fatalf("the fixture did not park: %+v", got)
	}
	replay := func(id, key, body string) (cursor.Registration, []byte) {
		t.Helper()
		r, answer, err := kv.Create(ctx, cursor.Registration{Config: cursor.Config{ID: id, Namespace: "outbox"}},
			&cursor.Idempotency{Key: key, Hash: []byte(body), Answer: answerFor})
		if err != nil {
			t.Fatalf("replaying %s: %v", key, err)
		}
		return r, answer
	}
	if reg, answer := replay("keyed", "key-1", "body-1"); string(answer) != `{"id":"keyed","state":"active"}` || reg.ID != "keyed" {
		t.Errorf("replay of key-1 = %+v, %q; want the stored answer and the registration", reg, answer)
	}
	if reg, answer := replay("gone", "key-2", "body-2"); string(answer) != `{"id":"gone","state":"active"}` || reg.ID != "" {
		t.Errorf("replay of a deleted registration's key = %+v, %q; want the stored answer alone", reg, answer)
	}
	if _, err := kv.Get(ctx, "gone"); err == nil {
		t.Error("the replay of key-2 created the deleted registration again")
	}

	r = migrate()
	r.want(t, 0)
	if r.out != "copied 0, skipped 3, different 0\n" {
		t.Fatalf("second run printed %q", r.out)
	}

	// A bridge of the cluster moved a cursor since: it is left as it is.
	if _, err := kv.Rewind(ctx, "advanced", 3, time.Time{}); err != nil {
		t.Fatal(err)
	}
	migrate().want(t, 0, "copied 0, skipped 2, different 1", "advanced")
	if got, err := kv.Get(ctx, "advanced"); err != nil || got.NextSeq != 3 {
		t.Fatalf("advanced after migrating over it = %+v, %v; want the kv store's cursor 3", got, err)
	}

	r = migrate("--json")
	r.want(t, 0)
	var rep struct {
		Copied, Skipped, Different int
		Registrations              []struct{ ID, Result, Row string }
		DeletedRegistrationKeys    []struct{ Key, ID, Result string }
	}
	if err := json.Unmarshal([]byte(r.out), &rep); err != nil {
		t.Fatalf("--json printed %q: %v", r.out, err)
	}
	results := map[string]string{}
	for _, x := range rep.Registrations {
		results[x.ID] = x.Result
	}
	if rep.Skipped != 2 || rep.Different != 1 || results["advanced"] != "different" || results["keyed"] != "skipped" ||
		len(rep.DeletedRegistrationKeys) != 1 || rep.DeletedRegistrationKeys[0].ID != "gone" {
		t.Fatalf("--json report: %s", r.out)
	}
}

func TestMigrateRefusesAStoreABridgeHolds(t *testing.T) {
	cleanEnv(t)
	path, _ := boltFixture(t)
	url := testutil.NATS(t, t.TempDir(), -1).ClientURL()
	held, err := cursor.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	r := cli(t, "", "migrate", "--from-bolt", path, "--nats-url", url, "--kv-replicas", "1")
	r.want(t, 1, path, "locked")
	if r.out != "" {
		t.Errorf("a refused migrate printed a report: %q", r.out)
	}
}

func TestMigrateUsage(t *testing.T) {
	cleanEnv(t)
	missing := filepath.Join(t.TempDir(), "nothing-here.db")
	cli(t, "", "migrate", "--nats-url", "nats://127.0.0.1:1").want(t, 2, "missing --from-bolt")
	cli(t, "", "migrate", "--from-bolt", missing).want(t, 2, "missing --nats-url")
	cli(t, "", "migrate", "--from-bolt", missing, "--nats-url", "nats://127.0.0.1:1", "--kv-replicas", "9").want(t, 2, "--kv-replicas")
	r := cli(t, "", "migrate", "--from-bolt", missing, "--nats-url", "nats://127.0.0.1:1")
	r.want(t, 1, "no bolt store at "+missing)
	if strings.Contains(r.errOut, "usage") {
		t.Errorf("a missing store is not bad usage: %s", r.errOut)
	}
	cli(t, "", "help").want(t, 0, "migrate")

	// A store with nothing to say yet: no report, only why.
	empty := filepath.Join(t.TempDir(), "bridge.db")
	db, err := cursor.Open(empty)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	r = cli(t, "", "migrate", "--from-bolt", empty, "--nats-url", "nats://user:pa55word@127.0.0.1:1")
	r.want(t, 1, "connecting to NATS at nats://127.0.0.1:1")
	if r.out != "" || strings.Contains(r.errOut, "pa55word") {
		t.Errorf("a migrate that reached no NATS printed %q, %q", r.out, r.errOut)
	}
}

// TestMigrateCopiesTokens: the scoped tokens of a bolt store work on the
// kv store after a migrate, and a token of the same name the kv store
// made since is left as it is.
func TestMigrateCopiesTokens(t *testing.T) {
	cleanEnv(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "bridge.db")
	db, err := cursor.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	tok := func(name string) cursor.Token {
		sum := sha256.Sum256([]byte("bst_" + name))
		return cursor.Token{Name: name, IDPrefix: name + "-", Role: cursor.Operator, CreatedAt: time.Unix(1e9, 0).UTC(), Hash: sum[:]}
	}
	for _, name := range []string{"team-a", "team-b"} {
		if err := db.CreateToken(ctx, tok(name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	url := testutil.NATS(t, t.TempDir(), -1).ClientURL()
	migrate := func() cliResult {
		return cli(t, "", "migrate", "--from-bolt", path, "--nats-url", url, "--kv-replicas", "1")
	}
	if r := migrate(); r.out != "copied 0, skipped 0, different 0\ntokens: copied 2, skipped 0, different 0\n" {
		t.Fatalf("first run: exit %d, printed %q %q", r.code, r.out, r.errOut)
	}
	kv := openTestKV(t, url)
	if got, ok := kv.LookupToken(sha256.Sum256([]byte("bst_team-b"))); !ok || got.IDPrefix != "team-b-" || got.Role != cursor.Operator {
		t.Fatalf("team-b in the kv store: %+v, %v", got, ok)
	}
	if _, err := kv.DeleteToken(ctx, "team-a"); err != nil {
		t.Fatal(err)
	}
	other := tok("team-a")
	other.Hash = make([]byte, sha256.Size)
	if err := kv.CreateToken(ctx, other); err != nil {
		t.Fatal(err)
	}
	migrate().want(t, 0, "tokens: copied 0, skipped 1, different 1", `token "team-a"`)
}

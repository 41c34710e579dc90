package cursor_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/jetstream-bridge/bridge/cursor"
)

func TestOpenCreatesAPrivateFile(t *testing.T) {
	_, path := open(t)
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if mode := info.Mode().Perm(); mode != 0o600 {
		t.Fatalf("mode = %v, want 0600: the file holds webhook secrets", mode)
	}
}

func TestOpenFailsFastWhenAnotherProcessHoldsTheFile(t *testing.T) {
	_, path := open(t)
	_, err := cursor.Open(path, cursor.WithLockTimeout(100*time.Millisecond))
	if err == nil {
		t.Fatal("second Open of a held file succeeded")
	}
	for _, want := range []string{path, "is locked by another process (another bridge running on this data dir?)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

func TestOpenReleasesTheLockOnClose(t *testing.T) {
	db, path := open(t)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	reopen(t, path, cursor.WithLockTimeout(100*time.Millisecond))
}

func TestOpenRefusesFilesItCannotTrust(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.db")
	noise := make([]byte, 64<<10)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range noise {
		noise[i] = byte(r.Uint32())
	}
	writeFile(t, garbage, noise)

	short := filepath.Join(dir, "short.db")
	writeFile(t, short, []byte("not a database"))

	foreign := filepath.Join(dir, "foreign.db")
	withBolt(t, foreign, func(tx *bolt.Tx) error {
		_, err := tx.CreateBucket([]byte("widgets"))
		return err
	})

	newer := filepath.Join(dir, "newer.db")
	closeNow(t, reopen(t, newer))
	withBolt(t, newer, func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("meta")).Put([]byte("schema"), []byte("99"))
	})

	for name, tc := range map[string]struct {
		path string
		want string
	}{
		"garbage":        {garbage, "is not a bridge store or is damaged"},
		"short":          {short, "is not a bridge store or is damaged"},
		"foreign":        {foreign, `is not a bridge store: it holds a bucket "widgets"`},
		"newer":          {newer, "was written by a newer bridge (store schema 99"},
		"truncated-40k":  {truncated(t, dir, 40_000), "is not a bridge store or is damaged"},
		"truncated-400k": {truncated(t, dir, 400_000), "is not a bridge store or is damaged"},
	} {
		t.Run(name, func(t *testing.T) {
			_, openErr := cursor.Open(tc.path, cursor.WithLockTimeout(100*time.Millisecond))
			err := openErr
			if err == nil {
				t.Fatal("Open succeeded")
			}
			if !strings.Contains(err.Error(), tc.path) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q should name %s and say %q", err, tc.path, tc.want)
			}
			// The lock was released: the file can be opened by bbolt again.
			bdb, err := bolt.Open(tc.path, 0o600, &bolt.Options{Timeout: 100 * time.Millisecond, ReadOnly: true})
			if err == nil {
				_ = bdb.Close()
			} else if strings.Contains(err.Error(), "timeout") {
				t.Fatalf("file still locked after a failed Open (%v): %v", openErr, err)
			}
		})
	}
}

// truncated writes a real store with enough rows to span many pages (about
// 1.4 MB) and cuts it to size bytes.
func truncated(t *testing.T, dir string, size int64) string {
	t.Helper()
	path := filepath.Join(dir, fmt.Sprintf("truncated-%d.db", size))
	db := reopen(t, path)
	rows := make([]cursor.Registration, 2000)
	for i := range rows {
		rows[i] = reg(fmt.Sprintf("r%05d", i), "outbox")
		rows[i].State = cursor.Active
	}
	if err := db.InsertForTest(rows); err != nil {
		t.Fatal(err)
	}
	closeNow(t, db)
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestMetaSurvivesReopen(t *testing.T) {
	ctx := context.Background()
	db, path := open(t)
	if v, err := db.GetMeta(ctx, "stream-created"); err != nil || v != nil {
		t.Fatalf("GetMeta of an absent key = %q, %v; want nil, nil", v, err)
	}
	if err := db.PutMeta(ctx, "stream-created", []byte("2026-03-01T12:00:00Z")); err != nil {
		t.Fatal(err)
	}
	closeNow(t, db)
	db = reopen(t, path)
	v, err := db.GetMeta(ctx, "stream-created")
	if err != nil || string(v) != "2026-03-01T12:00:00Z" {
		t.Fatalf("GetMeta after reopen = %q, %v", v, err)
	}
	if err := db.PutMeta(ctx, "stream-created", nil); err != nil {
		t.Fatal(err)
	}
	if v, _ := db.GetMeta(ctx, "stream-created"); v != nil {
		t.Fatalf("deleted meta key still reads %q", v)
	}
	// The schema version is not reachable through the caller's keys.
	if v, _ := db.GetMeta(ctx, "schema"); v != nil {
		t.Fatalf(`GetMeta("schema") = %q, want nil`, v)
	}
}

func TestOperationsAfterCloseSayTheStoreIsClosed(t *testing.T) {
	db, path := open(t)
	create(t, db, reg("a", "outbox"))
	closeNow(t, db)
	_, err := db.Get(context.Background(), "a")
	if err == nil || !strings.Contains(err.Error(), path+" is closed") {
		t.Fatalf("Get after Close: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func withBolt(t *testing.T, path string, fn func(*bolt.Tx) error) {
	t.Helper()
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	if err := bdb.Update(fn); err != nil {
		t.Fatal(err)
	}
}

func closeNow(t testing.TB, db *cursor.DB) {
	t.Helper()
	if err := db.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

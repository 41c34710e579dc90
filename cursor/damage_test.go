package cursor_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/jetstream-bridge/bridge/cursor"
)

// A store whose header, size and buckets are intact but one of whose data
// pages was overwritten is refused at Open with an error naming the file,
// never accepted to panic inside bbolt at the first read or write.
func TestOpenRefusesAStoreWithADamagedDataPage(t *testing.T) {
	img, pageSize, leaves, root := filledStore(t)
	mid := leaves[len(leaves)/2]
	for name, damage := range map[string]func(b []byte){
		"leaf page noise": func(b []byte) {
			noise(b[mid*pageSize : (mid+1)*pageSize])
		},
		"leaf page body noise": func(b []byte) {
			noise(b[mid*pageSize+16 : (mid+1)*pageSize])
		},
		"leaf page body 0xff": func(b []byte) {
			copy(b[mid*pageSize+16:(mid+1)*pageSize], bytes.Repeat([]byte{0xff}, pageSize-16))
		},
		"leaf page zeroed": func(b []byte) {
			clear(b[mid*pageSize : (mid+1)*pageSize])
		},
		"keys out of order": func(b []byte) {
			// Every page still reads; only the order of keys is wrong,
			// which bbolt's own check finds.
			if n := bytes.Count(b, []byte("r01501")); n == 0 {
				panic("no key r01501 in the store")
			}
			copy(b, bytes.ReplaceAll(b, []byte("r01501"), []byte("r00000")))
		},
		"registrations root noise": func(b []byte) {
			noise(b[root*pageSize : (root+1)*pageSize])
		},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "bridge.db")
			b := bytes.Clone(img)
			damage(b)
			writeFile(t, path, b)
			db, err := cursor.Open(path, cursor.WithLockTimeout(100*time.Millisecond))
			if err == nil {
				_ = db.Close()
				t.Fatal("Open accepted a store with a damaged data page")
			}
			t.Log(err)
			for _, want := range []string{path, "is not a bridge store or is damaged", "restore it from a backup"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			// The lock was released: the operator can move the file aside.
			bdb, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 100 * time.Millisecond, ReadOnly: true})
			if err == nil {
				_ = bdb.Close()
			} else if strings.Contains(err.Error(), "timeout") {
				t.Fatalf("file still locked after a failed Open: %v", err)
			}
		})
	}
}

// The undamaged store the damage tests start from opens, and still holds
// every row: the page check refuses damage, not a store with thousands of
// rows.
func TestOpenAcceptsAFilledStore(t *testing.T) {
	img, _, _, _ := filledStore(t)
	path := filepath.Join(t.TempDir(), "bridge.db")
	writeFile(t, path, img)
	db := reopen(t, path)
	check(t, db)
	if got := get(t, db, "r01234"); got.ID != "r01234" {
		t.Fatalf("Get = %+v", got)
	}
}

// A page damaged while the store is open fails the reads and writes that
// reach it with an error naming the file; the process goes on and the
// store still closes.
func TestPageDamagedAfterOpenIsAnErrorNotAPanic(t *testing.T) {
	img, pageSize, _, root := filledStore(t)
	path := filepath.Join(t.TempDir(), "bridge.db")
	writeFile(t, path, img)
	db, err := cursor.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	garbage := make([]byte, pageSize)
	noise(garbage)
	_, err = f.WriteAt(garbage, int64(root*pageSize))
	if cerr := f.Close(); err != nil || cerr != nil {
		t.Fatal(err, cerr)
	}

	ctx := context.Background()
	_, _, listErr := db.List(ctx, cursor.ListOptions{})
	_, _, createErr := db.Create(ctx, reg("z-new", "outbox"), nil)
	advanceErr := db.Advance(ctx, "r01234", cursor.Progress{NextSeq: 9, Delivered: 1})
	for name, err := range map[string]error{"List": listErr, "Create": createErr, "Advance": advanceErr} {
		if err == nil {
			t.Errorf("%s on a damaged page succeeded", name)
			continue
		}
		for _, want := range []string{path, "is damaged", "restore it from a backup"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: error %q does not say %q", name, err, want)
			}
		}
	}
	if err := db.Close(); err != nil {
		t.Fatalf("Close after the damage: %v", err)
	}
}

// A row whose page is sound but whose bytes are not a registration is
// reported with the file it is in.
func TestUnreadableRowNamesTheFile(t *testing.T) {
	db, path := open(t)
	create(t, db, reg("a", "outbox"))
	closeNow(t, db)
	withBolt(t, path, func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("registrations")).Put([]byte("\x00\x00\x00"), []byte("not a row"))
	})
	db = reopen(t, path)
	_, _, err := db.List(context.Background(), cursor.ListOptions{})
	if err == nil {
		t.Fatal("List of a store with an unreadable row succeeded")
	}
	perr := db.Positions(context.Background(), func(cursor.Position) {})
	if perr == nil {
		t.Fatal("Positions over a store with an unreadable row succeeded")
	}
	for _, err := range []error{err, perr} {
		for _, want := range []string{path, `registration "\x00\x00\x00"`, "is unreadable", "unknown format"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
	}
}

// A file the bridge may not open is named once, with the reason.
func TestOpenErrorNamesThePathOnce(t *testing.T) {
	path := t.TempDir() // a directory: cannot be opened for writing, even by root
	_, err := cursor.Open(path)
	if err == nil {
		t.Fatal("Open of a directory succeeded")
	}
	if n := strings.Count(err.Error(), path); n != 1 {
		t.Errorf("error %q names %s %d times, want once", err, path, n)
	}
	if pe := (*fs.PathError)(nil); !errors.As(err, &pe) {
		t.Errorf("error %q does not keep the cause", err)
	}
}

// filledStore builds a store of 3,000 registrations and returns its bytes,
// its page size, the ids of its leaf pages in file order, and the root page
// of its registrations bucket.
func filledStore(t *testing.T) (img []byte, pageSize int, leaves []int, root int) {
	t.Helper()
	db, path := open(t)
	rows := make([]cursor.Registration, 3000)
	for i := range rows {
		rows[i] = reg(fmt.Sprintf("r%05d", i), "outbox")
	}
	if err := db.CreateMany(context.Background(), rows); err != nil {
		t.Fatal(err)
	}
	closeNow(t, db)

	bdb, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	pageSize = bdb.Info().PageSize
	if err := bdb.View(func(tx *bolt.Tx) error {
		root = int(tx.Bucket([]byte("registrations")).Root())
		for id := 2; ; id++ {
			info, err := tx.Page(id)
			if err != nil || info == nil {
				return err
			}
			if info.Type == "leaf" {
				leaves = append(leaves, id)
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	if root == 0 || len(leaves) < 20 {
		t.Fatalf("store too small to damage in the middle: root page %d, %d leaf pages", root, len(leaves))
	}
	img, err = os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return img, pageSize, leaves, root
}

// noise overwrites b with the same pseudo-random bytes on every run.
func noise(b []byte) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
}

// BenchmarkOpen100kRegistrations is the cost of Open, page check included,
// on a store of 100,000 registrations.
func BenchmarkOpen100kRegistrations(b *testing.B) {
	db, path := open(b)
	ctx := context.Background()
	for start := 0; start < 100_000; start += 10_000 {
		rows := make([]cursor.Registration, 10_000)
		for i := range rows {
			rows[i] = reg(fmt.Sprintf("r%06d", start+i), "outbox")
		}
		if err := db.CreateMany(ctx, rows); err != nil {
			b.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		db, err := cursor.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		if err := db.Close(); err != nil {
			b.Fatal(err)
		}
	}
	if info, err := os.Stat(path); err == nil {
		b.ReportMetric(float64(info.Size())/(1<<20), "file-MB")
	}
}

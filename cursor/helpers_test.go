package cursor_test

import (
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/jetstream-bridge/bridge/cursor"
	"github.com/jetstream-bridge/bridge/cursor/cursortest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The helpers every store's tests share (cursortest): a clock at t0, a
// registration, and calls that fail the test on an error.
var (
	t0        = cursortest.T0
	newClock  = cursortest.NewClock
	reg       = cursortest.Reg
	create    = cursortest.Create
	get       = cursortest.Get
	advance   = cursortest.Advance
	flush     = cursortest.Flush
	dueIDs    = cursortest.DueIDs
	wantErrIs = cursortest.WantErrIs
)

type clock = cursortest.Clock

// open opens a store at a new path in t.TempDir, closed at cleanup.
func open(t testing.TB, opts ...cursor.Option) (*cursor.DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "bridge.db")
	return reopen(t, path, opts...), path
}

// reopen opens path, closed at cleanup.
func reopen(t testing.TB, path string, opts ...cursor.Option) *cursor.DB {
	t.Helper()
	db, err := cursor.Open(path, opts...)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// crash closes db without flushing and opens the file again.
func crash(t testing.TB, db *cursor.DB, opts ...cursor.Option) *cursor.DB {
	t.Helper()
	path := db.Path()
	if err := db.CloseWithoutFlush(); err != nil {
		t.Fatalf("close without flush: %v", err)
	}
	return reopen(t, path, opts...)
}

// check fails the test when an index or count disagrees with the rows.
func check(t testing.TB, db *cursor.DB) {
	t.Helper()
	if err := db.CheckIndexes(); err != nil {
		t.Fatal(err)
	}
}

package cursor_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jetstream-bridge/bridge/cursor"
)

// TestCreateManyStoresWhatCreateStores holds CreateMany to Create's
// semantics by comparison: the same input through both gives the same
// stored registration, apart from its id.
func TestCreateManyStoresWhatCreateStores(t *testing.T) {
	clk := newClock()
	db, _ := open(t, cursor.WithClock(clk.Now))
	ctx := context.Background()

	in := reg("one", "outbox")
	in.NextSeq = 42
	in.Batch = &cursor.Batch{MaxEvents: 100}
	// Delivery state handed in by the caller is not taken over.
	in.State, in.Attempts, in.LastError, in.Delivered = cursor.Parked, 7, "old", 99
	in.CompletedAt = t0.Add(-time.Hour)
	create(t, db, in)

	many := in
	many.ID = "many"
	if err := db.CreateMany(ctx, []cursor.Registration{many}); err != nil {
		t.Fatalf("CreateMany: %v", err)
	}
	got, want := get(t, db, "many"), get(t, db, "one")
	got.ID = want.ID
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("CreateMany stored\n%+v\nCreate stored\n%+v", got, want)
	}
	if got.State != cursor.Active || got.NextSeq != 42 || got.Attempts != 0 || got.Delivered != 0 ||
		!got.CreatedAt.Equal(t0) || !got.NextAttemptAt.Equal(t0) || !got.CompletedAt.IsZero() {
		t.Fatalf("CreateMany stored %+v", got)
	}
	ids, _ := dueIDs(t, db, t0, 10, "outbox")
	slices.Sort(ids)
	if !slices.Equal(ids, []string{"many", "one"}) {
		t.Fatalf("Due = %v, want both rows", ids)
	}
	check(t, db)
}

// TestCreateManyLoadsALargeStoreInChunks is the loading path a benchmark or
// a migration takes: many rows, several calls, every index consistent, a
// schedule the caller set kept, and rows that behave like any other once
// stored.
func TestCreateManyLoadsALargeStoreInChunks(t *testing.T) {
	clk := newClock()
	db, path := open(t, cursor.WithClock(clk.Now))
	ctx := context.Background()

	const n = 3_000
	later := t0.Add(time.Hour)
	rows := make([]cursor.Registration, n)
	for i := range rows {
		ns := "outbox"
		if i%3 == 0 {
			ns = "a2a"
		}
		rows[i] = reg(fmt.Sprintf("idle-%06d", i), ns)
		rows[i].Subject = fmt.Sprintf("journal.idle.%d", i)
		rows[i].NextSeq = 1
		if i%2 == 0 {
			rows[i].NextAttemptAt = later
		}
	}
	for chunk := range slices.Chunk(rows, 1_000) {
		if err := db.CreateMany(ctx, chunk); err != nil {
			t.Fatalf("CreateMany: %v", err)
		}
	}
	check(t, db)

	// Due now: the rows without a schedule of their own; due later: all.
	for _, tc := range []struct {
		at   time.Time
		ns   string
		want int
	}{
		{t0, "outbox", countRows(rows, "outbox", func(i int) bool { return i%2 != 0 })},
		{t0, "a2a", countRows(rows, "a2a", func(i int) bool { return i%2 != 0 })},
		{later, "outbox", countRows(rows, "outbox", func(int) bool { return true })},
		{later, "a2a", countRows(rows, "a2a", func(int) bool { return true })},
	} {
		if ids, _ := dueIDs(t, db, tc.at, n, tc.ns); len(ids) != tc.want {
			t.Errorf("Due(%v, %s) = %d rows, want %d", tc.at, tc.ns, len(ids), tc.want)
		}
	}

	// A loaded row takes progress like any other, and the whole load is
	// durable once CreateMany returned.
	advance(t, db, "idle-000001", cursor.Progress{NextSeq: 5, Delivered: 4, Idle: true})
	flush(t, db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = reopen(t, path, cursor.WithClock(clk.Now))
	if r := get(t, db, "idle-000001"); r.NextSeq != 5 || r.Delivered != 4 || !r.NextAttemptAt.IsZero() {
		t.Fatalf("after advance and reopen: %+v", r)
	}
	if got := listAll(t, db); got != n {
		t.Fatalf("List after reopen = %d rows, want %d", got, n)
	}
	check(t, db)
}

// listAll counts every registration, page by page.
func listAll(t *testing.T, db *cursor.DB) int {
	t.Helper()
	n, after := 0, ""
	for {
		rows, next, err := db.List(context.Background(), cursor.ListOptions{After: after, Limit: 1000})
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		n += len(rows)
		if next == "" {
			return n
		}
		after = next
	}
}

func countRows(rows []cursor.Registration, ns string, keep func(i int) bool) int {
	n := 0
	for i, r := range rows {
		if r.Namespace == ns && keep(i) {
			n++
		}
	}
	return n
}

// TestCreateManyIsAllOrNothing: one bad row, whatever its fault, leaves the
// store as it was, so a caller can fix the input and load the chunk again.
func TestCreateManyIsAllOrNothing(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		bad    cursor.Registration
		target error // nil: any error
	}{
		{"an id already stored", reg("taken", "outbox"), cursor.ErrExists},
		{"an id given twice", reg("b", "outbox"), cursor.ErrExists},
		{"an empty id", reg("", "outbox"), nil},
		{"an empty namespace", reg("x", ""), nil},
		{"an id too long to store", reg(strings.Repeat("x", 2000), "outbox"), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, _ := open(t)
			create(t, db, reg("taken", "outbox"))
			err := db.CreateMany(ctx, []cursor.Registration{reg("a", "outbox"), reg("b", "a2a"), tc.bad, reg("c", "outbox")})
			if err == nil {
				t.Fatal("CreateMany succeeded")
			}
			if tc.target != nil {
				wantErrIs(t, err, tc.target)
			}
			for _, id := range []string{"a", "b", "c"} {
				if _, err := db.Get(ctx, id); !errors.Is(err, cursor.ErrNotFound) {
					t.Errorf("%q was stored by a failed CreateMany: %v", id, err)
				}
			}
			if rows, _, _ := db.List(ctx, cursor.ListOptions{}); len(rows) != 1 {
				t.Errorf("store holds %d rows, want only the one stored before", len(rows))
			}
			check(t, db)
		})
	}
}

func TestCreateManyIDExistsErrorNamesTheID(t *testing.T) {
	db, _ := open(t)
	create(t, db, reg("taken", "outbox"))
	err := db.CreateMany(context.Background(), []cursor.Registration{reg("free", "outbox"), reg("taken", "a2a")})
	wantErrIs(t, err, cursor.ErrExists)
	if !strings.Contains(err.Error(), `"taken"`) {
		t.Fatalf("error does not name the id: %v", err)
	}
}

func TestCreateManyEdges(t *testing.T) {
	t.Run("nothing to create writes nothing", func(t *testing.T) {
		db, _ := open(t)
		if err := db.CreateMany(context.Background(), nil); err != nil {
			t.Fatalf("CreateMany(nil) = %v", err)
		}
	})
	t.Run("a canceled context stores nothing", func(t *testing.T) {
		db, _ := open(t)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		err := db.CreateMany(ctx, []cursor.Registration{reg("a", "outbox")})
		wantErrIs(t, err, context.Canceled)
		if _, err := db.Get(context.Background(), "a"); !errors.Is(err, cursor.ErrNotFound) {
			t.Fatalf("canceled CreateMany stored a row: %v", err)
		}
	})
	t.Run("a closed store refuses", func(t *testing.T) {
		db, _ := open(t)
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		if err := db.CreateMany(context.Background(), []cursor.Registration{reg("a", "outbox")}); err == nil {
			t.Fatal("CreateMany on a closed store succeeded")
		}
	})
}

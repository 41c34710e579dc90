package cursor_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jetstream-bridge/bridge/cursor"
)

func TestDueDoesNotLetAnotherNamespaceStarveThisOne(t *testing.T) {
	db, _ := open(t, cursor.WithClock(newClock().Now))
	for i := range 5 {
		create(t, db, reg(fmt.Sprintf("a2a-%d", i), "a2a"))
	}
	create(t, db, reg("outbox-0", "outbox"))

	ids, unserved := dueIDs(t, db, t0, 2, "outbox")
	if !slices.Equal(ids, []string{"outbox-0"}) || unserved != 5 {
		t.Fatalf("Due(outbox, limit 2) = %v unserved %d; want [outbox-0] unserved 5", ids, unserved)
	}
	ids, unserved = dueIDs(t, db, t0, 2, "a2a")
	if len(ids) != 2 || unserved != 1 {
		t.Fatalf("Due(a2a, limit 2) = %v unserved %d; want 2 rows, unserved 1", ids, unserved)
	}
	// Rows of the other namespace that are not due yet are not unserved.
	ids, unserved = dueIDs(t, db, t0.Add(-time.Second), 2, "outbox")
	if len(ids) != 0 || unserved != 0 {
		t.Fatalf("Due before anything is due = %v unserved %d", ids, unserved)
	}
}

func TestDueIsEarliestFirstAndStopsAtAt(t *testing.T) {
	db, _ := open(t)
	for i, off := range []int{4, 2, 5, 1, 3} {
		r := reg(fmt.Sprintf("r%d", i), "outbox")
		r.NextAttemptAt = t0.Add(time.Duration(off) * time.Second)
		create(t, db, r)
	}
	if ids, _ := dueIDs(t, db, t0.Add(3*time.Second), 10, "outbox"); !slices.Equal(ids, []string{"r3", "r1", "r4"}) {
		t.Fatalf("Due(t0+3s) = %v, want [r3 r1 r4]", ids)
	}
	if ids, _ := dueIDs(t, db, t0.Add(time.Hour), 2, "outbox"); !slices.Equal(ids, []string{"r3", "r1"}) {
		t.Fatalf("Due(limit 2) = %v, want [r3 r1]", ids)
	}
	if ids, unserved := dueIDs(t, db, t0.Add(time.Hour), 0, "a2a"); len(ids) != 0 || unserved != 5 {
		t.Fatalf("Due(limit 0) = %v unserved %d; want no rows, unserved 5", ids, unserved)
	}
}

func TestDueKeepsNamespacesThatShareAPrefixApart(t *testing.T) {
	db, _ := open(t, cursor.WithClock(newClock().Now))
	create(t, db, reg("short", "out"))
	create(t, db, reg("long", "outbox"))
	if ids, unserved := dueIDs(t, db, t0, 10, "out"); !slices.Equal(ids, []string{"short"}) || unserved != 1 {
		t.Fatalf("Due(out) = %v unserved %d", ids, unserved)
	}
	if ids, unserved := dueIDs(t, db, t0, 10, "outbox"); !slices.Equal(ids, []string{"long"}) || unserved != 1 {
		t.Fatalf("Due(outbox) = %v unserved %d", ids, unserved)
	}
}

func TestUnservedStopsCountingAtItsCap(t *testing.T) {
	db, _ := open(t)
	rows := make([]cursor.Registration, cursor.MaxUnserved+50)
	for i := range rows {
		rows[i] = reg(fmt.Sprintf("a2a-%05d", i), "a2a")
		rows[i].State, rows[i].NextAttemptAt = cursor.Active, t0
	}
	if err := db.InsertForTest(rows); err != nil {
		t.Fatal(err)
	}
	if _, unserved := dueIDs(t, db, t0, 10, "outbox"); unserved != cursor.MaxUnserved {
		t.Fatalf("Unserved = %d, want the cap %d", unserved, cursor.MaxUnserved)
	}
}

package cursor_test

import (
	"fmt"
	"testing"

	"github.com/jetstream-bridge/bridge/cursor"
)

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

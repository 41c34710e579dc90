package cursor_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jetstream-bridge/bridge/cursor"
)

func TestAFailedFlushKeepsProgressForTheNext(t *testing.T) {
	db, _ := open(t)
	rows := make([]cursor.Registration, 400)
	for i := range rows {
		rows[i] = reg(fmt.Sprintf("r%03d", i), "outbox")
		rows[i].State = cursor.Active
		rows[i].URL = "https://receiver.example/" + string(make([]byte, 1000))
	}
	if err := db.InsertForTest(rows); err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		advance(t, db, r.ID, cursor.Progress{NextSeq: 5, Delivered: 1})
	}
	db.SetMaxSizeForTest(1) // the disk is full
	if err := db.Flush(context.Background()); err == nil {
		t.Fatal("Flush on a full disk succeeded")
	}
	// Progress acknowledged after the failure merges with the kept one.
	advance(t, db, "r000", cursor.Progress{NextSeq: 3, Delivered: 2})
	if r := get(t, db, "r000"); r.NextSeq != 5 || r.Delivered != 3 {
		t.Fatalf("Get after a failed Flush = %+v", r)
	}
	if n := db.Pending(); n != len(rows) {
		t.Fatalf("Pending after a failed Flush = %d, want %d", n, len(rows))
	}
	db.SetMaxSizeForTest(0)
	flush(t, db)
	db = crash(t, db)
	for _, id := range []string{"r000", "r199", "r399"} {
		want := uint64(1)
		if id == "r000" {
			want = 3
		}
		if r := get(t, db, id); r.NextSeq != 5 || r.Delivered != want {
			t.Fatalf("%s after the retried Flush = NextSeq %d Delivered %d", id, r.NextSeq, r.Delivered)
		}
	}
	check(t, db)
}

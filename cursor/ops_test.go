package cursor_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/jetstream-bridge/bridge/cursor"
)

func TestListCapsThePage(t *testing.T) {
	db, _ := open(t)
	rows := make([]cursor.Registration, 1200)
	for i := range rows {
		rows[i] = reg(strings.Repeat("0", 4-len(itoa(i)))+itoa(i), "outbox")
		rows[i].State = cursor.Active
	}
	if err := db.InsertForTest(rows); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ limit, want int }{{0, 100}, {-1, 100}, {5000, 1000}} {
		got, next, err := db.List(context.Background(), cursor.ListOptions{Limit: tc.limit})
		if err != nil || len(got) != tc.want || next != got[len(got)-1].ID {
			t.Errorf("List(limit %d) = %d rows next %q, %v; want %d", tc.limit, len(got), next, err, tc.want)
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

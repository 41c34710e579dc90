package cursor_test

import (
	"context"
	"testing"
	"time"

	"github.com/jetstream-bridge/bridge/cursor"
)

func TestZZTiming(t *testing.T) {
	clk := newClock()
	db, _ := open(t, cursor.WithClock(clk.Now))
	start := time.Now()
	if err := db.InsertForTest(completedRows("done", 100_000, t0.Add(-48*time.Hour))); err != nil {
		t.Fatal(err)
	}
	t.Logf("insert %v", time.Since(start))
	start = time.Now()
	rep, err := db.Purge(context.Background(), noKeyAge(cursor.NewRetentionPolicy(time.Hour)))
	t.Logf("purge %v %+v %v", time.Since(start), rep, err)
}

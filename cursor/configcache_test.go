package cursor_test

import (
	"context"
	"testing"
	"time"

	"github.com/jetstream-bridge/bridge/cursor"
)

// Get serves Configs from a cache; a Replace, a Delete and a re-Create must
// each be seen by the next Get, and a caller changing what it got must not
// change what the next caller gets.
func TestGetSeesEveryConfigChange(t *testing.T) {
	db, _ := open(t)
	ctx := context.Background()
	r := reg("billing", "outbox")
	r.Batch = &cursor.Batch{MaxEvents: 10}
	create(t, db, r)

	got := get(t, db, "billing")
	got.Batch.MaxEvents = 99
	got.URL = "https://changed.example/"
	if again := get(t, db, "billing"); again.Batch.MaxEvents != 10 || again.URL != r.URL {
		t.Fatalf("a caller's change reached the store's answer: batch %+v, url %q", again.Batch, again.URL)
	}

	c := r.Config
	c.URL, c.Secret, c.Batch = "https://new.example/hook", "", nil
	if _, err := db.Replace(ctx, c, time.Now()); err != nil {
		t.Fatal(err)
	}
	if got := get(t, db, "billing"); got.URL != c.URL || got.Secret != "" || got.Batch != nil {
		t.Fatalf("after Replace, Get = url %q secret set %v batch %+v; want the new config", got.URL, got.Secret != "", got.Batch)
	}

	if err := db.Delete(ctx, "billing"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Get(ctx, "billing"); err == nil {
		t.Fatal("Get after Delete found the registration")
	}
	create(t, db, r)
	if got := get(t, db, "billing"); got.URL != r.URL || got.Batch == nil || got.Batch.MaxEvents != 10 {
		t.Fatalf("after re-Create, Get = url %q batch %+v; want the created config", got.URL, got.Batch)
	}
}

package cursor_test

import (
	"context"
	"testing"
	"time"

	"github.com/jetstream-bridge/bridge/cursor"
)

func TestIdempotencyKeysListEveryKeyAndWhetherItsRegistrationIsStillThere(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	db, _ := open(t, cursor.WithClock(c.Now))
	createWith := func(id, key string) {
		t.Helper()
		idem := &cursor.Idempotency{Key: key, Hash: []byte("hash-" + key), Answer: func(r cursor.Registration) ([]byte, error) {
			return []byte(`{"id":"` + r.ID + `"}`), nil
		}}
		if _, _, err := db.Create(ctx, reg(id, "outbox"), idem); err != nil {
			t.Fatalf("Create(%q, key %q): %v", id, key, err)
		}
	}
	createWith("live", "k1")
	c.Add(time.Minute)
	createWith("gone", "k2")
	createWith("again", "k3")
	if err := db.Delete(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	if err := db.Delete(ctx, "again"); err != nil {
		t.Fatal(err)
	}
	create(t, db, reg("again", "outbox")) // the same id, another registration

	keys, err := db.IdempotencyKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []cursor.StoredKey{
		{Key: "k1", ID: "live", Current: true, CreatedAt: t0},
		{Key: "k2", ID: "gone", Current: false, CreatedAt: t0.Add(time.Minute)},
		{Key: "k3", ID: "again", Current: false, CreatedAt: t0.Add(time.Minute)},
	}
	if len(keys) != len(want) {
		t.Fatalf("IdempotencyKeys = %+v, want %d keys", keys, len(want))
	}
	for i, w := range want {
		k := keys[i]
		if k.Key != w.Key || k.ID != w.ID || k.Current != w.Current || !k.CreatedAt.Equal(w.CreatedAt) ||
			string(k.Hash) != "hash-"+w.Key || string(k.Answer) != `{"id":"`+w.ID+`"}` {
			t.Errorf("key %d = %+v, want %+v with its hash and answer", i, k, w)
		}
	}
}

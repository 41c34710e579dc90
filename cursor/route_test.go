package cursor_test

import (
	"context"
	"slices"
	"testing"

	"github.com/jetstream-bridge/bridge/cursor"
)

func routes(t *testing.T, db *cursor.DB, filter string) []string {
	t.Helper()
	var ids []string
	if err := db.Routes(context.Background(), filter, func(id, ns string) { ids = append(ids, ns+"/"+id) }); err != nil {
		t.Fatal(err)
	}
	return ids
}

func on(id, ns, subject string) cursor.Registration {
	r := reg(id, ns)
	r.Subject = subject
	return r
}

// A store written by a bridge of schema version 1 gains the version 2
// indexes when it is opened, built from its rows.
func TestOpenMigratesSchema1(t *testing.T) {
	db, path := open(t)
	create(t, db, on("a", "outbox", "journal.a"))
	create(t, db, on("w", "outbox", "journal.>"))
	advance(t, db, "a", cursor.Progress{NextSeq: 7, Idle: true})
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := cursor.DowngradeToSchema1(path); err != nil {
		t.Fatal(err)
	}
	db = reopen(t, path)
	check(t, db)
	if got := routes(t, db, "journal.a"); !slices.Equal(got, []string{"outbox/a"}) {
		t.Fatalf("routes after migration: %v", got)
	}
	if n, err := db.WakeBehind(context.Background(), 8); err != nil || n != 1 {
		t.Fatalf("WakeBehind after migration woke %d (%v), want the idle one", n, err)
	}
}

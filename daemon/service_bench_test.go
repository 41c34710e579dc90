package daemon

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/jetstream-bridge/bridge/cursor"
)

// BenchmarkServiceStatus is the store's part of one answer of the status
// endpoint on a bolt store of 100,000 registrations: the counts kept
// beside the rows, read in one transaction, whatever the number of rows.
func BenchmarkServiceStatus(b *testing.B) {
	db, err := cursor.Open(filepath.Join(b.TempDir(), "bridge.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	const rows, chunk = 100_000, 10_000
	for start := 0; start < rows; start += chunk {
		rs := make([]cursor.Registration, chunk)
		for i := range rs {
			rs[i] = cursor.Registration{Config: cursor.Config{ID: fmt.Sprintf("r-%06d", start+i), Namespace: "outbox",
				Subject: "journal.>", URL: "https://receiver.example/", Format: "binary"}, NextSeq: 1}
		}
		if err := db.CreateMany(b.Context(), rs); err != nil {
			b.Fatal(err)
		}
	}
	src := statusSource{counts: db.Counts}
	b.ReportAllocs()
	for b.Loop() {
		st, err := src.status(Status{Store: "bolt"})
		if err != nil || st.Registrations != rows {
			b.Fatalf("status %+v, %v", st, err)
		}
	}
}

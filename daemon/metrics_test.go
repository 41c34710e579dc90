package daemon

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jetstream-bridge/bridge/cursor"
)

// The registration and backlog gauges read a real store: registrations
// by namespace and state, and the sequences behind the cursors of active
// and parked ones (completed ones owe nothing).
func TestStoreGauges(t *testing.T) {
	db, err := cursor.Open(filepath.Join(t.TempDir(), "bridge.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	ctx := context.Background()
	for _, r := range []struct {
		id, ns string
		next   uint64
	}{{"o1", "outbox", 1}, {"o2", "outbox", 5}, {"o3", "outbox", 3}, {"o4", "outbox", 2}, {"a1", "a2a", 10}} {
		c := cursor.Registration{NextSeq: r.next, Config: cursor.Config{
			ID: r.id, Namespace: r.ns, Subject: "journal.>", URL: "https://receiver.example/hook",
		}}
		if _, _, err := db.Create(ctx, c, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Park(ctx, "o3", "receiver gone"); err != nil {
		t.Fatal(err)
	}
	if err := db.Advance(ctx, "o4", cursor.Progress{NextSeq: 8, Complete: true}); err != nil {
		t.Fatal(err)
	}
	if err := db.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	head := uint64(10)
	var headErr error
	c := newStoreCollector(db, func(context.Context) (uint64, error) { return head, headErr })
	got := gather(t, c)
	want := map[string]float64{
		"bridge_registrations/outbox/active": 2, "bridge_registrations/outbox/parked": 1,
		"bridge_registrations/outbox/completed": 1, "bridge_registrations/a2a/active": 1,
		"bridge_registrations/a2a/parked": 0, "bridge_registrations/a2a/completed": 0,
		// (10+1-1) + (10+1-5) + (10+1-3) for outbox; 10+1-10 for a2a.
		"bridge_backlog_sequences/outbox": 24, "bridge_backlog_sequences/a2a": 1,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v (all: %v)", k, got[k], v, got)
		}
	}

	// Without the stream's head the last known backlog stands, and the
	// counts still follow the store.
	headErr, c.at = errors.New("no responders"), c.at.Add(-storeScrapeEvery-1)
	if err := db.Delete(ctx, "o1"); err != nil {
		t.Fatal(err)
	}
	got = gather(t, c)
	if got["bridge_backlog_sequences/outbox"] != 24 || got["bridge_registrations/outbox/active"] != 1 {
		t.Errorf("with the head unknown: backlog %v (want the last known 24), active %v (want 1)",
			got["bridge_backlog_sequences/outbox"], got["bridge_registrations/outbox/active"])
	}
}

// gather collects c into "name/label values" → value.
func gather(t *testing.T, c prometheus.Collector) map[string]float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			k := f.GetName()
			for _, l := range m.GetLabel() {
				k += "/" + l.GetValue()
			}
			out[k] = m.GetGauge().GetValue()
		}
	}
	return out
}

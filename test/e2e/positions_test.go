package e2e

import (
	"encoding/json"
	"slices"
	"testing"
	"time"
)

// positionBridge is one bridge on its embedded server, a receiver that
// answers every POST at once, and a publisher on the journal.
func positionBridge(t *testing.T) (*daemon, *chaosSink, *publisher) {
	t.Helper()
	d := newDaemon(t)
	d.start()
	return d, newChaosSink(t, 1, 0, 0, 0), newPublisher(t, "nats://"+d.natsAddr)
}

// waitBodies waits until registration id's receiver acknowledged n
// POSTs, then a little longer for any it should not get, and returns
// their bodies in arrival order.
func waitBodies(t *testing.T, s *chaosSink, id string, n int) []string {
	t.Helper()
	waitFor(t, 15*time.Second, "deliveries to "+id, func() bool { return len(s.acks(id)) >= n })
	time.Sleep(300 * time.Millisecond)
	var out []string
	for _, a := range s.acks(id) {
		out = append(out, a.body)
	}
	return out
}

// rewindTo runs `bridge rewind --time` and returns the registration it
// answered: the cursor as the rewind left it.
func rewindTo(t *testing.T, d *daemon, id string, at time.Time) apiRegistration {
	t.Helper()
	out, code := d.cli("rewind", "--json", "--time", at.Format(time.RFC3339Nano), id)
	if code != 0 {
		t.Fatalf("bridge rewind --time: exit %d: %s", code, out)
	}
	var r apiRegistration
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("bridge rewind --json printed %q: %v", out, err)
	}
	return r
}

// start "new" on a real stream: a registration created after messages
// were stored starts at the stream's last sequence + 1, gets none of
// them, and gets every message published after its 201, whether "new"
// is asked for or is the outbox default.
func TestStartNewSkipsWhatTheStreamHeld(t *testing.T) {
	d, s, pub := positionBridge(t)
	var last uint64
	for _, b := range seqBodies("old", 0, 5) {
		last = pub.publish(t, "journal.orders.eu", b)
	}
	for _, body := range []map[string]any{
		{"id": "asked", "namespace": "outbox", "subject": "journal.orders.>", "url": s.url("asked"), "start": "new"},
		{"id": "default", "namespace": "outbox", "subject": "journal.orders.>", "url": s.url("default")},
	} {
		r := d.create(body)
		if r["nextSeq"] != float64(last+1) {
			t.Errorf("%s created after sequence %d: nextSeq %v, want %d", body["id"], last, r["nextSeq"], last+1)
		}
	}
	want := seqBodies("new", 0, 5)
	for _, b := range want {
		pub.publish(t, "journal.orders.eu", b)
	}
	for _, id := range []string{"asked", "default"} {
		if got := waitBodies(t, s, id, len(want)); !slices.Equal(got, want) {
			t.Errorf("%s: received %q, want only what was published after its create, %q", id, got, want)
		}
	}
}

// Rewind by time on a real stream: the cursor moves to the first
// message the server stored at or after the time, and what follows is
// delivered again; a registration created with start {"time": T} starts
// there too; a rewind to a time before the stream replays all of it.
func TestRewindByTimeOnARealStream(t *testing.T) {
	d, s, pub := positionBridge(t)
	before := time.Now().Add(-time.Hour)
	d.create(map[string]any{"id": "rw", "namespace": "outbox", "subject": "journal.orders.>", "url": s.url("rw"), "start": "first"})
	early, late := seqBodies("a", 0, 5), seqBodies("b", 0, 5)
	for _, b := range early {
		pub.publish(t, "journal.orders.eu", b)
	}
	// The server stamps messages with the clock this test reads: every
	// early message is stored before between, every late one after.
	time.Sleep(20 * time.Millisecond)
	between := time.Now()
	time.Sleep(20 * time.Millisecond)
	firstLate := pub.publish(t, "journal.orders.eu", late[0])
	for _, b := range late[1:] {
		pub.publish(t, "journal.orders.eu", b)
	}
	all := append(slices.Clone(early), late...)
	waitFor(t, 15*time.Second, "the first pass", func() bool { return len(s.acks("rw")) >= len(all) })

	if r := rewindTo(t, d, "rw", between); r.NextSeq != firstLate {
		t.Errorf("rewound to %s: nextSeq %d, want %d, the first message stored after it", between.Format(time.RFC3339Nano), r.NextSeq, firstLate)
	}
	want := append(slices.Clone(all), late...)
	if got := waitBodies(t, s, "rw", len(want)); !slices.Equal(got, want) {
		t.Errorf("after the rewind by time: %q, want the late messages again, %q", got, want)
	}

	d.create(map[string]any{"id": "from-time", "namespace": "outbox", "subject": "journal.orders.>", "url": s.url("from-time"),
		"start": map[string]any{"time": between.Format(time.RFC3339Nano)}})
	if got := waitBodies(t, s, "from-time", len(late)); !slices.Equal(got, late) {
		t.Errorf("created with start at %s: %q, want %q", between.Format(time.RFC3339Nano), got, late)
	}

	if r := rewindTo(t, d, "rw", before); r.NextSeq != 1 {
		t.Errorf("rewound to %s, before the stream: nextSeq %d, want 1", before.Format(time.RFC3339Nano), r.NextSeq)
	}
	want = append(want, all...)
	if got := waitBodies(t, s, "rw", len(want)); !slices.Equal(got, want) {
		t.Errorf("after a rewind to before the stream: %q, want all of it again, %q", got, want)
	}
}

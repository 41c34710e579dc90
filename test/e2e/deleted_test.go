package e2e

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"
)

// Messages an operator deleted from the stream (`nats stream rmm`) after
// the bridge read them are not delivered once the delete is more than a
// second old (§5): a registration behind by six, two of them deleted, gets
// the four others; a rewind over them skips them again; a resend of one
// answers 404.
func TestDeletedMessagesAreNotDelivered(t *testing.T) {
	d, s, pub := positionBridge(t)
	const id = "behind"
	// Its receiver refuses connections at first, so the registration is
	// behind while the bridge's tail holds every message in memory.
	d.create(map[string]any{"id": id, "namespace": "outbox", "subject": "journal.orders.>",
		"url": "http://127.0.0.1:1/", "start": "first"})
	seqs := publishSixDeleteTwo(t, pub)
	if code := d.api("PUT", "/v1/registrations/"+id, map[string]any{"namespace": "outbox",
		"subject": "journal.orders.>", "url": s.url(id)}, nil); code != http.StatusOK {
		t.Fatalf("PUT: %d", code)
	}
	want := []string{"m0", "m1", "m3", "m5"}
	if got := waitBodies(t, s, id, len(want)); !slices.Equal(got, want) {
		t.Fatalf("received %q, want the messages not deleted, %q", got, want)
	}
	out, code := d.cli("rewind", "--seq", "1", id)
	if code != 0 {
		t.Fatalf("bridge rewind: exit %d: %s", code, out)
	}
	replayed := append(slices.Clone(want), want...)
	if got := waitBodies(t, s, id, len(replayed)); !slices.Equal(got, replayed) {
		t.Fatalf("after a rewind over them, received %q, want %q", got, replayed)
	}
	if code := d.api("POST", "/v1/registrations/"+id+"/resend", map[string]any{"seq": seqs[2]}, nil); code != http.StatusNotFound {
		t.Fatalf("resend of a deleted message: %d, want 404", code)
	}
}

// The same on three bridges sharing a kv store: whichever bridge owns the
// registration and holds the messages in its tail's memory, the two
// deleted never reach the receiver, a rewind through another bridge skips
// them, and a resend through a third answers 404.
func TestDeletedMessagesAreNotDeliveredByACluster(t *testing.T) {
	c := newBridgeCluster(t, 3)
	const id = "behind"
	b1, b2, b3 := c.bridges[0].daemon, c.bridges[1].daemon, c.bridges[2].daemon
	b1.create(map[string]any{"id": id, "namespace": "outbox", "subject": "journal.orders.>",
		"url": "http://127.0.0.1:1/", "start": "first"})
	c.ids = []string{id}
	seqs := publishSixDeleteTwo(t, &publisher{js: c.js})
	if code := b2.api("PUT", "/v1/registrations/"+id, map[string]any{"namespace": "outbox",
		"subject": "journal.orders.>", "url": c.sink.url(id)}, nil); code != http.StatusOK {
		t.Fatalf("PUT through b2: %d", code)
	}
	want := []string{"m0", "m1", "m3", "m5"}
	c.waitDelivered(30*time.Second, len(want))
	if got := c.bodies(id); !slices.Equal(got, want) {
		t.Fatalf("received %q, want the messages not deleted, %q", got, want)
	}
	if code := b3.api("POST", "/v1/registrations/"+id+"/rewind", map[string]any{"seq": 1}, nil); code != http.StatusOK {
		t.Fatalf("rewind through b3: %d", code)
	}
	replayed := append(slices.Clone(want), want...)
	waitFor(t, 30*time.Second, "the rewound registration to receive the four again", func() bool { return len(c.bodies(id)) >= len(replayed) })
	time.Sleep(500 * time.Millisecond)
	if got := c.bodies(id); !slices.Equal(got, replayed) {
		t.Fatalf("after a rewind over them, received %q, want %q", got, replayed)
	}
	for _, b := range []*daemon{b1, b2, b3} {
		if code := b.api("POST", "/v1/registrations/"+id+"/resend", map[string]any{"seq": seqs[2]}, nil); code != http.StatusNotFound {
			t.Fatalf("resend of a deleted message through %s: %d, want 404", b.admin, code)
		}
	}
}

// publishSixDeleteTwo publishes m0 … m5 on journal.orders.eu, deletes m2
// and m4 from the stream as `nats stream rmm` does, and waits until the
// deletes are more than a second old (§5). It returns the six sequences.
func publishSixDeleteTwo(t *testing.T, pub *publisher) []uint64 {
	t.Helper()
	var seqs []uint64
	for _, b := range seqBodies("m", 0, 6) {
		seqs = append(seqs, pub.publish(t, "journal.orders.eu", b))
	}
	ctx := context.Background()
	st, err := pub.js.Stream(ctx, "JOURNAL")
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{2, 4} {
		if err := st.DeleteMsg(ctx, seqs[i]); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(1500 * time.Millisecond)
	return seqs
}

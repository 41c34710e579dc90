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
	bodies := seqBodies("m", 0, 6)
	var seqs []uint64
	for _, b := range bodies {
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

package bridge_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetstream-bridge/bridge/bridge"
	"github.com/jetstream-bridge/bridge/cursor"
)

// The journal stream deleted and created again under a running daemon,
// with more messages than the cursors stand at: not one of them reaches a
// receiver from the old cursors, and every registration ends parked saying
// the stream was re-created. The read path itself stops the delivery, not
// the once-a-second identity check, so several re-creations in a row leave
// no window. Rewound and unparked, a registration gets the new stream.
func TestDaemonParksInsteadOfDeliveringARecreatedStream(t *testing.T) {
	e := newEnv(t)
	w := e.worker(bridge.WithTick(50 * time.Millisecond))
	created := func(ctx context.Context) (time.Time, error) {
		st, err := e.reader.Info(ctx)
		return st.Created, err
	}
	d := bridge.NewDaemon(e.db, e.reader, []*bridge.Worker{w}, bridge.WithStreamIdentity(stream, created, e.db))
	runDaemon(t, d)
	ctx := context.Background()

	rc1, rc2 := newReceiver(t, nil), newReceiver(t, nil)
	e.register("r1", rc1.URL, "journal.>")
	e.register("r2", rc2.URL, "journal.>")
	d.Wake("r1", "r2")
	var want1, old []string
	for i := range 5 {
		b := fmt.Sprintf("old-%d", i)
		e.publish("journal.a", b)
		old = append(old, b)
	}
	want1 = slices.Clone(old)
	waitUntil(t, "the old messages", func() bool { return len(rc1.bodies()) == 5 && len(rc2.bodies()) == 5 })

	for c := range 3 {
		cursorAt := e.get("r1").NextSeq
		if err := e.js.DeleteStream(ctx, stream); err != nil {
			t.Fatal(err)
		}
		recreate(t, e.js)
		var fresh []string
		for i := range int(cursorAt) + 6 {
			b := fmt.Sprintf("new%d-%d", c, i)
			e.publish("journal.a", b)
			fresh = append(fresh, b)
		}
		for _, id := range []string{"r1", "r2"} {
			waitUntil(t, id+" parked", func() bool { return e.get(id).State == cursor.Parked })
			if r := e.get(id); !strings.Contains(r.LastError, "re-created") {
				t.Errorf("%s lastError %q does not say the stream was re-created", id, r.LastError)
			}
		}
		time.Sleep(300 * time.Millisecond) // anything in flight lands
		if got1, got2 := rc1.bodies(), rc2.bodies(); !slices.Equal(got1, want1) || !slices.Equal(got2, old) {
			t.Fatalf("re-creation %d delivered from the new stream at the old cursors: r1 got %q, r2 got %q",
				c+1, got1[min(len(want1), len(got1)):], got2[min(len(old), len(got2)):])
		}

		if _, err := e.db.Rewind(ctx, "r1", 1, time.Now()); err != nil {
			t.Fatal(err)
		}
		if _, err := e.db.Unpark(ctx, "r1", time.Now()); err != nil {
			t.Fatal(err)
		}
		d.Wake("r1")
		want1 = append(want1, fresh...)
		waitUntil(t, "r1 to get the new stream", func() bool { return len(rc1.bodies()) >= len(want1) })
		if got := rc1.bodies(); !slices.Equal(got, want1) {
			t.Fatalf("r1 after rewind and unpark: %q, want %q", got, want1)
		}
	}
	if got := rc2.bodies(); !slices.Equal(got, old) || e.get("r2").State != cursor.Parked {
		t.Fatalf("r2, never unparked, got %q", got)
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// recreate creates the stream again after DeleteStream. The server removes
// the old stream's files in the background, and a create that races it
// fails with "error creating store for stream": that one is retried.
func recreate(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	cfg := jetstream.StreamConfig{Name: stream, Subjects: []string{"journal.>"}, AllowDirect: true}
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := js.CreateStream(ctx, cfg)
		cancel()
		if err == nil {
			return
		}
		if !strings.Contains(err.Error(), "error creating store") || time.Now().After(deadline) {
			t.Fatalf("re-create stream: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

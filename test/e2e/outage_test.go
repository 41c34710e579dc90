package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	bolt "go.etcd.io/bbolt"
)

// A NATS server killed with SIGKILL mid-delivery and kept down for several
// seconds: the bridge stays up, /readyz says why it is not ready, the
// receiver is not blamed (no attempts, no parking), and delivery resumes by
// itself when the server is back — every message once, in order.
//
// The backlog is published before the bridge starts, so it is not in the
// tail's memory: the bridge must fetch it from the server page by page,
// and the outage cuts delivery off mid-backlog.
func TestNATSKilledMidDeliveryLongOutage(t *testing.T) {
	const backlog, more = 1200, 100
	ns := startNATSServer(t)
	pub := newPublisher(t, ns.url())
	if _, err := pub.js.CreateStream(context.Background(), jetstream.StreamConfig{
		Name: "JOURNAL", Subjects: []string{"journal.>"}, Storage: jetstream.FileStorage, AllowDirect: true,
	}); err != nil {
		t.Fatal(err)
	}
	for _, b := range seqBodies("x", 0, backlog) {
		pub.publish(t, "journal.a", b)
	}
	d := newChaosDaemon(t, "--nats-url", ns.url())
	d.start()
	s := newGateSink(t)
	s.delay.Store(int64(2 * time.Millisecond))
	if out, code := d.cli("register", "--id", "r", "--namespace", "outbox", "--subject", "journal.>", "--url", s.URL, "--start", "first"); code != 0 {
		t.Fatalf("register: %s", out)
	}
	waitFor(t, 10*time.Second, "delivery to start", func() bool { return len(s.bodies()) > 0 })

	ns.kill() // SIGKILL: no goodbye to the clients, no clean store shutdown
	waitFor(t, 10*time.Second, "/readyz to say 503", func() bool { return readyz(d.daemon) == http.StatusServiceUnavailable })
	outage := time.Now()
	for time.Since(outage) < 5*time.Second {
		if !d.running() || healthzStatus(d.admin) != http.StatusOK {
			t.Fatalf("the bridge must outlive a NATS outage\n%s", d.logs.String())
		}
		time.Sleep(250 * time.Millisecond)
	}
	if r := d.get("r"); r.State != "active" || r.Attempts != 0 {
		t.Fatalf("during the outage: %+v; a NATS outage is not the receiver's failure", r)
	}
	delivered := len(s.bodies())
	if delivered >= backlog {
		t.Fatalf("all %d messages were delivered during the outage: the test did not cut delivery off", backlog)
	}

	ns.start()
	down := time.Since(outage)
	waitFor(t, 30*time.Second, "/readyz to say 200 after the server is back", func() bool { return readyz(d.daemon) == http.StatusOK })
	ready := time.Since(outage) - down
	for _, b := range seqBodies("x", backlog, backlog+more) {
		pub.publish(t, "journal.a", b)
	}
	waitFor(t, 60*time.Second, "every message", func() bool { return len(firstArrivals(s.bodies())) >= backlog+more })
	if got := firstArrivals(s.bodies()); !slices.Equal(got, seqBodies("x", 0, backlog+more)) {
		t.Fatalf("first arrivals out of order: %q", got)
	}
	if got := len(s.bodies()); got != backlog+more {
		t.Errorf("%d deliveries for %d messages: a NATS outage must not repeat what was acknowledged", got, backlog+more)
	}
	// The cursor moves after the receiver has answered the last POST.
	waitFor(t, 10*time.Second, "the cursor past every message", func() bool { return d.get("r").NextSeq >= backlog+more+1 })
	if r := d.get("r"); r.State != "active" || r.Attempts != 0 || r.NextSeq != backlog+more+1 {
		t.Errorf("after the outage: %+v, want active, no attempts, nextSeq %d", r, backlog+more+1)
	}
	t.Logf("NATS down %v after SIGKILL with %d of %d delivered; ready again %v after it came back; all %d delivered once, in order",
		down.Round(100*time.Millisecond), delivered, backlog, ready.Round(100*time.Millisecond), backlog+more)
	if code := d.stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// A stream purged while the receiver is down: the purged messages the
// registration had not delivered are skipped and counted, the ones
// published afterwards are delivered, and nothing stalls.
func TestStreamPurgedUnderTheBridge(t *testing.T) {
	d := newChaosDaemon(t)
	d.start()
	s := newGateSink(t)
	d.create(map[string]any{"id": "r", "namespace": "outbox", "subject": "journal.>", "url": s.URL, "start": "first"})
	pub := newPublisher(t, "nats://"+d.natsAddr)
	for _, b := range seqBodies("m", 0, 10) {
		pub.publish(t, "journal.a", b)
	}
	waitFor(t, 15*time.Second, "10 deliveries", func() bool { return len(s.bodies()) == 10 })

	s.down.Store(true)
	for _, b := range seqBodies("m", 10, 60) {
		pub.publish(t, "journal.a", b)
	}
	waitFor(t, 15*time.Second, "the receiver to refuse m10", func() bool { return d.get("r").Attempts >= 1 })
	stream, err := pub.js.Stream(context.Background(), "JOURNAL")
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Purge(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The next retry finds the purged messages gone and moves the cursor
	// past them, though the receiver is still down: nothing waits for them.
	waitFor(t, 15*time.Second, "the cursor to skip the purged messages", func() bool { return d.get("r").NextSeq == 61 })
	for _, b := range seqBodies("n", 0, 10) {
		pub.publish(t, "journal.a", b)
	}
	s.down.Store(false)

	want := append(seqBodies("m", 0, 10), seqBodies("n", 0, 10)...)
	waitFor(t, 15*time.Second, "the messages published after the purge", func() bool { return len(s.bodies()) >= len(want) })
	if got := s.bodies(); !slices.Equal(got, want) {
		t.Fatalf("deliveries %q, want %q", got, want)
	}
	if got := metricSum(t, d.admin, "bridge_skipped_messages_total", `namespace="outbox"`); got != 50 {
		t.Errorf("bridge_skipped_messages_total %v, want the 50 purged messages never delivered", got)
	}
	// The cursor moves after the receiver has answered the last POST.
	waitFor(t, 10*time.Second, "the cursor past the last message", func() bool { return d.get("r").NextSeq >= 71 })
	if r := d.get("r"); r.State != "active" || r.NextSeq != 71 || r.Attempts != 0 {
		t.Errorf("registration %+v, want active at nextSeq 71", r)
	}
	if !strings.Contains(d.logs.String(), "skipping") {
		t.Errorf("the skip is not logged")
	}
	if code := d.stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// Messages aged out by the stream's MaxAge while the receiver is down are
// skipped and counted; the fresh ones are delivered once it is back.
func TestStreamMaxAgeExpiresUndelivered(t *testing.T) {
	const maxAge = 3 * time.Second
	ns := startNATSServer(t)
	pub := newPublisher(t, ns.url())
	ctx := context.Background()
	stream, err := pub.js.CreateStream(ctx, jetstream.StreamConfig{
		Name: "JOURNAL", Subjects: []string{"journal.>"}, Storage: jetstream.FileStorage,
		AllowDirect: true, MaxAge: maxAge,
	})
	if err != nil {
		t.Fatal(err)
	}
	d := newChaosDaemon(t, "--nats-url", ns.url())
	d.start()
	s := newGateSink(t)
	d.create(map[string]any{"id": "r", "namespace": "outbox", "subject": "journal.>", "url": s.URL, "start": "first"})
	for _, b := range seqBodies("a", 0, 5) {
		pub.publish(t, "journal.x", b)
	}
	waitFor(t, 15*time.Second, "5 deliveries", func() bool { return len(s.bodies()) == 5 })

	s.down.Store(true)
	for _, b := range seqBodies("b", 0, 20) {
		pub.publish(t, "journal.x", b)
	}
	waitFor(t, 30*time.Second, "the stream to age out every message", func() bool {
		info, err := stream.Info(ctx)
		return err == nil && info.State.Msgs == 0
	})
	waitFor(t, 15*time.Second, "the cursor to skip the aged-out messages", func() bool { return d.get("r").NextSeq == 26 })
	for _, b := range seqBodies("c", 0, 10) {
		pub.publish(t, "journal.x", b)
	}
	s.down.Store(false)

	want := append(seqBodies("a", 0, 5), seqBodies("c", 0, 10)...)
	waitFor(t, 15*time.Second, "the fresh messages", func() bool { return len(s.bodies()) >= len(want) })
	if got := s.bodies(); !slices.Equal(got, want) {
		t.Fatalf("deliveries %q, want %q", got, want)
	}
	if got := metricSum(t, d.admin, "bridge_skipped_messages_total", `namespace="outbox"`); got != 20 {
		t.Errorf("bridge_skipped_messages_total %v, want the 20 aged-out messages", got)
	}
	if code := d.stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// The journal stream deleted and created again under a running bridge:
// its sequences restart, so every cursor would name another message. The
// bridge parks every registration saying so and delivers nothing from the
// new stream until an operator rewinds and unparks; then it does, and the
// registration left parked still gets nothing.
//
// Whether a bridge that noticed too late would deliver first is a race,
// so BRIDGE_SOAK=1 runs several re-creations to make it show.
func TestStreamRecreatedUnderRunningBridge(t *testing.T) {
	cycles := 1
	if os.Getenv("BRIDGE_SOAK") != "" {
		cycles = 8
	}
	ns := startNATSServer(t)
	d := newChaosDaemon(t, "--nats-url", ns.url(), "--create-stream")
	d.start()
	s1, s2 := newGateSink(t), newGateSink(t)
	d.create(map[string]any{"id": "r1", "namespace": "outbox", "subject": "journal.>", "url": s1.URL, "start": "first"})
	d.create(map[string]any{"id": "r2", "namespace": "outbox", "subject": "journal.>", "url": s2.URL, "start": "first"})
	pub := newPublisher(t, ns.url())
	old := seqBodies("old", 0, 5)
	for _, b := range old {
		pub.publish(t, "journal.a", b)
	}
	waitFor(t, 15*time.Second, "the old messages", func() bool { return len(s1.bodies()) == 5 && len(s2.bodies()) == 5 })

	want1 := slices.Clone(old)
	for c := range cycles {
		cursor := d.get("r1").NextSeq
		recreateStream(t, pub.js)
		// More new messages than the cursor stands at: a bridge that did
		// not notice would deliver the tail of them as if they followed
		// what it delivered before.
		fresh := seqBodies(fmt.Sprintf("new%d-", c), 0, int(cursor)+6)
		for _, b := range fresh {
			pub.publish(t, "journal.a", b)
		}
		for _, id := range []string{"r1", "r2"} {
			waitFor(t, 15*time.Second, id+" to be parked", func() bool { return d.get(id).State == "parked" })
			if r := d.get(id); !strings.Contains(r.LastError, "re-created") {
				t.Errorf("%s lastError %q does not say the stream was re-created", id, r.LastError)
			}
		}
		time.Sleep(500 * time.Millisecond)
		if got1, got2 := s1.bodies(), s2.bodies(); !slices.Equal(got1, want1) || !slices.Equal(got2, old) {
			t.Fatalf("re-creation %d: delivered from the re-created stream at the old cursors before parking: r1 got %q, r2 got %q",
				c+1, got1[min(len(want1), len(got1)):], got2[min(len(old), len(got2)):])
		}
		if out, code := d.cli("list", "--parked"); code != 0 || !strings.Contains(out, "r1") || !strings.Contains(out, "r2") {
			t.Errorf("bridge list --parked (exit %d):\n%s", code, out)
		}

		if out, code := d.cli("rewind", "--seq", "1", "r1"); code != 0 {
			t.Fatalf("rewind: %s", out)
		}
		if out, code := d.cli("unpark", "r1"); code != 0 {
			t.Fatalf("unpark: %s", out)
		}
		want1 = append(want1, fresh...)
		waitFor(t, 15*time.Second, "r1 to get the new stream", func() bool { return len(s1.bodies()) >= len(want1) })
		if got := s1.bodies(); !slices.Equal(got, want1) {
			t.Fatalf("r1 after rewind and unpark: %q", got)
		}
	}
	time.Sleep(300 * time.Millisecond)
	if got := s2.bodies(); !slices.Equal(got, old) || d.get("r2").State != "parked" {
		t.Fatalf("r2 was never unparked but got %q", got)
	}
	if code := d.stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// The stream re-created while the bridge is stopped: caught at start,
// before any delivery, even though the new stream already reaches past the
// stored cursors.
func TestStreamRecreatedWhileBridgeStopped(t *testing.T) {
	ns := startNATSServer(t)
	d := newChaosDaemon(t, "--nats-url", ns.url(), "--create-stream", "--a2a-allow-loopback")
	d.start()
	s1, s2 := newGateSink(t), newGateSink(t)
	d.create(map[string]any{"id": "r1", "namespace": "outbox", "subject": "journal.>", "url": s1.URL, "start": "first"})
	d.create(map[string]any{"id": "r2", "namespace": "a2a", "taskId": "t1", "url": s2.URL})
	pub := newPublisher(t, ns.url())
	working := `{"statusUpdate":{"taskId":"t1","contextId":"c","status":{"state":"TASK_STATE_WORKING"}}}`
	old := seqBodies("old", 0, 5)
	for _, b := range old {
		pub.publish(t, "journal.a", b)
	}
	pub.publish(t, "journal.a2a.t1", working)
	waitFor(t, 15*time.Second, "the old messages", func() bool { return len(s1.bodies()) == 6 && len(s2.bodies()) == 1 })
	if code := d.stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}

	recreateStream(t, pub.js)
	fresh := seqBodies("new", 0, 12)
	for _, b := range fresh {
		pub.publish(t, "journal.a", b)
	}
	for range 3 {
		pub.publish(t, "journal.a2a.t1", working)
	}
	d.start()
	for _, id := range []string{"r1", "r2"} {
		waitFor(t, 15*time.Second, id+" to be parked", func() bool { return d.get(id).State == "parked" })
		if r := d.get(id); !strings.Contains(r.LastError, "re-created") {
			t.Errorf("%s lastError %q does not say the stream was re-created", id, r.LastError)
		}
	}
	time.Sleep(500 * time.Millisecond)
	if len(s1.bodies()) != 6 || len(s2.bodies()) != 1 {
		t.Fatalf("delivered from a stream re-created while the bridge was stopped: r1 %q, r2 %d deliveries", s1.bodies(), len(s2.bodies()))
	}

	if out, code := d.cli("rewind", "--seq", "1", "r1"); code != 0 {
		t.Fatalf("rewind: %s", out)
	}
	if out, code := d.cli("unpark", "r1"); code != 0 {
		t.Fatalf("unpark: %s", out)
	}
	// r1 reads journal.>: the old stream's five messages and task event,
	// then the whole new stream.
	want := slices.Concat(old, []string{working}, fresh, []string{working, working, working})
	waitFor(t, 15*time.Second, "r1 to get the new stream", func() bool { return len(s1.bodies()) >= len(want) })
	if got := s1.bodies(); !slices.Equal(got, want) {
		t.Fatalf("r1 after rewind and unpark: %q", got)
	}
	time.Sleep(300 * time.Millisecond)
	if len(s2.bodies()) != 1 || d.get("r2").State != "parked" {
		t.Fatalf("r2 was never unparked but got %d deliveries", len(s2.bodies()))
	}
	if code := d.stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// recreateStream deletes the journal stream and creates it again as the bridge
// would, which restarts its sequences at 1.
func recreateStream(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := js.DeleteStream(ctx, "JOURNAL"); err != nil {
		t.Fatalf("delete stream: %v", err)
	}
	// The server may still be removing the old stream's files: a create
	// right after the delete can fail with "error creating store", so
	// try again for a while.
	var err error
	for range 50 {
		if _, err = js.CreateStream(ctx, jetstream.StreamConfig{
			Name: "JOURNAL", Subjects: []string{"journal.>"}, Storage: jetstream.FileStorage, AllowDirect: true,
		}); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("create stream: %v", err)
}

// A bridge.db that is not a store, or a real one cut short or overwritten
// in part: `bridge run` exits 1 with an error naming the file, and never
// panics.
func TestCorruptedStoreIsRefused(t *testing.T) {
	img := realStore(t)
	pageSize := 4096
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, path string)
	}{
		{"garbage", func(t *testing.T, path string) {
			b := make([]byte, 64<<10)
			_, _ = rand.Read(b)
			writeStore(t, path, b)
		}},
		{"truncated", func(t *testing.T, path string) {
			writeStore(t, path, img[:3*pageSize])
		}},
		{"pages overwritten", func(t *testing.T, path string) {
			// Both meta pages intact, so bbolt trusts the file; every
			// page they point to is noise.
			b := slices.Clone(img)
			_, _ = rand.Read(b[2*pageSize:])
			writeStore(t, path, b)
		}},
		{"registration page overwritten", func(t *testing.T, path string) {
			// Only the page holding the registrations: the header, the
			// size and every bucket look right, so the damage shows
			// when the first registration is read.
			b := slices.Clone(img)
			off := bucketRootOffset(t, img, "registrations")
			copy(b[off+16:off+int64(pageSize)], bytes.Repeat([]byte{0xff}, pageSize-16))
			writeStore(t, path, b)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "bridge.db")
			tc.damage(t, path)
			out, code := runToExit(t, "--data-dir", dir, "--embedded-listen", freeAddr(t), "--admin-listen", freeAddr(t))
			assertCleanFailure(t, out, code, path)
		})
	}
}

// realStore runs a bridge with twenty registrations, stops it and returns its
// bridge.db.
func realStore(t *testing.T) []byte {
	t.Helper()
	d := newChaosDaemon(t)
	d.start()
	// Enough registrations that their bucket has a page of its own.
	for i := range 20 {
		d.create(map[string]any{"id": fmt.Sprintf("r%02d", i), "namespace": "outbox", "subject": "journal.>", "url": "http://127.0.0.1:9/"})
	}
	if code := d.stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	b, err := os.ReadFile(filepath.Join(d.dataDir, "bridge.db"))
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 4*4096 {
		t.Fatalf("bridge.db is %d bytes; expected at least four pages", len(b))
	}
	return b
}

// bucketRootOffset is where the root page of a top-level bucket starts in
// the bbolt file img, found with bbolt itself so the damage lands exactly
// there.
func bucketRootOffset(t *testing.T, img []byte, bucket string) int64 {
	t.Helper()
	path := filepath.Join(t.TempDir(), "copy.db")
	writeStore(t, path, img)
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var root uint64
	if err := db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(bucket))
		if b == nil {
			return fmt.Errorf("no bucket %q", bucket)
		}
		root = uint64(b.Root())
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if root == 0 {
		t.Fatalf("bucket %q is inline: it has no page of its own", bucket)
	}
	return int64(root) * int64(db.Info().PageSize)
}

func writeStore(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// A second `bridge run` on a data dir a running bridge holds is refused
// quickly with a message saying so, and the first one is unharmed.
func TestSecondBridgeOnSameDataDirIsRefused(t *testing.T) {
	d := newChaosDaemon(t)
	d.start()
	start := time.Now()
	out, code := runToExit(t, "--data-dir", d.dataDir, "--embedded-listen", freeAddr(t), "--admin-listen", freeAddr(t))
	assertCleanFailure(t, out, code, filepath.Join(d.dataDir, "bridge.db"), "another bridge")
	t.Logf("refused after %v", time.Since(start).Round(time.Millisecond))
	if !d.running() || healthzStatus(d.admin) != http.StatusOK || readyz(d.daemon) != http.StatusOK {
		t.Fatalf("the first bridge suffered from the second one's attempt")
	}
	if code := d.stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// The data dir's filesystem full: the bridge stays up and keeps
// delivering, a write that needs space fails with the reason, the store is
// never damaged, and once space returns the cursors acknowledged meanwhile
// are flushed, so a kill -9 afterwards repeats nothing.
//
// bbolt rewrites pages it already owns without asking the filesystem for
// space, so a small cursor flush can succeed on a full disk. A hundred
// registrations that were idle while the disk filled, then all advancing
// at once, dirty more pages than the file has free: the flush must grow
// the file, and fails.
func TestDataDirFull(t *testing.T) {
	const regs, msgs = 100, 5
	fs := mountTmpfs(t, "4m")
	ns := startNATSServer(t) // the journal lives elsewhere: only the store runs out of space
	d := newChaosDaemon(t, "--nats-url", ns.url(), "--create-stream")
	d.useDataDir(filepath.Join(fs, "data"))
	d.start()
	s := newChaosSink(t, 1, 0, 0, 0)
	for i := range regs {
		id := fmt.Sprintf("r-%03d", i)
		d.create(map[string]any{"id": id, "namespace": "outbox", "subject": "journal.>", "url": s.url(id), "start": "first"})
	}
	pub := newPublisher(t, ns.url())

	filler := fillDisk(t, fs)
	for _, b := range seqBodies("m", 0, msgs) {
		pub.publish(t, "journal.a", b)
	}
	delivered := func() bool {
		for i := range regs {
			if len(s.acks(fmt.Sprintf("r-%03d", i))) < msgs {
				return false
			}
		}
		return true
	}
	waitFor(t, 30*time.Second, "every delivery on a full disk", delivered)
	waitFor(t, 10*time.Second, "a failed cursor flush to be logged", func() bool {
		return strings.Contains(d.logs.String(), "flushing cursors failed") && strings.Contains(d.logs.String(), "no space left on device")
	})
	// A create that fits in the pages the file has free still succeeds;
	// one that must grow it is refused, saying why.
	created, refused := 0, false
	for !refused && created < 50 {
		var answer struct {
			Error struct{ Message string } `json:"error"`
		}
		code := d.api("POST", "/v1/registrations", map[string]any{"id": fmt.Sprintf("pad-%d", created), "namespace": "outbox",
			"subject": "journal.pad", "url": s.URL + "/" + strings.Repeat("p", 1000)}, &answer)
		switch {
		case code == http.StatusCreated:
			created++
		case code == http.StatusInternalServerError && strings.Contains(answer.Error.Message, "no space left on device"):
			refused = true
		default:
			t.Fatalf("create on a full disk: %d %q, want 201 or 500 saying no space is left", code, answer.Error.Message)
		}
	}
	if !refused {
		t.Errorf("%d registrations created on a full disk, none refused", created)
	}
	if !d.running() || healthzStatus(d.admin) != http.StatusOK {
		t.Fatalf("the bridge must outlive a full disk")
	}
	// The cursor moves after the receiver has answered the last POST.
	waitFor(t, 10*time.Second, "r-000's cursor past every message", func() bool { return d.get("r-000").NextSeq >= msgs+1 })
	if r := d.get("r-000"); r.NextSeq != msgs+1 || r.State != "active" {
		t.Errorf("registration on a full disk: %+v, want active at nextSeq %d (acknowledged, kept in memory)", r, msgs+1)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	d.create(map[string]any{"id": "after", "namespace": "outbox", "subject": "journal.after", "url": s.url("after")})
	// The daemon retries the flush every few milliseconds; a second is
	// plenty for the pending cursors to reach the disk.
	time.Sleep(time.Second)
	d.kill9()
	d.start()
	time.Sleep(time.Second)
	for i := range regs {
		id := fmt.Sprintf("r-%03d", i)
		if got := len(s.acks(id)); got != msgs {
			t.Errorf("%s: %d deliveries after kill -9 and restart, want %d: cursors acknowledged while the disk was full were not flushed once it had space", id, got, msgs)
		}
	}
	if r := d.get("r-000"); r.NextSeq != msgs+1 || r.Delivered != msgs || r.State != "active" {
		t.Errorf("after the restart: %+v", r)
	}
	if listed := d.registrations(); len(listed) != regs+created+1 {
		t.Errorf("bridge list after the restart: %d registrations, want %d", len(listed), regs+created+1)
	}
	t.Logf("disk full: cursor flushes failed and were retried, %d creates fit in free pages and the next was refused; "+
		"after space returned and a kill -9, no delivery repeated", created)
	if code := d.stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// A data dir that cannot be written: `bridge run` exits 1 naming the file
// and the reason, and starts, store intact, once it is writable again. A
// read-only filesystem where the test may mount one; otherwise file modes,
// which only bind a user other than root.
func TestDataDirReadOnly(t *testing.T) {
	fs, mountErr := tryMountTmpfs(t, "4m")
	if mountErr != nil {
		if os.Geteuid() == 0 {
			t.Skipf("cannot mount a filesystem (%v), and file modes do not bind root", mountErr)
		}
		fs = t.TempDir()
	}
	data := filepath.Join(fs, "data")
	// The embedded server's JetStream store is on the 4 MiB filesystem
	// too: the attempt log's reservation has to fit in it.
	d := newChaosDaemon(t, "--attempts-max-bytes", "1MiB")
	d.useDataDir(data)
	d.start()
	s := newGateSink(t)
	d.create(map[string]any{"id": "r", "namespace": "outbox", "subject": "journal.>", "url": s.URL, "start": "first"})
	pub := newPublisher(t, "nats://"+d.natsAddr)
	for _, b := range seqBodies("m", 0, 20) {
		pub.publish(t, "journal.a", b)
	}
	waitFor(t, 15*time.Second, "20 deliveries", func() bool { return len(s.bodies()) == 20 })
	if code := d.stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	pub.nc.Close()

	db := filepath.Join(data, "bridge.db")
	reason := "read-only file system"
	writable := func() { remount(t, fs, "rw") }
	if mountErr == nil {
		remount(t, fs, "ro")
	} else {
		reason = "permission denied"
		writable = func() {
			_ = os.Chmod(data, 0o700)
			_ = os.Chmod(db, 0o600)
		}
		t.Cleanup(writable) // so the temp dir can be removed whatever happens
		if err := os.Chmod(db, 0o400); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(data, 0o500); err != nil {
			t.Fatal(err)
		}
	}
	out, code := runToExit(t, d.args[1:]...)
	assertCleanFailure(t, out, code, db, reason)
	writable()

	d.start()
	if r := d.get("r"); r.NextSeq != 21 || r.Delivered != 20 || r.State != "active" {
		t.Errorf("after the read-only episode: %+v", r)
	}
	time.Sleep(300 * time.Millisecond)
	if got := len(s.bodies()); got != 20 {
		t.Errorf("%d deliveries after the restart, want the 20 from before: nothing repeats after a clean stop", got)
	}
	if code := d.stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

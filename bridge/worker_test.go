package bridge_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetstream-bridge/bridge/bridge"
	"github.com/jetstream-bridge/bridge/cursor"
	"github.com/jetstream-bridge/bridge/projection"
)

func TestDeliversInOrderAndGoesIdle(t *testing.T) {
	e := newEnv(t)
	rc := newReceiver(t, nil)
	e.register("r1", rc.URL, "journal.orders.>")
	for _, s := range []string{"a", "b", "c"} {
		e.publish("journal.orders.1", s)
	}
	e.publish("journal.other", "not mine")

	rep := e.sweep(e.worker(), t0, 10)
	if rep.Records != 3 || rep.Deliveries != 3 || rep.Registrations != 1 {
		t.Fatalf("report %+v, want 3 records and 3 deliveries for 1 registration", rep)
	}
	if got := rc.bodies(); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("receiver got %q, want a, b, c in order", got)
	}
	r := e.get("r1")
	if r.NextSeq != 4 || r.Delivered != 3 || !r.NextAttemptAt.IsZero() {
		t.Fatalf("cursor %d delivered %d nextAttemptAt %v; want 4, 3, idle", r.NextSeq, r.Delivered, r.NextAttemptAt)
	}
	if rep := e.sweep(e.worker(), t0.Add(time.Hour), 10); rep.Registrations != 0 {
		t.Fatalf("an idle registration was swept: %+v", rep)
	}
}

func TestRetryResendsIdenticalBytesAndID(t *testing.T) {
	e := newEnv(t)
	rc := newReceiver(t, func(n int, w http.ResponseWriter) {
		if n == 0 {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	e.register("r1", rc.URL, "journal.>")
	e.publish("journal.x", `{"k":"v"}`)
	w := e.worker()

	if rep := e.sweep(w, t0, 10); rep.Retries != 1 {
		t.Fatalf("first sweep %+v, want one retry", rep)
	}
	r := e.get("r1")
	if r.Attempts != 1 || !strings.Contains(r.LastError, "500") {
		t.Fatalf("attempts %d lastError %q, want 1 and a 500", r.Attempts, r.LastError)
	}
	if rep := e.sweep(w, r.NextAttemptAt, 10); rep.Deliveries != 1 {
		t.Fatalf("retry sweep %+v, want one delivery", rep)
	}
	got := rc.deliveries()
	if len(got) != 2 || got[0] != got[1] {
		t.Fatalf("retry was not identical: %+v", got)
	}
	if e.get("r1").Attempts != 0 {
		t.Fatal("attempts not reset after success")
	}
}

func TestGoneParksAndOtherFailuresRetry(t *testing.T) {
	for _, tc := range []struct {
		code int
		park bool
	}{{410, true}, {404, false}, {500, false}, {302, false}} {
		t.Run(http.StatusText(tc.code), func(t *testing.T) {
			e := newEnv(t)
			rc := newReceiver(t, status(tc.code))
			e.register("r1", rc.URL, "journal.>")
			e.publish("journal.x", "m")
			rep := e.sweep(e.worker(), t0, 10)
			r := e.get("r1")
			if tc.park {
				if rep.Parked != 1 || r.State != cursor.Parked || !strings.Contains(r.LastError, "410") {
					t.Fatalf("report %+v state %s lastError %q; want parked naming 410", rep, r.State, r.LastError)
				}
				return
			}
			if rep.Retries != 1 || r.State != cursor.Active || r.Attempts != 1 {
				t.Fatalf("report %+v state %s attempts %d; want a retry", rep, r.State, r.Attempts)
			}
			if !strings.Contains(r.LastError, http.StatusText(tc.code)) && !strings.Contains(r.LastError, string(rune('0'+tc.code/100))) {
				t.Fatalf("lastError %q does not name the answer", r.LastError)
			}
		})
	}
}

func TestRetryAfterIsHonouredAndClamped(t *testing.T) {
	for _, tc := range []struct {
		name, value string
		want        time.Duration
	}{
		{"delta", "90", 90 * time.Second},
		{"huge", "999999", time.Hour},
		{"zero", "0", time.Second},
		{"http-date", "", 2 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			value := tc.value
			rc := newReceiver(t, func(_ int, w http.ResponseWriter) {
				if value == "" {
					// The sender judges an HTTP-date against the real
					// clock of the attempt.
					value = time.Now().Add(2 * time.Minute).UTC().Format(http.TimeFormat)
				}
				w.Header().Set("Retry-After", value)
				w.WriteHeader(http.StatusTooManyRequests)
			})
			e.register("r1", rc.URL, "journal.>")
			e.publish("journal.x", "m")
			e.sweep(e.worker(), t0, 10)
			got := e.get("r1").NextAttemptAt.Sub(t0)
			slack := time.Duration(0)
			if tc.name == "http-date" {
				slack = 2 * time.Second
			}
			if got < tc.want-slack || got > tc.want {
				t.Fatalf("due at +%v, want +%v", got, tc.want)
			}
		})
	}
}

func TestCoFailingRegistrationsSpreadDeterministically(t *testing.T) {
	schedule := func() map[string]time.Duration {
		e := newEnv(t)
		rc := newReceiver(t, status(503))
		ids := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
		for _, id := range ids {
			e.register(id, rc.URL, "journal.>")
		}
		e.publish("journal.x", "m")
		w := e.worker()
		at := t0
		// Three failures each: the third window is 4 s wide, room to spread.
		for range 3 {
			e.sweep(w, at, 100)
			at = at.Add(time.Hour)
		}
		out := map[string]time.Duration{}
		for _, id := range ids {
			out[id] = e.get(id).NextAttemptAt.Sub(at.Add(-time.Hour))
		}
		return out
	}
	first, second := schedule(), schedule()
	distinct := map[time.Duration]bool{}
	for id, d := range first {
		if d < 2*time.Second || d > 4*time.Second {
			t.Fatalf("%s due after %v, outside the third window [2s, 4s]", id, d)
		}
		if second[id] != d {
			t.Fatalf("%s: schedule not reproducible: %v then %v", id, d, second[id])
		}
		distinct[d] = true
	}
	if len(distinct) < 2 {
		t.Fatalf("eight co-failing registrations all due at the same instant: %v", first)
	}
}

func TestMaxAttemptsParksAndUnparkResumes(t *testing.T) {
	e := newEnv(t)
	var healthy atomic.Bool
	healthy.Store(true)
	rc := newReceiver(t, func(_ int, w http.ResponseWriter) {
		if healthy.Load() {
			w.WriteHeader(http.StatusOK)
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	e.register("r1", rc.URL, "journal.>")
	e.publish("journal.x", "one")
	w := e.worker(bridge.WithMaxAttempts(3))
	if rep := e.sweep(w, t0, 10); rep.Deliveries != 1 {
		t.Fatalf("%+v", rep)
	}
	healthy.Store(false)
	e.publish("journal.x", "two")
	e.publish("journal.x", "three")
	// The registration went idle after "one"; the new messages wake it.
	w.Wake("r1")
	at := t0.Add(time.Minute)
	parkedAt := 0
	for i := 1; i <= 3 && parkedAt == 0; i++ {
		if rep := e.sweep(w, at, 10); rep.Parked == 1 {
			parkedAt = i
		}
		at = e.get("r1").NextAttemptAt
	}
	if parkedAt != 3 {
		t.Fatalf("parked on failure %d, want the third", parkedAt)
	}
	r := e.get("r1")
	if r.State != cursor.Parked || r.NextSeq != 2 {
		t.Fatalf("state %s cursor %d, want parked at 2", r.State, r.NextSeq)
	}
	w.Wake("r1")
	if rep := e.sweep(w, t0.Add(48*time.Hour), 10); rep.Registrations != 0 {
		t.Fatalf("a parked row was swept: %+v", rep)
	}
	ctx := context.Background()
	healthy.Store(true)
	if ok, err := e.db.Unpark(ctx, "r1", t0); err != nil || !ok {
		t.Fatalf("unpark: %v %v", ok, err)
	}
	if ok, err := e.db.Unpark(ctx, "r1", t0); err != nil || ok {
		t.Fatalf("unpark of an active row reported %v, %v; want false", ok, err)
	}
	if rep := e.sweep(w, t0, 10); rep.Deliveries != 2 {
		t.Fatalf("after unpark %+v, want two deliveries", rep)
	}
	bodies := rc.bodies()
	if got := bodies[len(bodies)-2:]; !slices.Equal(got, []string{"two", "three"}) {
		t.Fatalf("resumed with %q, want two then three", got)
	}
}

func TestHangingReceiverDoesNotHoldOthersAndFanOutIsBounded(t *testing.T) {
	e := newEnv(t)
	// outstanding counts POSTs in progress at both receivers.
	var outstanding, peak atomic.Int32
	enter := func() {
		n := outstanding.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
	}
	release := make(chan struct{})
	hang := newReceiver(t, func(_ int, w http.ResponseWriter) {
		enter()
		<-release
		outstanding.Add(-1)
		w.WriteHeader(http.StatusOK)
	})
	defer close(release)
	slow := newReceiver(t, func(_ int, w http.ResponseWriter) {
		enter()
		time.Sleep(20 * time.Millisecond)
		outstanding.Add(-1)
		w.WriteHeader(http.StatusOK)
	})
	e.register("a-hung", hang.URL, "journal.>")
	for i := range 8 {
		e.register("fast"+string(rune('a'+i)), slow.URL, "journal.>")
	}
	for range 3 {
		e.publish("journal.x", "m")
	}
	w := e.worker(bridge.WithMaxInFlight(3))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan bridge.Report)
	go func() {
		rep, _ := w.Sweep(ctx, t0, 100)
		done <- rep
	}()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && len(slow.deliveries()) < 24 {
		time.Sleep(10 * time.Millisecond)
	}
	if n := len(slow.deliveries()); n != 24 {
		t.Fatalf("other receivers got %d of 24 deliveries while one hung", n)
	}
	if p := peak.Load(); p != 3 {
		t.Fatalf("%d POSTs outstanding at once, max-in-flight is 3", p)
	}
	cancel()
	<-done
}

func TestOtherNamespaceDoesNotStarve(t *testing.T) {
	e := newEnv(t)
	rc := newReceiver(t, nil)
	for i := range 5 {
		e.registerNS("a2a-"+string(rune('a'+i)), "a2a", rc.URL, "journal.a2a.t", t0.Add(-time.Hour))
	}
	e.register("mine", rc.URL, "journal.>")
	e.publish("journal.x", "m")
	rep := e.sweep(e.worker(), t0, 2)
	if rep.Registrations != 1 || rep.Deliveries != 1 || rep.Unserved != 5 {
		t.Fatalf("report %+v; want my one row served and unserved 5", rep)
	}
}

func TestMessagesRemovedByTheStreamAreSkipped(t *testing.T) {
	e := newEnv(t, func(c *jetstream.StreamConfig) { c.MaxMsgs = 3 })
	rc := newReceiver(t, nil)
	e.register("r1", rc.URL, "journal.>")
	for _, s := range []string{"1", "2", "3", "4", "5"} {
		e.publish("journal.x", s)
	}
	rep := e.sweep(e.worker(), t0, 10)
	if rep.Skipped != 2 || rep.Deliveries != 3 {
		t.Fatalf("report %+v; want 2 skipped and 3 delivered", rep)
	}
	if got := rc.bodies(); !slices.Equal(got, []string{"3", "4", "5"}) {
		t.Fatalf("receiver got %q", got)
	}
	if r := e.get("r1"); r.NextSeq != 6 {
		t.Fatalf("cursor %d, want 6", r.NextSeq)
	}
}

func TestUnprojectableMessageParksWithItsSequence(t *testing.T) {
	e := newEnv(t)
	rc := newReceiver(t, nil)
	e.register("r1", rc.URL, "journal.>")
	e.publish("journal.x", "fine")
	seq := e.publish("journal.x", "poison")
	e.publish("journal.x", "after")
	rep := e.sweep(e.worker(), t0, 10)
	r := e.get("r1")
	if rep.Parked != 1 || r.State != cursor.Parked || r.NextSeq != seq {
		t.Fatalf("report %+v state %s cursor %d; want parked on %d", rep, r.State, r.NextSeq, seq)
	}
	if !strings.Contains(r.LastError, "journal message 2") {
		t.Fatalf("lastError %q does not name the sequence", r.LastError)
	}
	if got := rc.bodies(); !slices.Equal(got, []string{"fine"}) {
		t.Fatalf("receiver got %q; nothing after the poison may overtake it", got)
	}
}

func TestCrashBeforeFlushRepeatsNeverLoses(t *testing.T) {
	e := newEnv(t)
	rc := newReceiver(t, nil)
	e.register("r1", rc.URL, "journal.>")
	if err := e.db.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.publish("journal.x", "a")
	e.publish("journal.x", "b")
	e.sweep(e.worker(), t0, 10)
	// A crash: the process dies after the POSTs, before any flush. The
	// file as it is now is what a crash leaves; put it back after Close.
	crashed, err := os.ReadFile(filepath.Join(e.dir, "bridge.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.dir, "bridge.db"), crashed, 0o600); err != nil {
		t.Fatal(err)
	}
	e.openStore()
	if r := e.get("r1"); r.NextSeq != 1 {
		t.Fatalf("cursor %d after the crash, want 1: durability may lag, never lead", r.NextSeq)
	}
	e.publish("journal.x", "c")
	w := e.worker()
	w.Wake("r1")
	e.sweep(w, t0, 10)
	if got := rc.bodies(); !slices.Equal(got, []string{"a", "b", "a", "b", "c"}) {
		t.Fatalf("receiver got %q; want a, b repeated after the crash, then c", got)
	}
}

func TestZeroSettingsAreRefused(t *testing.T) {
	e := newEnv(t)
	for _, opt := range []bridge.Option{bridge.WithMaxInFlight(0), bridge.WithMaxAttempts(0)} {
		if _, err := bridge.New(e.db, e.reader, e.sender, passThrough{}, opt); err == nil || !strings.Contains(err.Error(), "zero") {
			t.Fatalf("got %v, want a sentence saying why zero is refused", err)
		}
	}
}

var _ projection.Projection = passThrough{}

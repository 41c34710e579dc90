package attempt_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"

	"github.com/jetstream-bridge/bridge/attempt"
	"github.com/jetstream-bridge/bridge/internal/testutil"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/nats-io/nats-server/v2/server.(*Server).Start.func1"))
}

func openLog(t *testing.T, cfg attempt.Config) (*attempt.Log, *nats.Conn) {
	t.Helper()
	srv := testutil.NATS(t, filepath.Join(t.TempDir(), "nats"), -1)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	l, err := attempt.Open(context.Background(), nc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(context.Background()) })
	return l, nc
}

// waitFor polls read until ok: recording is asynchronous.
func waitFor[T any](t *testing.T, read func() (T, error), ok func(T) bool) T {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err := read()
		if err == nil && ok(got) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited 5s; last read %+v, %v", got, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestOpenCreatesTheBoundedStreamAndUpdatesIt(t *testing.T) {
	l, nc := openLog(t, attempt.Config{MaxAge: time.Hour, MaxBytes: 1 << 20})
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	s, err := js.Stream(ctx, attempt.DefaultStream)
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	if cfg.MaxAge != time.Hour || cfg.MaxBytes != 1<<20 || cfg.Storage != jetstream.FileStorage ||
		len(cfg.Subjects) != 1 || cfg.Subjects[0] != "bridge.attempts.BRIDGE_ATTEMPTS.>" {
		t.Fatalf("stream config = %+v", cfg)
	}
	l2, err := attempt.Open(ctx, nc, attempt.Config{MaxAge: 2 * time.Hour, MaxBytes: 2 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close(ctx)
	info, _ := s.Info(ctx)
	if info.Config.MaxAge != 2*time.Hour || info.Config.MaxBytes != 2<<20 {
		t.Fatalf("after a second start with other bounds: %v, %d", info.Config.MaxAge, info.Config.MaxBytes)
	}
	_ = l
}

func rec(reg string, seq uint64, n uint32, outcome string) attempt.Attempt {
	return attempt.Attempt{Registration: reg, Seq: seq, WebhookID: fmt.Sprintf("J-%d", seq), Attempt: n,
		At: time.Now().UTC(), Outcome: outcome, Trigger: attempt.TriggerDelivery}
}

func TestPagesHaveNoGapAndNoOverlap(t *testing.T) {
	l, _ := openLog(t, attempt.Config{})
	ctx := context.Background()
	// "a.b" holds a dot, which a subject token cannot: ids are encoded.
	for i := range 250 {
		l.Record(rec("a.b", uint64(i+1), 1, attempt.Outcome2xx))
		for range 7 { // others' attempts between, so windows are read
			l.Record(rec("other", uint64(i+1), 1, attempt.Outcome2xx))
		}
	}
	waitFor(t, func() (int, error) {
		got, err := l.Sequence(ctx, 250)
		return len(got), err
	}, func(n int) bool { return n == 8 })

	var seqs []uint64
	var before uint64
	for pages := 0; ; pages++ {
		page, next, err := l.Registration(ctx, "a.b", 100, before)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range page {
			if a.Registration != "a.b" {
				t.Fatalf("page holds %q's attempt", a.Registration)
			}
			seqs = append(seqs, a.Seq)
		}
		if next == 0 {
			if pages != 2 || len(page) != 50 {
				t.Fatalf("last page is page %d with %d attempts, want page 2 with 50", pages, len(page))
			}
			break
		}
		before = next
	}
	if len(seqs) != 250 {
		t.Fatalf("%d attempts over the pages, want 250", len(seqs))
	}
	for i, s := range seqs {
		if s != uint64(250-i) {
			t.Fatalf("attempt %d is for seq %d, want %d: newest first, no gap, no overlap", i, s, 250-i)
		}
	}
}

func TestSequenceHoldsEveryRegistrationsAttempts(t *testing.T) {
	l, _ := openLog(t, attempt.Config{})
	ctx := context.Background()
	l.Record(rec("billing", 7, 1, attempt.Outcome5xx))
	l.Record(rec("audit", 7, 1, attempt.Outcome2xx))
	l.Record(rec("billing", 8, 1, attempt.Outcome2xx))
	l.Record(rec("billing", 7, 2, attempt.Outcome2xx))
	got := waitFor(t, func() ([]attempt.Attempt, error) { return l.Sequence(ctx, 7) },
		func(a []attempt.Attempt) bool { return len(a) == 3 })
	if got[0].Registration != "billing" || got[0].Attempt != 2 || got[1].Registration != "audit" || got[2].Attempt != 1 {
		t.Fatalf("attempts for 7 = %+v, want billing#2, audit#1, billing#1", got)
	}
	if none, err := l.Sequence(ctx, 9); err != nil || len(none) != 0 {
		t.Fatalf("attempts for 9 = %v, %v; want none", none, err)
	}
}

func TestTheLogNumbersAttemptsLeftToIt(t *testing.T) {
	l, _ := openLog(t, attempt.Config{})
	ctx := context.Background()
	l.Record(rec("a", 3, 1, attempt.Outcome5xx))
	unparked := rec("a", 3, 0, attempt.Outcome2xx) // the row forgot the failure
	l.Record(unparked)
	replay := rec("a", 3, 0, attempt.Outcome2xx)
	replay.Trigger = attempt.TriggerReplay
	l.Record(replay)
	got := waitFor(t, func() ([]attempt.Attempt, error) { return l.Sequence(ctx, 3) },
		func(a []attempt.Attempt) bool { return len(a) == 3 })
	if got[0].Attempt != 3 || got[0].Trigger != attempt.TriggerReplay || got[1].Attempt != 2 || got[1].Trigger != attempt.TriggerRetry {
		t.Fatalf("attempts = %+v; want #3 replay after #2 retry (its predecessor failed)", got)
	}
	next := rec("a", 3, 0, attempt.Outcome2xx)
	l.Number(ctx, &next)
	if next.Attempt != 4 {
		t.Fatalf("Number = %d, want 4", next.Attempt)
	}
}

func TestAnUnavailableStreamDropsAndCounts(t *testing.T) {
	l, nc := openLog(t, attempt.Config{})
	js, _ := jetstream.New(nc)
	if err := js.DeleteStream(context.Background(), attempt.DefaultStream); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for i := range 20_000 { // more than the buffer holds
		l.Record(rec("a", uint64(i+1), 1, attempt.Outcome2xx))
	}
	t.Logf("20,000 records handed over in %v", time.Since(start))
	dropped := l.Collectors()[0].(prometheus.Counter)
	waitFor(t, func() (float64, error) {
		var m dto.Metric
		err := dropped.Write(&m)
		return m.GetCounter().GetValue(), err
	},
		func(n float64) bool { return n >= 20_000 })
}

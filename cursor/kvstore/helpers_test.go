package kvstore

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/jetstream-bridge/bridge/cursor/cursortest"
	"github.com/jetstream-bridge/bridge/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The helpers every store's tests share (cursortest): t0, a
// registration, and calls that fail the test on an error.
var (
	t0        = cursortest.T0
	reg       = cursortest.Reg
	create    = cursortest.Create
	get       = cursortest.Get
	advance   = cursortest.Advance
	flush     = cursortest.Flush
	dueIDs    = cursortest.DueIDs
	wantErrIs = cursortest.WantErrIs
)

// startNATS starts an embedded JetStream server and returns its URL.
func startNATS(t testing.TB) string {
	t.Helper()
	return testutil.NATS(t, t.TempDir(), -1).ClientURL()
}

// connect opens a client, closed when the test ends.
func connect(t testing.TB, url string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// openKV opens a store on its own connection (as a bridge would) on the
// buckets of the server at url, one replica, closed when the test ends.
func openKV(t testing.TB, url string, opts ...Option) *Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Open(ctx, connect(t, url), append([]Option{WithReplicas(1)}, opts...)...)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

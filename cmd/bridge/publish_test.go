package main

import (
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetstream-bridge/bridge/internal/testutil"
)

// startTestNATS runs an embedded JetStream server with the JOURNAL stream.
func startTestNATS(t *testing.T) string {
	t.Helper()
	srv := testutil.NATS(t, t.TempDir(), -1)
	nc := testConn(t, srv.ClientURL())
	js, _ := jetstream.New(nc)
	if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "JOURNAL", Subjects: []string{"journal.>"}}); err != nil {
		t.Fatal(err)
	}
	return srv.ClientURL()
}

func testConn(t *testing.T, url string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

func TestPublish(t *testing.T) {
	cleanEnv(t)
	url := startTestNATS(t)

	cli(t, "", "publish", "--nats-url", url, "--header", "Nats-Msg-Id:order-1", "--header", "Content-Type: application/json",
		"journal.orders.1", `{"order":1}`).want(t, 0, "published journal.orders.1 as JOURNAL sequence 1")

	// "-" and a missing DATA read stdin; NATS_URL is honoured.
	t.Setenv("NATS_URL", url)
	cli(t, "from stdin", "publish", "journal.orders.2", "-").want(t, 0, "published journal.orders.2 as JOURNAL sequence 2")
	cli(t, "also stdin", "publish", "journal.orders.3").want(t, 0, "sequence 3")

	// The same Nats-Msg-Id is stored once.
	cli(t, "", "publish", "--header", "Nats-Msg-Id:order-1", "journal.orders.1", `{"order":1}`).
		want(t, 0, "sequence 1 (duplicate")

	js, _ := jetstream.New(testConn(t, url))
	stream, err := js.Stream(t.Context(), "JOURNAL")
	if err != nil {
		t.Fatal(err)
	}
	msg, err := stream.GetMsg(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if string(msg.Data) != `{"order":1}` || msg.Header.Get("Content-Type") != "application/json" || msg.Header.Get("Nats-Msg-Id") != "order-1" {
		t.Errorf("stored message 1: %q headers %v", msg.Data, msg.Header)
	}
	if msg, _ := stream.GetMsg(t.Context(), 2); msg == nil || string(msg.Data) != "from stdin" {
		t.Errorf("stored message 2: %+v", msg)
	}

	cli(t, "", "publish", "elsewhere.x", "data").want(t, 1, "no stream stores subject elsewhere.x")
	cli(t, "", "publish", "--header", "novalue", "journal.x", "d").want(t, 2, "--header")
	cli(t, "", "publish", "--nats-url", "nats://user:pa55word@127.0.0.1:1", "journal.x", "d").want(t, 1, "connecting to NATS at nats://127.0.0.1:1")
	if r := cli(t, "", "publish", "--nats-url", "nats://user:pa55word@127.0.0.1:1", "journal.x", "d"); strings.Contains(r.errOut, "pa55word") || strings.Contains(r.errOut, "user:") {
		t.Errorf("an error printed the NATS credentials: %s", r.errOut)
	}
}

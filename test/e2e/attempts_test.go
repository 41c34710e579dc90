package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestAttemptsAndResendThroughTheCLI drives `bridge attempts` and `bridge
// resend` against the real binary: a receiver failing once then
// answering, a resend of a delivered message to a parked registration,
// and the start-up line naming the bounded log.
func TestAttemptsAndResendThroughTheCLI(t *testing.T) {
	d := newDaemon(t)
	d.start()
	if logs := d.logs.String(); !strings.Contains(logs, "stream=BRIDGE_ATTEMPTS") || !strings.Contains(logs, "maxAge=168h") || !strings.Contains(logs, "maxBytes=1GiB") {
		t.Fatalf("the start-up log does not name the attempts stream and its bounds:\n%s", logs)
	}
	var calls atomic.Int32
	s := newSinkAnswering(t, func() int {
		if calls.Add(1) == 1 {
			return 503
		}
		return 204
	})
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	if out, code := d.cli("register", "--id", "orders", "--namespace", "outbox", "--subject", "journal.orders.>",
		"--url", s.URL+"/hook", "--secret", secret, "--start", "first"); code != 0 {
		t.Fatalf("register: %d %s", code, out)
	}
	seq := newPublisher(t, "nats://"+d.natsAddr).publish(t, "journal.orders.1", `{"n":1}`)
	waitFor(t, 10*time.Second, "the retry to be acknowledged", func() bool { return len(s.requests()) == 1 })

	var page struct {
		Attempts []map[string]any `json:"attempts"`
		Next     string           `json:"next"`
	}
	waitFor(t, 5*time.Second, "two attempts in the log", func() bool {
		out, code := d.cli("attempts", "--json", "orders")
		return code == 0 && json.Unmarshal([]byte(out), &page) == nil && len(page.Attempts) == 2
	})
	if a := page.Attempts[0]; a["outcome"] != "2xx" || a["trigger"] != "retry" || a["attempt"] != 2.0 || a["webhookId"] != "JOURNAL-1" {
		t.Fatalf("newest attempt = %v", a)
	}
	if a := page.Attempts[1]; a["outcome"] != "5xx" || a["status"] != 503.0 || a["trigger"] != "delivery" || a["error"] == "" {
		t.Fatalf("first attempt = %v", a)
	}
	out, code := d.cli("attempts", "--seq", "1")
	if code != 0 || !strings.Contains(out, "orders") || !strings.Contains(out, "retry") || strings.Count(out, "\n") != 3 {
		t.Fatalf("bridge attempts --seq 1: %d\n%s", code, out)
	}

	// The cursor moves after the receiver has answered: wait for it, or the
	// row read as before below could still move on its own.
	waitFor(t, 10*time.Second, "the cursor past the acknowledged message", func() bool {
		n, _ := d.registration("orders")["nextSeq"].(float64)
		return uint64(n) > seq
	})

	// A resend answers whatever the receiver did, and moves nothing of the row.
	if code := d.api("PUT", "/v1/registrations/orders", map[string]any{"namespace": "outbox", "subject": "journal.orders.>",
		"url": "http://127.0.0.1:1/", "secret": secret}, nil); code != 200 {
		t.Fatalf("PUT: %d", code)
	}
	before := d.registration("orders")
	out, code = d.cli("resend", "--seq", "1", "--json", "orders")
	var a map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &a) != nil || a["trigger"] != "resend" || a["outcome"] != "transport" || a["attempt"] != 3.0 {
		t.Fatalf("bridge resend to a dead URL: %d %s", code, out)
	}
	if after := d.registration("orders"); after["nextSeq"] != before["nextSeq"] || after["attempts"] != before["attempts"] || after["lastError"] != before["lastError"] {
		t.Fatalf("resend changed the registration: %v, was %v", after, before)
	}
	if out, code := d.cli("resend", "--seq", "99", "orders"); code != 1 || !strings.Contains(out, "99") {
		t.Fatalf("resend of a sequence beyond the stream: %d %s", code, out)
	}
	if out, code := d.cli("resend", "orders"); code != 2 {
		t.Fatalf("resend without --seq: %d %s", code, out)
	}
	if out, code := d.cli("attempts"); code != 2 {
		t.Fatalf("attempts without ID or --seq: %d %s", code, out)
	}
	if out, _ := d.cli("attempts", "--json", "orders"); strings.Contains(out, secret) || strings.Contains(out, strings.TrimPrefix(secret, "whsec_")) {
		t.Fatalf("an attempt shows the secret: %s", out)
	}
	if r := d.registration("orders"); r["lag"] != 0.0 {
		t.Fatalf("lag of a caught-up registration = %v", r["lag"])
	}
}

// TestDeliveriesGoOnWhenTheLogCannotBeWritten deletes the attempts stream
// under a running bridge: every message is still delivered, and the
// records NATS refused are counted in bridge_attempts_dropped_total.
func TestDeliveriesGoOnWhenTheLogCannotBeWritten(t *testing.T) {
	d := newDaemon(t)
	d.start()
	s := newSink(t)
	if out, code := d.cli("register", "--id", "orders", "--namespace", "outbox", "--subject", "journal.orders.>",
		"--url", s.URL+"/hook"); code != 0 {
		t.Fatalf("register: %d %s", code, out)
	}
	pub := newPublisher(t, "nats://"+d.natsAddr)
	if err := pub.js.DeleteStream(context.Background(), "BRIDGE_ATTEMPTS"); err != nil {
		t.Fatal(err)
	}
	const n = 50
	for i := range n {
		pub.publish(t, fmt.Sprintf("journal.orders.%d", i), `{}`)
	}
	waitFor(t, 15*time.Second, "every message delivered", func() bool { return len(s.requests()) == n })
	waitFor(t, 15*time.Second, "the lost records counted", func() bool {
		return metricSum(t, d.admin, "bridge_attempts_dropped_total") == n
	})
	if logs := d.logs.String(); strings.Count(logs, "NATS could not take attempt records") != 1 {
		t.Fatalf("the loss is not logged exactly once:\n%s", logs)
	}
}

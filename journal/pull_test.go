package journal_test

import (
	"context"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetstream-bridge/bridge/journal"
)

// consumers lists the names of the consumers the server holds on stream.
func consumers(t *testing.T, e *env, stream string) []string {
	t.Helper()
	s, err := e.js.Stream(context.Background(), stream)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	l := s.ConsumerNames(context.Background())
	for n := range l.Name() {
		names = append(names, n)
	}
	if err := l.Err(); err != nil {
		t.Fatal(err)
	}
	return names
}

// A drain of a stream without allow_direct costs a request per page, not
// per message, from one consumer kept for the filter's next page; Close
// leaves no consumer behind on the server.
func TestPulledDrainCostsARequestPerPage(t *testing.T) {
	e := newEnv(t)
	e.stream(jetstream.StreamConfig{Name: "JOURNAL"})
	all := e.interleave(2000)
	r, err := journal.NewReader(e.nc, "JOURNAL", journal.WithCacheBytes(0))
	if err != nil {
		t.Fatal(err)
	}
	got, pages := drain(t, r, "journal.orders.>", 1, 256)
	sameRecords(t, "JOURNAL", got, matching(all, "journal.orders.>"))
	st := r.Stats()
	// A request per page, a probe for the gap before a page that starts
	// on another subject, one stream info, one consumer created.
	if st.Fetches != uint64(pages) || st.ServerRequests > st.Fetches+st.Probes+2 {
		t.Fatalf("%d pages took %d fetches, %d probes and %d server requests; want a request per page and probe, one info, one consumer",
			pages, st.Fetches, st.Probes, st.ServerRequests)
	}
	if n := consumers(t, e, "JOURNAL"); len(n) != 1 {
		t.Fatalf("consumers on the stream while reading: %v; want one", n)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if n := consumers(t, e, "JOURNAL"); len(n) != 0 {
		t.Fatalf("consumers left after Close: %v", n)
	}
}

// A consumer the server deleted between two pages (it expired, or an
// operator removed it) costs a new one, never a message.
func TestPulledReadSurvivesItsConsumerDeleted(t *testing.T) {
	e := newEnv(t)
	e.stream(jetstream.StreamConfig{Name: "JOURNAL"})
	all := e.interleave(600)
	r := e.reader("JOURNAL", journal.WithCacheBytes(0))
	ctx := context.Background()
	pg, err := r.Read(ctx, "journal.>", 1, 256)
	if err != nil {
		t.Fatal(err)
	}
	sameRecords(t, "JOURNAL", pg.Records, all[:256])
	for _, name := range consumers(t, e, "JOURNAL") {
		if err := e.js.DeleteConsumer(ctx, "JOURNAL", name); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := drain(t, r, "journal.>", pg.Next, 256)
	sameRecords(t, "JOURNAL", got, all[256:])
}

// Messages too large for one pull to carry together end a page early; the
// next page goes on where it stopped.
func TestPulledPagesOfLargeMessages(t *testing.T) {
	e := newEnv(t)
	e.stream(jetstream.StreamConfig{Name: "JOURNAL"})
	big := strings.Repeat("x", 900_000)
	var want []published
	for i := range 12 {
		subject := "journal.big"
		want = append(want, published{seq: e.publish(subject, big, nil), subject: subject, data: big})
		if i%4 == 0 {
			e.publish("journal.other", "small", nil)
		}
	}
	r := e.reader("JOURNAL", journal.WithCacheBytes(0))
	got, _ := drain(t, r, "journal.big", 1, 256)
	sameRecords(t, "JOURNAL", got, want)
	if f := r.Stats().Fetches; f < 3 {
		t.Fatalf("12 messages of 900 kB came in %d fetches; a pull carries at most 4 MiB", f)
	}
}

package journal_test

import (
	"context"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetstream-bridge/bridge/journal"
)

const (
	benchPages = 40
	benchMsgs  = benchPages * 256
)

// benchStream fills a stream with benchMsgs messages of 1 KiB.
func benchStream(b *testing.B, allowDirect bool) *env {
	b.Helper()
	e := newEnv(b)
	e.stream(jetstream.StreamConfig{Name: "JOURNAL", AllowDirect: allowDirect})
	payload := []byte(strings.Repeat("x", 1024))
	ctx := context.Background()
	for i := 0; i < benchMsgs; i += 1000 {
		var acks []jetstream.PubAckFuture
		for j := i; j < min(i+1000, benchMsgs); j++ {
			f, err := e.js.PublishAsync("journal.orders.created", payload)
			if err != nil {
				b.Fatal(err)
			}
			acks = append(acks, f)
		}
		for _, f := range acks {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				b.Fatal(err)
			case <-ctx.Done():
			}
		}
	}
	return e
}

func benchRead(b *testing.B, r *journal.Reader) {
	b.Helper()
	ctx := context.Background()
	b.SetBytes(256 * 1024)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		from := uint64(i%benchPages)*256 + 1
		pg, err := r.Read(ctx, "journal.orders.>", from, 256)
		if err != nil {
			b.Fatal(err)
		}
		if len(pg.Records) != 256 {
			b.Fatalf("page of %d", len(pg.Records))
		}
	}
	b.StopTimer()
	st := r.Stats()
	b.ReportMetric(float64(st.ServerRequests)/float64(b.N), "requests/op")
}

// BenchmarkReadPage256 reads pages of 256 from the server, no cache: with
// batched direct gets, and pulled from consumers on a stream without
// allow_direct.
func BenchmarkReadPage256(b *testing.B) {
	for _, k := range streamKinds {
		b.Run(k.name, func(b *testing.B) {
			e := benchStream(b, k.allowDirect)
			benchRead(b, e.reader("JOURNAL", journal.WithCacheBytes(0)))
		})
	}
}

// BenchmarkReadPage256Cached reads pages another read already fetched.
func BenchmarkReadPage256Cached(b *testing.B) {
	e := benchStream(b, true)
	r := e.reader("JOURNAL")
	drain(b, r, "journal.orders.>", 1, 256)
	benchRead(b, r)
}

// BenchmarkOrderedConsumerRead is the raw limit to compare with: an
// ordered consumer fetching the same pages of 256.
func BenchmarkOrderedConsumerRead(b *testing.B) {
	e := benchStream(b, true)
	ctx := context.Background()
	newConsumer := func() jetstream.Consumer {
		c, err := e.js.OrderedConsumer(ctx, "JOURNAL", jetstream.OrderedConsumerConfig{FilterSubjects: []string{"journal.orders.>"}})
		if err != nil {
			b.Fatal(err)
		}
		return c
	}
	cons := newConsumer()
	b.SetBytes(256 * 1024)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if i > 0 && i%benchPages == 0 {
			cons = newConsumer() // past the end: start over, as the reads do
		}
		batch, err := cons.Fetch(256)
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for range batch.Messages() {
			n++
		}
		if batch.Error() != nil || n != 256 {
			b.Fatalf("fetched %d: %v", n, batch.Error())
		}
	}
}

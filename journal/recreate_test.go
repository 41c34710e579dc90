package journal_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetstream-bridge/bridge/journal"
)

// A stream deleted and created again while a Tail runs: the tail's ordered
// consumer resumes on the new stream after the old last sequence, as if its
// messages followed the old ones. Reads at a cursor of the old stream must
// never get a record of the new one — neither from the ring nor from the
// server — but the typed error, until the caller confirms the new stream.
func TestReadRefusesARecreatedStreamUntilConfirmed(t *testing.T) {
	eachStreamKind(t, func(t *testing.T, allowDirect bool) {
		for _, hammer := range []bool{false, true} {
			t.Run(fmt.Sprintf("reading-throughout=%v", hammer), func(t *testing.T) {
				e := newEnv(t)
				e.stream(jetstream.StreamConfig{Name: "JOURNAL", AllowDirect: allowDirect})
				e.interleave(5)
				r := e.reader("JOURNAL")
				notes := tail(t, e, r)
				ctx := context.Background()
				old, err := r.Info(ctx)
				if err != nil {
					t.Fatal(err)
				}
				cursor := old.LastSeq + 1
				if pg, err := r.Read(ctx, ">", cursor, 100); err != nil || len(pg.Records) != 0 || !pg.CaughtUp {
					t.Fatalf("read at the head before re-creation: %+v, %v", pg, err)
				}

				// Readers at the old cursor for the whole re-creation, as the
				// bridge's workers would be: not one record may come back.
				stop := make(chan struct{})
				var wg sync.WaitGroup
				var mu sync.Mutex
				var served []uint64
				if hammer {
					for range 4 {
						wg.Go(func() {
							for {
								select {
								case <-stop:
									return
								default:
								}
								pg, err := r.Read(ctx, ">", cursor, 100)
								if err == nil && len(pg.Records) > 0 {
									mu.Lock()
									for _, rec := range pg.Records {
										if len(served) < 20 {
											served = append(served, rec.Seq)
										}
									}
									mu.Unlock()
								}
								time.Sleep(time.Millisecond)
							}
						})
					}
				}

				if err := e.js.DeleteStream(ctx, "JOURNAL"); err != nil {
					t.Fatal(err)
				}
				recreate(t, e, allowDirect)
				// More than the cursor stands at, so the new stream reaches
				// past it.
				fresh := e.interleave(int(cursor) + 6)
				// The tail follows the new stream from its first message.
				for n := next(t, notes); n.seq != fresh[len(fresh)-1].seq || n.subject != fresh[len(fresh)-1].subject; n = next(t, notes) {
				}
				time.Sleep(200 * time.Millisecond) // the readers go on a while
				close(stop)
				wg.Wait()
				if len(served) > 0 {
					t.Fatalf("reads at the old cursor %d were served sequences %v (at most 20 shown) of the re-created stream", cursor, served)
				}

				pg, err := r.Read(ctx, ">", cursor, 100)
				var re *journal.RecreatedError
				if !errors.Is(err, journal.ErrStreamRecreated) || !errors.As(err, &re) {
					t.Fatalf("read at the old cursor %d after re-creation: %d records, error %v; want a *RecreatedError", cursor, len(pg.Records), err)
				}
				if !re.Was.Equal(old.Created) || re.Now.Equal(old.Created) || re.Stream != "JOURNAL" {
					t.Fatalf("error %+v; the old stream was created %s", re, old.Created)
				}
				if r.ConfirmStream(old.Created) {
					t.Fatal("ConfirmStream accepted the deleted stream")
				}
				if _, err := r.Read(ctx, ">", 1, 100); !errors.Is(err, journal.ErrStreamRecreated) {
					t.Fatalf("read after confirming the old stream: %v; want ErrStreamRecreated", err)
				}
				if !r.ConfirmStream(re.Now) {
					t.Fatal("ConfirmStream refused the new stream")
				}
				got, _ := drain(t, r, "journal.>", 1, 7)
				sameRecords(t, "JOURNAL", got, fresh)
			})
		}
	})
}

// A server restart resets the tail's consumer and fails reads, but the
// stream is the same: reads go on without any confirmation.
func TestServerRestartNeedsNoConfirmation(t *testing.T) {
	eachStreamKind(t, func(t *testing.T, allowDirect bool) {
		e := newEnv(t)
		e.stream(jetstream.StreamConfig{Name: "JOURNAL", AllowDirect: allowDirect})
		before := e.interleave(10)
		r := e.reader("JOURNAL")
		notes := tail(t, e, r)
		e.restart()
		waitTail(t, e, notes)
		after := e.interleave(10)
		expectNotes(t, notes, after)
		got, _ := drain(t, r, "journal.orders.>", 1, 4)
		sameRecords(t, "JOURNAL", got, matching(append(before, after...), "journal.orders.>"))
	})
}

// recreate creates the stream again after DeleteStream. The server removes
// the old stream's files in the background, and a create that races it
// fails with "error creating store for stream": that one is retried.
func recreate(t *testing.T, e *env, allowDirect bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := e.js.CreateStream(ctx, jetstream.StreamConfig{Name: "JOURNAL", Subjects: []string{"journal.>"}, AllowDirect: allowDirect})
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

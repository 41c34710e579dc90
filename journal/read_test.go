package journal_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetstream-bridge/bridge/internal/testutil"
	"github.com/jetstream-bridge/bridge/journal"
)

func TestReadPagesOfAFilterAmongOtherSubjects(t *testing.T) {
	eachStreamKind(t, func(t *testing.T, allowDirect bool) {
		e := newEnv(t)
		e.stream(jetstream.StreamConfig{Name: "JOURNAL", AllowDirect: allowDirect})
		all := e.interleave(1200)
		r := e.reader("JOURNAL")

		for _, filter := range []string{"journal.orders.>", "journal.audit.*", "journal.*.7", "journal.>", "*.orders.*"} {
			t.Run(filter, func(t *testing.T) {
				got, pages := drain(t, r, filter, 1, 256)
				want := matching(all, filter)
				sameRecords(t, "JOURNAL", got, want)
				if min := (len(want) + 255) / 256; pages < min || pages > min+1 {
					t.Fatalf("%d pages for %d records of 256", pages, len(want))
				}
			})
		}
	})
}

func TestReadPageBoundaries(t *testing.T) {
	eachStreamKind(t, func(t *testing.T, allowDirect bool) {
		e := newEnv(t)
		e.stream(jetstream.StreamConfig{Name: "JOURNAL", AllowDirect: allowDirect})
		all := e.interleave(20)
		r := e.reader("JOURNAL", journal.WithCacheBytes(0))
		ctx := context.Background()
		orders := matching(all, "journal.orders.>")

		pg, err := r.Read(ctx, "journal.orders.>", 2, 3)
		if err != nil {
			t.Fatal(err)
		}
		sameRecords(t, "JOURNAL", pg.Records, orders[1:4])
		if pg.CaughtUp || pg.Next != orders[3].seq+1 || pg.From != 2 || pg.Skipped != 0 {
			t.Fatalf("page %+v; want 3 records from 2, next %d, not caught up", pageSummary(pg), orders[3].seq+1)
		}

		pg, err = r.Read(ctx, "journal.orders.>", orders[9].seq, 3)
		if err != nil {
			t.Fatal(err)
		}
		sameRecords(t, "JOURNAL", pg.Records, orders[9:])
		if !pg.CaughtUp || pg.LastSeq != 20 {
			t.Fatalf("last page %+v; want 1 record, caught up, last seq 20", pageSummary(pg))
		}

		pg, err = r.Read(ctx, "journal.orders.>", 21, 256)
		if err != nil {
			t.Fatal(err)
		}
		if len(pg.Records) != 0 || !pg.CaughtUp || pg.Skipped != 0 || pg.From != 21 || pg.Next != 21 {
			t.Fatalf("read past the end %+v; want empty, caught up, nothing skipped", pageSummary(pg))
		}

		pg, err = r.Read(ctx, "journal.nothing.>", 1, 256)
		if err != nil {
			t.Fatal(err)
		}
		if len(pg.Records) != 0 || !pg.CaughtUp || pg.Skipped != 0 {
			t.Fatalf("read of a filter with no messages %+v; want empty, caught up", pageSummary(pg))
		}
	})
}

func TestReadRefusesBadArguments(t *testing.T) {
	e := newEnv(t)
	e.stream(jetstream.StreamConfig{Name: "JOURNAL", AllowDirect: true})
	r := e.reader("JOURNAL")
	for _, filter := range []string{"", "journal..x", "journal.>.x", "journal.a*", "journal. x"} {
		if _, err := r.Read(context.Background(), filter, 1, 10); err == nil {
			t.Errorf("filter %q accepted", filter)
		}
	}
	if _, err := r.Read(context.Background(), "journal.>", 1, 0); err == nil {
		t.Error("max 0 accepted")
	}
}

func TestReadOfAMissingStreamNamesIt(t *testing.T) {
	e := newEnv(t)
	r := e.reader("NOPE")
	_, err := r.Read(context.Background(), "journal.>", 1, 10)
	if !errors.Is(err, jetstream.ErrStreamNotFound) || !strings.Contains(err.Error(), "NOPE") {
		t.Fatalf("err = %v; want stream NOPE not found", err)
	}
}

func TestMessagesRemovedByMaxMsgsAreSkipped(t *testing.T) {
	eachStreamKind(t, func(t *testing.T, allowDirect bool) {
		e := newEnv(t)
		e.stream(jetstream.StreamConfig{Name: "JOURNAL", AllowDirect: allowDirect, MaxMsgs: 100})
		all := e.interleave(300)
		r := e.reader("JOURNAL")

		pg, err := r.Read(context.Background(), "journal.>", 1, 256)
		if err != nil {
			t.Fatal(err)
		}
		if pg.Skipped != 200 || pg.From != 201 {
			t.Fatalf("page %+v; want 200 skipped from 201", pageSummary(pg))
		}
		sameRecords(t, "JOURNAL", pg.Records, all[200:])

		// The reader knows the old first sequence; the stream moves on.
		more := e.interleave(50) // seqs 301..350, first is now 251
		pg, err = r.Read(context.Background(), "journal.orders.>", 240, 256)
		if err != nil {
			t.Fatal(err)
		}
		if pg.Skipped != 11 || pg.From != 251 {
			t.Fatalf("page %+v; want 11 skipped from 251", pageSummary(pg))
		}
		want := matching(append(all[250:], more...), "journal.orders.>")
		sameRecords(t, "JOURNAL", pg.Records, want)
		if !pg.CaughtUp {
			t.Fatal("not caught up")
		}
	})
}

func TestMessagesRemovedByAPurgeAreSkipped(t *testing.T) {
	eachStreamKind(t, func(t *testing.T, allowDirect bool) {
		e := newEnv(t)
		s := e.stream(jetstream.StreamConfig{Name: "JOURNAL", AllowDirect: allowDirect})
		e.interleave(40)
		r := e.reader("JOURNAL")
		if _, err := r.Read(context.Background(), "journal.orders.>", 1, 5); err != nil {
			t.Fatal(err)
		}
		if err := s.Purge(context.Background()); err != nil {
			t.Fatal(err)
		}
		after := e.interleave(6) // seqs 41..46
		// A cursor at 31 was never delivered 31..40: the purge took them.
		pg, err := r.Read(context.Background(), "journal.audit.>", 31, 256)
		if err != nil {
			t.Fatal(err)
		}
		if pg.Skipped != 10 || pg.From != 41 {
			t.Fatalf("page %+v; want 10 skipped from 41", pageSummary(pg))
		}
		sameRecords(t, "JOURNAL", pg.Records, matching(after, "journal.audit.>"))
	})
}

func TestStreamWithoutDirectGetGivesTheSamePages(t *testing.T) {
	e := newEnv(t)
	e.stream(jetstream.StreamConfig{Name: "FAST", Subjects: []string{"journal.>"}, AllowDirect: true})
	e.stream(jetstream.StreamConfig{Name: "SLOW", Subjects: []string{"slow.>"}, AllowDirect: false})
	all := e.interleave(300)
	for _, p := range all {
		e.publish("slow"+strings.TrimPrefix(p.subject, "journal"), p.data, p.hdr)
	}
	var logs testutil.SyncBuffer
	fast := e.reader("FAST")
	slow := e.reader("SLOW", journal.WithLogger(debugLogger(&logs)))

	for _, size := range []int{1, 7, 256} {
		fastRecs, fastPages := drain(t, fast, "journal.orders.>", 1, size)
		slowRecs, slowPages := drain(t, slow, "slow.orders.>", 1, size)
		if fastPages != slowPages || len(fastRecs) != len(slowRecs) {
			t.Fatalf("size %d: %d records in %d pages with direct get, %d in %d without",
				size, len(fastRecs), fastPages, len(slowRecs), slowPages)
		}
		for i := range fastRecs {
			f, s := fastRecs[i], slowRecs[i]
			if f.Seq != s.Seq || string(f.Data) != string(s.Data) || !sameHeader(f.Header, s.Header) ||
				strings.TrimPrefix(f.Subject, "journal") != strings.TrimPrefix(s.Subject, "slow") {
				t.Fatalf("size %d record %d: direct %+v, message get %+v", size, i, f, s)
			}
		}
	}
	if n := strings.Count(logs.String(), "does not allow direct gets"); n != 1 {
		t.Fatalf("slow path logged %d times:\n%s", n, logs.String())
	}
}

func TestConcurrentReadsOfOneFilterShareFetches(t *testing.T) {
	eachStreamKind(t, func(t *testing.T, allowDirect bool) {
		e := newEnv(t)
		e.stream(jetstream.StreamConfig{Name: "JOURNAL", AllowDirect: allowDirect})
		all := e.interleave(3000)
		want := matching(all, "journal.orders.>")

		// What one reader alone costs.
		alone := e.reader("JOURNAL")
		_, pages := drain(t, alone, "journal.orders.>", 1, 256)
		single := alone.Stats()

		shared := e.reader("JOURNAL")
		errs := make(chan error, 50)
		for range 50 {
			go func() {
				got, _, err := drainE(shared, "journal.orders.>", 1, 256)
				if err != nil {
					errs <- err
					return
				}
				if len(got) != len(want) {
					errs <- fmt.Errorf("got %d records, want %d", len(got), len(want))
					return
				}
				errs <- nil
			}()
		}
		for range 50 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		st := shared.Stats()
		t.Logf("%d pages; one reader: %+v; fifty readers: %+v", pages, single, st)
		// Fifty readers fetch the stream's messages once, as one reader does,
		// give or take one page raced at a boundary; without sharing they
		// would fetch them fifty times. What a late reader may add is the
		// check past the last cached run that finds nothing new: an empty
		// answer is never cached (the next message may arrive at once), so
		// readers reaching the end at different moments each ask once.
		if st.MessagesFetched > single.MessagesFetched+256 {
			t.Fatalf("fifty readers fetched %d messages; one reader fetched %d",
				st.MessagesFetched, single.MessagesFetched)
		}
		if st.Fetches > single.Fetches+50 {
			t.Fatalf("fifty readers made %d fetches; one reader made %d, and each reader may add one caught-up check",
				st.Fetches, single.Fetches)
		}
		if st.CacheHits < uint64(49*len(want)) {
			t.Fatalf("cache hits %d; want at least %d", st.CacheHits, 49*len(want))
		}
	})
}

func TestReadAfterCloseFails(t *testing.T) {
	eachStreamKind(t, func(t *testing.T, allowDirect bool) {
		e := newEnv(t)
		e.stream(jetstream.StreamConfig{Name: "JOURNAL", AllowDirect: allowDirect})
		r := e.reader("JOURNAL")
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Read(context.Background(), "journal.>", 1, 1); !errors.Is(err, journal.ErrClosed) {
			t.Fatalf("err = %v; want ErrClosed", err)
		}
	})
}

type summary struct {
	Records               int
	From, Skipped, Next   uint64
	CaughtUp              bool
	LastSeq, First, Final uint64
}

func pageSummary(pg journal.Page) summary {
	s := summary{Records: len(pg.Records), From: pg.From, Skipped: pg.Skipped, Next: pg.Next, CaughtUp: pg.CaughtUp, LastSeq: pg.LastSeq}
	if len(pg.Records) > 0 {
		s.First, s.Final = pg.Records[0].Seq, pg.Records[len(pg.Records)-1].Seq
	}
	return s
}

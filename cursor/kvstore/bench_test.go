package kvstore

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/jetstream-bridge/bridge/cursor"
)

const benchRows = 1000

// BenchmarkFlush is the cursor writes the store sustains: every
// iteration advances benchRows registrations by one message and flushes,
// one key at a time or DefaultFlushConcurrency at once.
func BenchmarkFlush(b *testing.B) {
	for _, n := range []int{1, DefaultFlushConcurrency} {
		b.Run(fmt.Sprintf("concurrency=%d", n), func(b *testing.B) {
			ctx := context.Background()
			s := openKV(b, startNATS(b), WithFlushConcurrency(n))
			for i := range benchRows {
				create(b, s, reg(fmt.Sprintf("r%04d", i), "outbox"))
			}
			b.ResetTimer()
			for i := range b.N {
				for j := range benchRows {
					if err := s.Advance(ctx, fmt.Sprintf("r%04d", j), cursor.Progress{NextSeq: uint64(i + 1), Delivered: 1}); err != nil {
						b.Fatal(err)
					}
				}
				if err := s.Flush(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(benchRows*b.N)/b.Elapsed().Seconds(), "writes/s")
		})
	}
}

// BenchmarkBareCAS is the loop Flush is measured against: kv.Update of
// benchRows keys with the row's own bytes and the revision of the last
// write, nothing else, one key at a time or DefaultFlushConcurrency at
// once.
func BenchmarkBareCAS(b *testing.B) {
	for _, n := range []int{1, DefaultFlushConcurrency} {
		b.Run(fmt.Sprintf("concurrency=%d", n), func(b *testing.B) {
			ctx := context.Background()
			s := openKV(b, startNATS(b))
			keys := make([]string, benchRows)
			revs := make([]uint64, benchRows)
			r := &row{Registration: cursor.Fresh(reg("r0000", "outbox"), t0), inc: 1}
			val, err := encodeRow(r)
			if err != nil {
				b.Fatal(err)
			}
			for i := range keys {
				keys[i] = encodeKey(fmt.Sprintf("r%04d", i))
				if revs[i], err = s.regs.Create(ctx, keys[i], val); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for range b.N {
				var wg sync.WaitGroup
				sem := make(chan struct{}, n)
				for i := range keys {
					sem <- struct{}{}
					wg.Go(func() {
						defer func() { <-sem }()
						rev, err := s.regs.Update(ctx, keys[i], val, revs[i])
						if err != nil {
							b.Error(err)
							return
						}
						revs[i] = rev
					})
				}
				wg.Wait()
			}
			b.ReportMetric(float64(benchRows*b.N)/b.Elapsed().Seconds(), "writes/s")
		})
	}
}

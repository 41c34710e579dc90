package main

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jetstream-bridge/bridge/cursor"
)

// createClients is how many admin API clients R1 runs at once.
const createClients = 16

// createRate is R1: registrations created through the admin API by
// createClients clients at once, each on a keep-alive connection of its
// own, every one a fresh id on a subject of its own from new messages, as
// a service registering its users' webhooks does.
func (b *bench) createRate(ctx context.Context) result {
	const what = "R1 admin API creates (per s)"
	n := b.sz.r1Creates
	logf("R1: %s creates through the admin API from %d clients at once", count(float64(n)), createClients)
	s, err := b.newStream(ctx, "r1", allowDirect)
	if err != nil {
		return failed("R1", what, err)
	}
	defer b.deleteStream(s)
	br, err := b.startFresh(ctx, s, "r1")
	if err != nil {
		return failed("R1", what, err)
	}
	defer br.stop() // at once if stopped before

	cpu0, _ := cpuTime(br.pid())
	start := time.Now()
	lat, err := b.createAll(ctx, br, s, n)
	took := time.Since(start)
	if err != nil {
		return failed("R1", what, err)
	}
	cpu1, _ := cpuTime(br.pid())
	errLines := errorsLogged(br.logPath)
	br.stop()
	// Every 201 must be a registration in the store, read with the
	// bridge gone.
	if err := countActive(br.dataDir, n); err != nil {
		return failed("R1", what, err)
	}

	rate := float64(n) / took.Seconds()
	return result{name: "R1",
		rows: []row{{what: what, bridge: count(rate), baseline: "-", ratio: "-", target: "≥ 5,000", met: yesNo(rate >= 5000)}},
		line: fmt.Sprintf("R1: %s creates from %d clients in %v (%.0f per s), each %s; bridge CPU %s per create (%.1f s); %d error log lines",
			count(float64(n)), createClients, took.Round(time.Millisecond), rate, summarize(lat),
			perMsg(cpu1-cpu0, n), (cpu1 - cpu0).Seconds(), errLines),
	}
}

// createAll creates n registrations from createClients goroutines, each
// with a client and a connection of its own, and returns every create's
// round trip. The first failure stops them all.
func (b *bench) createAll(ctx context.Context, br *bridgeProc, s stream, n int) ([]time.Duration, error) {
	return createMany(ctx, br, n, func(i int) registration {
		return registration{ID: fmt.Sprintf("new-%06d", i), Namespace: "outbox",
			Subject: fmt.Sprintf("%s.new.%d", s.prefix, i), URL: fmt.Sprintf("%s/r/%d", b.sink.url, i), Start: "new"}
	})
}

// createMany is createAll of the registrations mk makes.
func createMany(ctx context.Context, br *bridgeProc, n int, mk func(i int) registration) ([]time.Duration, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	lat := make([]time.Duration, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range createClients {
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}, Timeout: stallAfter}
		wg.Go(func() {
			defer client.CloseIdleConnections()
			for i := int(next.Add(1) - 1); i < n && ctx.Err() == nil; i = int(next.Add(1) - 1) {
				t0 := time.Now()
				code, err := br.apiVia(ctx, client, http.MethodPost, "/v1/registrations", mk(i), nil)
				if err == nil && code != http.StatusCreated {
					err = fmt.Errorf("POST /v1/registrations: %d, want 201", code)
				}
				if err != nil {
					cancel(fmt.Errorf("create %d of %d: %w", i+1, n, err))
					return
				}
				lat[i] = time.Since(t0)
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return nil, err
	}
	return lat, nil
}

// countActive checks that the store in dir holds want active outbox
// registrations and nothing else.
func countActive(dir string, want int) error {
	db, err := cursor.Open(filepath.Join(dir, "bridge.db"))
	if err != nil {
		return err
	}
	defer db.Close()
	counts, err := db.Counts(context.Background())
	if err != nil {
		return err
	}
	total := 0
	for _, byState := range counts {
		for _, c := range byState {
			total += c
		}
	}
	if got := counts["outbox"][cursor.Active]; got != want || total != want {
		return fmt.Errorf("the store holds %d active outbox registrations (%d in all) after %d creates answered 201", got, total, want)
	}
	return nil
}

package main

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/jetstream-bridge/bridge/attempt"
)

const (
	// attemptRegs is how many registrations share A1's log.
	attemptRegs = 1000
	// attemptReads is how many times A1 times each read.
	attemptReads = 20
	readTarget   = 50 * time.Millisecond
)

// attemptReads is A1: how long the admin API takes to answer what
// happened to a message or at an endpoint, in a log of a million
// attempts. The log is written by the attempt package itself, the way a
// bridge writes it, in the order that is hardest for each read: for the
// registration listing, every registration's attempts interleaved (fan-
// out, one in a thousand is the one read); for the sequence lookup, each
// registration's attempts together (one backlog after another, so one
// sequence's attempts lie a thousand records apart).
func (b *bench) attemptReads(ctx context.Context) result {
	n := b.sz.a1Attempts
	what := fmt.Sprintf("A1 newest 100 of one registration among %s attempts (ms)", count(float64(n)))
	whatSeq := fmt.Sprintf("A1 one ?seq= lookup among %s attempts (ms)", count(float64(n)))
	seqs := n / attemptRegs
	fail := func(err error) result {
		r := failed("A1", what, err)
		r.rows = append(r.rows, row{what: whatSeq, bridge: "failed", baseline: "-", ratio: "-", target: "-", met: "no"})
		return r
	}
	logf("A1: reads among %s attempts (%d registrations × %s sequences)", count(float64(n)), attemptRegs, count(float64(seqs)))
	s, err := b.newStream(ctx, "a1", allowDirect)
	if err != nil {
		return fail(err)
	}
	defer b.deleteStream(s)

	fanOut := func(i int) (int, int) { return i % attemptRegs, i / attemptRegs }
	backlogs := func(i int) (int, int) { return i / seqs, i % seqs }
	regList, err := b.readsIn(ctx, s, "A1FANOUT", n, fanOut, "/v1/registrations/"+regID(attemptRegs/2)+"/attempts?limit=100", 100)
	if err != nil {
		return fail(fmt.Errorf("registration listing: %w", err))
	}
	seqList, err := b.readsIn(ctx, s, "A1BACKLOGS", n, backlogs, fmt.Sprintf("/v1/attempts?seq=%d", seqs/2+1), attemptRegs)
	if err != nil {
		return fail(fmt.Errorf("sequence lookup: %w", err))
	}
	p50, worst := percentile(regList, 50), slices.Max(regList)
	s50, sworst := percentile(seqList, 50), slices.Max(seqList)
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d)/float64(time.Millisecond)) }
	return result{name: "A1",
		rows: []row{
			{what: what, bridge: ms(p50) + " (worst " + ms(worst) + ")", baseline: "-", ratio: "-", target: "≤ 50", met: yesNo(p50 <= readTarget)},
			{what: whatSeq, bridge: ms(s50) + " (worst " + ms(sworst) + ")", baseline: "-", ratio: "-", target: "≤ 50", met: yesNo(s50 <= readTarget)},
		},
		line: fmt.Sprintf("A1: %d reads each through the admin API of a bridge on a log of %s attempts; newest 100 of one registration (its attempts one in %d, interleaved): %s; ?seq= (the sequence's %d attempts %d records apart): %s",
			attemptReads, count(float64(n)), attemptRegs, fmtDurations(regList), attemptRegs, seqs, fmtDurations(seqList)),
	}
}

func regID(i int) string { return fmt.Sprintf("reg-%04d", i) }

// readsIn writes n attempts into the attempts stream name, at
// (registration, sequence) = at(i) for the i-th, starts a bridge on that
// log with the registration read, and times attemptReads GETs of path,
// each answering want attempts.
func (b *bench) readsIn(ctx context.Context, s stream, name string, n int, at func(int) (int, int),
	path string, want int) ([]time.Duration, error) {
	defer func() { _ = b.js.DeleteStream(context.Background(), name) }()
	if err := b.fillLog(ctx, name, n, at); err != nil {
		return nil, err
	}
	dir, err := b.newBridgeDir(strings.ToLower(name))
	if err != nil {
		return nil, err
	}
	br, err := b.startBridgeWithin(ctx, s, dir, 30*time.Second, "--attempts-stream", name, "--attempts-max-bytes", "4GiB")
	if err != nil {
		return nil, err
	}
	defer br.stop()
	reg := registration{ID: regID(attemptRegs / 2), Namespace: "outbox", Subject: s.prefix + ".none", URL: b.sink.url + "/r/0", Start: "new"}
	if _, err := br.api(ctx, "POST", "/v1/registrations", reg, nil); err != nil {
		return nil, err
	}
	client := &http.Client{Timeout: stallAfter}
	lat := make([]time.Duration, 0, attemptReads)
	for range attemptReads {
		var page struct {
			Attempts []attempt.Attempt `json:"attempts"`
		}
		start := time.Now()
		if _, err := br.apiVia(ctx, client, "GET", path, nil, &page); err != nil {
			return nil, err
		}
		lat = append(lat, time.Since(start))
		if len(page.Attempts) != want {
			return nil, fmt.Errorf("GET %s answered %d attempts, want %d", path, len(page.Attempts), want)
		}
	}
	return lat, nil
}

// fillLog records n 2xx deliveries into the attempts stream name through
// the attempt package, flushing every few thousand so its buffer never
// overflows, and fails if a record was dropped.
func (b *bench) fillLog(ctx context.Context, name string, n int, at func(int) (int, int)) error {
	start := time.Now()
	l, err := attempt.Open(ctx, b.nc, attempt.Config{Stream: name, MaxAge: time.Hour, MaxBytes: 4 << 30})
	if err != nil {
		return err
	}
	t0 := time.Now().UTC()
	for i := range n {
		reg, seq := at(i)
		l.Record(attempt.Attempt{Registration: regID(reg), Seq: uint64(seq + 1), WebhookID: fmt.Sprintf("JOURNAL-%d", seq+1),
			Attempt: 1, At: t0.Add(time.Duration(i) * time.Microsecond), Outcome: attempt.Outcome2xx, Status: 204,
			Trigger: attempt.TriggerDelivery})
		if i%4096 == 4095 {
			l.Flush(ctx)
		}
	}
	closeCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	l.Close(closeCtx)
	var m dto.Metric
	if err := l.Collectors()[0].(prometheus.Counter).Write(&m); err != nil || m.GetCounter().GetValue() != 0 {
		return fmt.Errorf("writing the log dropped %v records (%v)", m.GetCounter().GetValue(), err)
	}
	st, err := b.js.Stream(ctx, name)
	if err != nil {
		return err
	}
	logf("A1: %s attempts written to %s in %v, %s messages", count(float64(n)), name, time.Since(start).Round(time.Millisecond),
		count(float64(st.CachedInfo().State.Msgs)))
	return nil
}

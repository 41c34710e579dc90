package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// The filter scenarios (CONTRACT §13) measure what a registration's CEL
// filter costs the delivery: S1f is S1 with a filter that reads every
// message's data and passes it, against S1 without, alternated on one
// backlog as S1h is (options.go); S2f is S2 with a filter on each of its
// registrations passing half the messages, twice as many published, so
// that it makes as many POSTs as S2 does, against S2 in the same run
// (report.go's comparisons). Their messages are JSON orders of 1 KiB and
// their registrations say so (dataContentType), so a filter reads the
// data parsed, as a user's filter on data does.

// jsonContentType is the filter scenarios' registrations' dataContentType.
const jsonContentType = "application/json"

// The bridge's filter counters, outbox's series.
const (
	filteredSeries     = `bridge_filtered_total{namespace="outbox"}`
	filterErrorsSeries = `bridge_filter_errors_total{namespace="outbox"}`
)

// orderJSON is message i of a filter scenario: an order of ten items,
// `{"n":i,…,"total":…,…}`, padded to 1 KiB by its note, as the other
// scenarios' payloads are 1 KiB.
func orderJSON(i int) []byte {
	regions := [...]string{"eu", "us", "apac"}
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"n":%d,"order":"ord-%07d","customer":{"id":"c-%d","region":%q,"tier":"gold"},"total":%d.%02d,"currency":"EUR","items":[`,
		i, i, i%977, regions[i%len(regions)], 10+i%990, i%100)
	for k := range 10 {
		if k > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"sku":"SKU-%04d","name":"item number %d","qty":%d,"price":%d.99}`, (i+k)%10_000, k, k%3+1, 10+k)
	}
	const end = `"}`
	b.WriteString(`],"note":"`)
	b.Write(bytes.Repeat([]byte{'x'}, max(kib-b.Len()-len(end), 0)))
	b.WriteString(end)
	return b.Bytes()
}

// passAll is S1f's filter: it reads data, so every message is parsed,
// and passes every one of orderJSON's.
const passAll = "data.total >= 0"

// fanFilter is how a filtered fan-out filters: spread times the messages
// are published, and registration reg is sent message m (from 0) when
// passes(reg, m), which its filter expr(reg) says of it.
type fanFilter struct {
	label  string
	spread int
	expr   func(reg int) string
	passes func(reg, m int) bool
}

// halfByParity is S2f's: the even registrations pass the even n, the odd
// ones the odd, each half of twice the messages.
var halfByParity = fanFilter{
	label:  "filters passing half (data.n % 2 == the registration's parity), twice the messages",
	spread: 2,
	expr:   func(reg int) string { return fmt.Sprintf("data.n %% 2 == %d", reg%2) },
	passes: func(reg, m int) bool { return m%2 == reg%2 },
}

// passedOver is what br's filters counted since filtered0 and errs0, once
// the passed-over count reaches want or a few seconds have gone by: the
// run ends at its last delivery, and a registration's last messages may
// be passed over after it.
func passedOver(ctx context.Context, br *bridgeProc, filtered0, errs0, want float64) string {
	deadline := time.Now().Add(10 * time.Second)
	filtered, _, _ := br.metric(ctx, filteredSeries)
	for filtered-filtered0 < want && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
		filtered, _, _ = br.metric(ctx, filteredSeries)
	}
	errs, _, _ := br.metric(ctx, filterErrorsSeries)
	return fmt.Sprintf("filters passed over %s (want %s), %.0f filter errors", count(filtered-filtered0), count(want), errs-errs0)
}

// filterAll is S1f: S1 of JSON orders through a registration whose filter
// passes every one, against the same registration without a filter.
func (b *bench) filterAll(ctx context.Context) result {
	const name, what = "S1f", "S1f drain, filter passing all (msg/s)"
	check := &checked{next: b.sink, carries: func(r *http.Request) bool {
		return strings.HasPrefix(r.Header.Get("Content-Type"), jsonContentType)
	}}
	rl, err := listen(check, nil)
	if err != nil {
		return failed(name, what, err)
	}
	defer rl.close()
	asJSON := func(reg *registration) { reg.DataContentType = jsonContentType }
	p := pairing{name: name, label: "filter passing all ÷ none", target: 0.95, payload: orderJSON,
		a: side{v: variant{name: name, what: what}, label: "no filter", url: rl.url + "/r/0", shape: asJSON},
		b: side{v: variant{name: name, what: what}, label: "filter " + passAll, url: rl.url + "/r/0",
			shape: func(reg *registration) { asJSON(reg); reg.Filter = passAll }},
		probe: func() []int64 { return []int64{check.all.Load(), check.ok.Load()} },
	}
	rounds, err := b.paired(ctx, p)
	if err != nil {
		return failed(name, what, err)
	}
	return pairResult(p, rounds, b.sz.s1Backlog, fmt.Sprintf(
		"JSON orders of 1 KiB, dataContentType %s; POSTs with that Content-Type: %s of %s without the filter, %s of %s with it (the registration's answer echoes the filter)",
		jsonContentType, count(float64(moved(rounds, 0, 1))), count(float64(moved(rounds, 0, 0))),
		count(float64(moved(rounds, 1, 1))), count(float64(moved(rounds, 1, 0)))))
}

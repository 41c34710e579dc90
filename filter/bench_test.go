package filter_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/jetstream-bridge/bridge/filter"
)

// order1KiB is a typical 1 KiB JSON order event.
func order1KiB() string {
	var items []string
	for i := range 12 {
		items = append(items, fmt.Sprintf(`{"sku":"SKU-%04d","name":"item number %d","qty":%d,"price":%d.99}`, i, i, i%3+1, 10+i))
	}
	body := fmt.Sprintf(`{"order":"ord-42","customer":{"id":"c-7","region":"eu","tier":"gold"},"total":150.5,"currency":"EUR","items":[%s]}`,
		strings.Join(items, ","))
	return body + strings.Repeat(" ", max(1024-len(body), 0))
}

// BenchmarkMatch is one typical filter on a 1 KiB JSON message, per
// message and registration, after the message's shared parse: the input
// is built and its data parsed once, outside the timer, as one journal
// message is for every registration that filters it.
func BenchmarkMatch(b *testing.B) {
	rec := record(7, "journal.orders.42", order1KiB(), map[string][]string{"ce-type": {"order.created"}, "X-Tenant": {"eu"}})
	for _, expr := range []string{
		"event.type == 'order.created' && data.total > 100",
		"headers['x-tenant'] == 'eu' && data.customer.tier == 'gold'",
		"subject.startsWith('journal.orders.')",
	} {
		b.Run(expr, func(b *testing.B) {
			p := compile(b, expr)
			in := input(b, rec)
			if ok, err := p.Match(in); !ok || err != nil {
				b.Fatalf("Match = %v, %v", ok, err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if ok, _ := p.Match(in); !ok {
					b.Fatal("no match")
				}
			}
		})
	}
}

// BenchmarkInput is the shared part: a 1 KiB JSON message's event read
// into an input and its data parsed, once per journal message.
func BenchmarkInput(b *testing.B) {
	rec := record(7, "journal.orders.42", order1KiB(), map[string][]string{"ce-type": {"order.created"}})
	p := compile(b, "data.total > 100")
	b.ReportAllocs()
	for b.Loop() {
		if ok, _ := p.Match(input(b, rec)); !ok {
			b.Fatal("no match")
		}
	}
}

// BenchmarkParseJSON is the parse alone.
func BenchmarkParseJSON(b *testing.B) {
	raw := []byte(order1KiB())
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		filter.ParseJSON(raw)
	}
}

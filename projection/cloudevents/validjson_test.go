package jsonscan

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// validV2 is Valid's contract written with github.com/go-json-experiment/json
// (the json/v2 design): jsontext refuses duplicate names and lone surrogate
// escapes by default, which json.Valid accepts, so both are allowed, and
// UTF-8 is checked apart because allowing invalid escapes also lets raw
// invalid bytes through.
func validV2(b []byte) bool {
	return utf8.Valid(b) && jsontext.Value(b).IsValid(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
}

// orderDoc is a typical outbox payload of about 300 bytes.
const orderDoc = `{"orderId":"ord_8f14e45fceea167a","customer":{"id":"cus_42","email":"ada@example.com","name":"Ada Lovelace"},` +
	`"items":[{"sku":"BK-001","qty":2,"price":12.5},{"sku":"PN-104","qty":1,"price":3.99,"tags":["gift","fragile"]}],` +
	`"currency":"EUR","total":28.99,"paid":true,"coupon":null,"createdAt":"2026-03-15T10:30:00.123Z"}`

// orders is a JSON array of orderDoc of at least size bytes.
func orders(size int) []byte {
	b := []byte{'['}
	for len(b) < size-len(orderDoc) {
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = append(b, orderDoc...)
	}
	return append(b, ']')
}

// payloads are the data a structured CloudEvent carries: a 300 B order,
// the 1 KiB document of the cloudevents benchmarks, 1 KiB of orders and a
// 64 KiB batch of them.
func payloads() []struct {
	name string
	doc  []byte
} {
	return []struct {
		name string
		doc  []byte
	}{
		{"300B", []byte(orderDoc)},
		{"1KiB", []byte(`{"order":42,"note":"` + strings.Repeat("x", 1024-len(`{"order":42,"note":""}`)) + `"}`)},
		{"1KiB-orders", orders(1024)},
		{"64KiB", orders(64 << 10)},
	}
}

// TestValidAgreesWithJSONv2 gives Valid and validV2 the benchmarked payloads
// and broken copies of them: cut short, a byte made invalid UTF-8, a member
// repeated, a lone surrogate, trailing junk, nesting past the limit.
func TestValidAgreesWithJSONv2(t *testing.T) {
	cases := map[string][]byte{
		"deep":     []byte(strings.Repeat(`{"a":`, maxDepth) + "1" + strings.Repeat("}", maxDepth)),
		"too deep": []byte(strings.Repeat(`{"a":`, maxDepth+1) + "1" + strings.Repeat("}", maxDepth+1)),
	}
	for _, p := range payloads() {
		doc := p.doc
		cases[p.name] = doc
		for _, cut := range []int{1, len(doc) / 2, len(doc) - 1} {
			cases[p.name+" cut at "+strconv.Itoa(cut)] = doc[:cut]
		}
		cases[p.name+" invalid UTF-8"] = append(append(doc[:len(doc)/2:len(doc)/2], 0xff), doc[len(doc)/2:]...)
		cases[p.name+" duplicate member"] = []byte(`{"a":1,"a":` + string(doc) + `}`)
		cases[p.name+" lone surrogate"] = []byte(`["\ud800",` + string(doc) + `]`)
		cases[p.name+" trailing junk"] = []byte(string(doc) + ` x`)
		cases[p.name+" padded"] = []byte(" \t\r\n" + string(doc) + "\n")
	}
	for name, b := range cases {
		want := json.Valid(b) && utf8.Valid(b)
		if got := Valid(b); got != want {
			t.Errorf("%s: Valid = %v, encoding/json says %v", name, got, want)
		}
		if got := validV2(b); got != want {
			t.Errorf("%s: validV2 = %v, encoding/json says %v", name, got, want)
		}
	}
}

// BenchmarkValid compares Valid with validV2 on the same payloads.
func BenchmarkValid(b *testing.B) {
	for _, p := range payloads() {
		for _, impl := range []struct {
			name  string
			valid func([]byte) bool
		}{{"jsonscan", Valid}, {"jsonv2", validV2}} {
			b.Run(p.name+"/"+impl.name, func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(p.doc)))
				for b.Loop() {
					if !impl.valid(p.doc) {
						b.Fatal("refused")
					}
				}
			})
		}
	}
}

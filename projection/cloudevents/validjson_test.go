package cloudevents

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// maxDepth is encoding/json's nesting limit.
const maxDepth = 10000

// FuzzValidJSON holds validJSON to its promise: the same answer as
// json.Valid and utf8.Valid together, for any input.
func FuzzValidJSON(f *testing.F) {
	for _, s := range []string{
		``, ` `, `0`, `-0`, `01`, `1.`, `1.5e`, `1.5E+3`, `-`, `"a\u00e9\n"`, `"\x"`, "\"\x01\"", `"\u12g4"`,
		`{"a":[1,true,false,null,{"b":"c"}]}`, `{"a" : 1 , }`, `[1,]`, `[] x`, ` {} `, `{"a"}`, `tru`, `nul`,
		"\"\xff\"", `"é"`, strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth),
		strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := validJSON(b), encodingJSONValid(b); got != want {
			t.Fatalf("validJSON(%q) = %v, want %v", b, got, want)
		}
	})
}

func encodingJSONValid(b []byte) bool { return json.Valid(b) && utf8.Valid(b) }

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

// TestValidJSONAgreesWithEncodingJSON gives validJSON the benchmarked
// payloads and broken copies of them: cut short, a byte made invalid UTF-8,
// a member repeated, a lone surrogate, trailing junk, nesting past the limit.
func TestValidJSONAgreesWithEncodingJSON(t *testing.T) {
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
		if got, want := validJSON(b), encodingJSONValid(b); got != want {
			t.Errorf("%s: validJSON = %v, encoding/json says %v", name, got, want)
		}
	}
}

// BenchmarkValidJSON compares validJSON with encoding/json on the same payloads.
func BenchmarkValidJSON(b *testing.B) {
	for _, p := range payloads() {
		for _, impl := range []struct {
			name  string
			valid func([]byte) bool
		}{{"jsonv2", validJSON}, {"encoding-json", encodingJSONValid}} {
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

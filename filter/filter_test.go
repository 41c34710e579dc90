package filter_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"cel.dev/cel-go/common/types/ref"

	"github.com/jetstream-bridge/bridge/filter"
	"github.com/jetstream-bridge/bridge/projection"
	"github.com/jetstream-bridge/bridge/projection/cloudevents"
)

var stored = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// record is a journal message with a JSON payload, as the stream holds it.
func record(seq uint64, subject, body string, header map[string][]string) *projection.Record {
	h := map[string][]string{"Content-Type": {"application/json"}}
	for k, v := range header {
		h[k] = v
	}
	return &projection.Record{Stream: "JOURNAL", Seq: seq, Subject: subject, Time: stored, Header: h, Data: []byte(body)}
}

// input is rec as a binary outbox registration's filter reads it.
func input(t testing.TB, rec *projection.Record) *filter.Input {
	t.Helper()
	ev, err := cloudevents.New().Describe(projection.Target{Format: "binary"}, rec)
	if err != nil {
		t.Fatal(err)
	}
	return filter.NewInput(ev, rec, nil)
}

func compile(t testing.TB, expr string) *filter.Program {
	t.Helper()
	p, err := filter.Compile(expr)
	if err != nil {
		t.Fatalf("Compile(%q): %v", expr, err)
	}
	return p
}

func TestMatch(t *testing.T) {
	created := record(7, "journal.orders.42", `{"total": 150.5, "count": 3, "region": "eu", "items": [{"sku": "a"}]}`,
		map[string][]string{"ce-type": {"order.created"}, "X-Tenant": {"eu-1", "eu-2"}})
	small := record(8, "journal.orders.43", `{"total": 20, "count": 1}`,
		map[string][]string{"Ce-Type": {"order.created"}, "x-tenant": {"us"}})
	plain := &projection.Record{Stream: "JOURNAL", Seq: 9, Subject: "journal.pings", Time: stored, Data: []byte("hi")}
	for _, c := range []struct {
		expr string
		want map[*projection.Record]bool
	}{
		{"event.type == 'order.created'", map[*projection.Record]bool{created: true, small: true, plain: false}},
		{"event.type == 'order.created' && data.total > 100", map[*projection.Record]bool{created: true, small: false}},
		{"data.count == 3", map[*projection.Record]bool{created: true, small: false}},
		{"headers['x-tenant'] == 'eu-1'", map[*projection.Record]bool{created: true, small: false}},
		{"subject.startsWith('journal.orders.')", map[*projection.Record]bool{created: true, small: true, plain: false}},
		{"event.natsseq == 8 && event.id == 'JOURNAL-8'", map[*projection.Record]bool{created: false, small: true}},
		{"event.source == '/jetstream/JOURNAL' && event.subject == subject", map[*projection.Record]bool{created: true, plain: true}},
		{"event.time == timestamp('2026-03-01T12:00:00Z')", map[*projection.Record]bool{created: true}},
		{"event.datacontenttype == 'application/octet-stream' && data == b'hi'", map[*projection.Record]bool{plain: true, small: false}},
		{"data.items.exists(i, i.sku == 'a')", map[*projection.Record]bool{created: true}},
		{"!('x-tenant' in headers)", map[*projection.Record]bool{plain: true, created: false}},
	} {
		p := compile(t, c.expr)
		for rec, want := range c.want {
			got, err := p.Match(input(t, rec))
			if err != nil || got != want {
				t.Errorf("%s on message %d = %v, %v; want %v", c.expr, rec.Seq, got, err, want)
			}
		}
	}
}

// TestMatchFails: an expression that fails on a message answers an error
// naming what failed, not false.
func TestMatchFails(t *testing.T) {
	small := record(8, "journal.orders.43", `{"count": 1}`, nil)
	broken := record(9, "journal.orders.44", `{"total": `, nil)
	for _, c := range []struct {
		expr string
		rec  *projection.Record
		want string
	}{
		{"data.total > 100", small, "no such key: total"},
		{"headers['x-tenant'] == 'eu'", small, "no such key: x-tenant"},
		{"data.total > 100", broken, "total"},
		{"data.count", record(1, "s", `{"count": 1}`, nil), "not a bool"},
	} {
		_, err := compile(t, c.expr).Match(input(t, c.rec))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s on message %d: error %v, want one containing %q", c.expr, c.rec.Seq, err, c.want)
		}
	}
}

// TestCostLimit: an expression allowed by the estimate still stops at
// the cost limit on a message large enough to pass it.
func TestCostLimit(t *testing.T) {
	items := strings.Repeat(`{"sku":"b"},`, 150_000)
	rec := record(1, "s", `{"items": [`+items+`{"sku":"a"}]}`, nil)
	_, err := compile(t, "data.items.exists(i, i.sku == 'a')").Match(input(t, rec))
	if err == nil || !strings.Contains(err.Error(), "cost") {
		t.Fatalf("error = %v, want the cost limit", err)
	}
}

func TestCompileRefuses(t *testing.T) {
	for _, c := range []struct{ expr, want string }{
		{"", "must not be empty"},
		{"subject ==", "filter:1:11: Syntax error"},
		{"event.type == 'a' &&\n  data.total >", "filter:2:15: Syntax error"},
		{"nope == 1", "undeclared reference to 'nope'"},
		{"subject", "must yield a bool, not string"},
		{"size(subject) + 1", "must yield a bool, not int"},
		{"subject == 1", "found no matching overload"},
		{"data.items.all(a, data.items.all(b, a == b))", "over the bound"},
		{strings.Repeat("true && ", 600) + "true", "at most"},
	} {
		_, err := filter.Compile(c.expr)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Compile(%.40q) = %v, want an error containing %q", c.expr, err, c.want)
		}
	}
}

// TestDataParsedOnce: data is parsed only when an expression reads it,
// and once for every expression that does.
func TestDataParsedOnce(t *testing.T) {
	rec := record(1, "s", `{"total": 150}`, nil)
	ev, err := cloudevents.New().Describe(projection.Target{}, rec)
	if err != nil {
		t.Fatal(err)
	}
	var parses atomic.Int32
	in := filter.NewInput(ev, rec, func(raw []byte) ref.Val { parses.Add(1); return filter.ParseJSON(raw) })
	if ok, err := compile(t, "event.type != ''").Match(in); !ok || err != nil || parses.Load() != 0 {
		t.Fatalf("no data read: %v, %v, %d parses", ok, err, parses.Load())
	}
	p := compile(t, "data.total > 100")
	done := make(chan struct{})
	for range 8 {
		go func() {
			defer func() { done <- struct{}{} }()
			if ok, err := p.Match(in); !ok || err != nil {
				t.Errorf("Match = %v, %v", ok, err)
			}
		}()
	}
	for range 8 {
		<-done
	}
	if n := parses.Load(); n != 1 {
		t.Fatalf("%d parses for 8 evaluations, want 1", n)
	}
}

func TestParseJSON(t *testing.T) {
	for in, want := range map[string]string{
		`{"a": [1, 2.5, "x", true, null, {"b": 9007199254740993}]}`: `map[a:[1 2.5 x true <nil> map[b:9007199254740993]]]`,
		`  7 `:           `7`,
		`1e400`:          `+Inf`,
		`{"a":1,"a":2}`:  `map[a:2]`,
		`{"a":1}{"b":2}`: "bytes",
		`{"total": `:     "bytes",
		strings.Repeat("[", 2000) + strings.Repeat("]", 2000): "bytes",
	} {
		v := filter.ParseJSON([]byte(in))
		if want == "bytes" {
			if b, ok := v.Value().([]byte); !ok || string(b) != in {
				t.Errorf("ParseJSON(%.20q) = %T, want the bytes", in, v.Value())
			}
			continue
		}
		if got := fmt.Sprint(v.Value()); got != want {
			t.Errorf("ParseJSON(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestIsJSON(t *testing.T) {
	for ct, want := range map[string]bool{
		"application/json": true, "Application/JSON; charset=utf-8": true, "application/vnd.order+json": true,
		"text/plain": false, "application/octet-stream": false, "": false, "application/jsonx": false,
	} {
		if got := filter.IsJSON(ct); got != want {
			t.Errorf("IsJSON(%q) = %v", ct, got)
		}
	}
}

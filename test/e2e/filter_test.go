package e2e

import (
	"fmt"
	"net/http"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// filterSnapshot is what the API answers of a filtered registration.
type filterSnapshot struct {
	State           string `json:"state"`
	NextSeq         uint64 `json:"nextSeq"`
	Lag             uint64 `json:"lag"`
	Delivered       uint64 `json:"delivered"`
	Filter          string `json:"filter"`
	Filtered        uint64 `json:"filtered"`
	FilterErrors    uint64 `json:"filterErrors"`
	LastFilterError string `json:"lastFilterError"`
}

func filterSnapshotOf(t *testing.T, d *daemon, id string) filterSnapshot {
	t.Helper()
	var s filterSnapshot
	if code := d.api("GET", "/v1/registrations/"+id, nil, &s); code != http.StatusOK {
		t.Fatalf("GET %s: %d", id, code)
	}
	return s
}

// filterMsg is message i of the filter scenario: an order of region eu
// or us (every fifth a ping), of type created, paid or heartbeat in
// turn, with total 10·i — except message 13, which has no total.
type filterMsg struct {
	i                          int
	subject, region, typ, body string
	seq                        uint64
}

func filterPlan(from, to int) []filterMsg {
	var out []filterMsg
	for i := from; i < to; i++ {
		m := filterMsg{i: i, region: []string{"eu", "us"}[i%2], typ: []string{"order.created", "order.paid", "heartbeat"}[i%3]}
		m.subject = "journal.f.orders." + m.region
		if i%5 == 4 {
			m.subject = "journal.f.pings." + m.region
		}
		m.body = fmt.Sprintf(`{"n":%d,"total":%d}`, i, 10*i)
		if i == 13 {
			m.body = `{"n":13}`
		}
		out = append(out, m)
	}
	return out
}

func publishFilterPlan(t *testing.T, p *publisher, plan []filterMsg) {
	t.Helper()
	for k := range plan {
		m := &plan[k]
		m.seq = publishMsg(t, p, &nats.Msg{Subject: m.subject, Data: []byte(m.body), Header: nats.Header{
			"Content-Type": {"application/json"}, "X-Tenant": {m.region}, "Ce-Type": {m.typ}}})
	}
}

func bodiesWhere(plan []filterMsg, keep func(filterMsg) bool) []string {
	var out []string
	for _, m := range plan {
		if keep(m) {
			out = append(out, m.body)
		}
	}
	return out
}

// TestFilters runs CONTRACT §13 against the real binary: four
// registrations over one subject filter, each with a filter on another
// variable (event.type, data, headers, subject — the last registered
// with the CLI's --filter), and a keyed one on data. Each gets exactly
// the matching messages, in order (per subject for the keyed one); the
// rest are counted as filtered, the message without a total as the
// data filters' error, naming its sequence, while they stay active and
// go on; lag reaches 0. A PUT changing a filter applies to the messages
// after it, and a restart keeps the filter and the counts. The API
// refuses what does not compile, with CEL's position, and a filter on
// a2a.
func TestFilters(t *testing.T) {
	d := newDaemon(t, "--a2a-allow-loopback")
	d.start()
	type reg struct {
		id, filter string
		ordering   map[string]any
		keep       func(filterMsg) bool
		failsOn13  bool
		sink       *sink
	}
	regs := []*reg{
		{id: "by-type", filter: "event.type == 'order.created'", keep: func(m filterMsg) bool { return m.typ == "order.created" }},
		{id: "by-total", filter: "data.total > 100", keep: func(m filterMsg) bool { return m.i > 10 && m.i != 13 }, failsOn13: true},
		{id: "by-tenant", filter: "headers['x-tenant'] == 'eu'", keep: func(m filterMsg) bool { return m.region == "eu" }},
		{id: "by-subject", filter: "subject.startsWith('journal.f.pings.')", keep: func(m filterMsg) bool { return m.i%5 == 4 }},
		{id: "keyed-total", filter: "data.total > 100 && event.natsseq > 0", ordering: map[string]any{"key": "subject", "maxInFlight": 4},
			keep: func(m filterMsg) bool { return m.i > 10 && m.i != 13 }, failsOn13: true},
	}
	for _, r := range regs {
		r.sink = newSink(t)
		if r.id == "by-subject" {
			out, code := d.cli("register", "--id", r.id, "--namespace", "outbox", "--subject", "journal.f.>",
				"--url", r.sink.URL, "--start", "first", "--filter", r.filter)
			if code != 0 {
				t.Fatalf("bridge register --filter: exit %d\n%s", code, out)
			}
			continue
		}
		body := map[string]any{"id": r.id, "namespace": "outbox", "subject": "journal.f.>", "url": r.sink.URL,
			"start": "first", "filter": r.filter}
		if r.ordering != nil {
			body["ordering"] = r.ordering
		}
		enrol(t, d, body)
	}
	for _, r := range regs {
		if s := filterSnapshotOf(t, d, r.id); s.Filter != r.filter {
			t.Fatalf("%s: filter echoed as %q, want %q", r.id, s.Filter, r.filter)
		}
	}

	pub := publisherOf(t, d)
	plan := filterPlan(0, 30)
	publishFilterPlan(t, pub, plan)
	last := plan[len(plan)-1].seq
	settled := func(r *reg, delivered uint64) filterSnapshot {
		t.Helper()
		var s filterSnapshot
		waitFor(t, 30*time.Second, r.id+": every message delivered or filtered, lag 0", func() bool {
			s = filterSnapshotOf(t, d, r.id)
			return s.NextSeq > last && s.Lag == 0 && s.Delivered == delivered
		})
		return s
	}
	for _, r := range regs {
		want := bodiesWhere(plan, r.keep)
		s := settled(r, uint64(len(want)))
		got := r.sink.bodies()
		if r.ordering != nil {
			// In order per key (subject); the set is the same.
			sort.Strings(got)
			want = append([]string(nil), want...)
			sort.Strings(want)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: delivered %q\nwant %q", r.id, got, want)
		}
		failed := uint64(0)
		if r.failsOn13 {
			failed = 1
			if want := fmt.Sprintf("journal message %d:", plan[13].seq); !strings.Contains(s.LastFilterError, want) ||
				!strings.Contains(s.LastFilterError, "total") {
				t.Errorf("%s: lastFilterError %q, want it to name %q and total", r.id, s.LastFilterError, want)
			}
		}
		if s.State != "active" || s.FilterErrors != failed || s.Filtered != uint64(len(plan)-len(want))-failed {
			t.Errorf("%s: %+v; want active, filterErrors %d, filtered %d", r.id, s, failed, uint64(len(plan)-len(want))-failed)
		}
	}

	// A PUT that changes the filter applies to the messages after it.
	byType := regs[0]
	put := map[string]any{"namespace": "outbox", "subject": "journal.f.>", "url": byType.sink.URL, "filter": "event.type == 'order.paid'"}
	if code, body := callAdmin(t, d, "PUT", "/v1/registrations/by-type", mustJSON(t, put)); code != http.StatusOK {
		t.Fatalf("PUT: %d %s", code, body)
	}
	second := filterPlan(30, 36)
	publishFilterPlan(t, pub, second)
	last = second[len(second)-1].seq
	want := append(bodiesWhere(plan, byType.keep), bodiesWhere(second, func(m filterMsg) bool { return m.typ == "order.paid" })...)
	settled(byType, uint64(len(want)))
	if got := byType.sink.bodies(); !reflect.DeepEqual(got, want) {
		t.Errorf("after the PUT: delivered %q\nwant %q", got, want)
	}

	// A restart keeps the filter and the counts.
	before := filterSnapshotOf(t, d, "by-total")
	if code := d.stop(); code != 0 {
		t.Fatalf("exit code %d, want 0", code)
	}
	d.start()
	if s := filterSnapshotOf(t, d, "by-type"); s.Filter != "event.type == 'order.paid'" {
		t.Errorf("after a restart the filter is %q", s.Filter)
	}
	if s := filterSnapshotOf(t, d, "by-total"); s.Filtered != before.Filtered || s.FilterErrors != 1 || s.LastFilterError != before.LastFilterError {
		t.Errorf("after a restart: %+v, before %+v", s, before)
	}
	third := filterPlan(36, 42)
	publishFilterPlan(t, pub, third)
	last = third[len(third)-1].seq
	want = append(want, bodiesWhere(third, func(m filterMsg) bool { return m.typ == "order.paid" })...)
	settled(byType, uint64(len(want)))
	if got := byType.sink.bodies(); !reflect.DeepEqual(got, want) {
		t.Errorf("after the restart: delivered %q\nwant %q", got, want)
	}

	refused := []struct {
		name      string
		body      map[string]any
		fragments []string
	}{
		{"syntax", map[string]any{"filter": "event.type == "}, []string{"filter:1:15", "Syntax error"}},
		{"not a bool", map[string]any{"filter": "subject"}, []string{"filter must yield a bool"}},
		{"unknown variable", map[string]any{"filter": "tenant == 'eu'"}, []string{"filter:1:1", "undeclared reference to 'tenant'"}},
		{"over cost", map[string]any{"filter": "data.items.all(a, data.items.all(b, a == b))"}, []string{"over the bound"}},
		{"on a2a", map[string]any{"namespace": "a2a", "taskId": "task-f", "subject": nil, "filter": "subject == 'x'"}, []string{"filter applies to outbox"}},
	}
	for _, c := range refused {
		body := map[string]any{"id": "refused", "namespace": "outbox", "subject": "journal.f.>", "url": byType.sink.URL}
		for k, v := range c.body {
			if v == nil {
				delete(body, k)
				continue
			}
			body[k] = v
		}
		code, answer := callAdmin(t, d, "POST", "/v1/registrations", mustJSON(t, body))
		wantRefusal(t, code, answer, http.StatusBadRequest, c.fragments...)
	}
	if code := d.stop(); code != 0 {
		t.Fatalf("exit code %d, want 0", code)
	}
}

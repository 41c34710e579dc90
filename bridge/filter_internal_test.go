package bridge

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cel.dev/cel-go/common/types/ref"

	"github.com/jetstream-bridge/bridge/cursor"
	"github.com/jetstream-bridge/bridge/filter"
	"github.com/jetstream-bridge/bridge/projection"
	"github.com/jetstream-bridge/bridge/projection/cloudevents"
)

// countingDescriber counts how often a message is described.
type countingDescriber struct {
	*cloudevents.Projection
	described atomic.Int32
}

func (d *countingDescriber) Describe(t projection.Target, r *projection.Record) (projection.Event, error) {
	d.described.Add(1)
	return d.Projection.Describe(t, r)
}

// TestFilterParsesOncePerMessage: a thousand registrations filtering one
// message on its data, from concurrent turns, describe it once and parse
// it once; a filter that does not read data parses nothing, and
// registrations without a filter do not even describe it.
func TestFilterParsesOncePerMessage(t *testing.T) {
	var parses atomic.Int32
	parseJSON = func(raw []byte) ref.Val { parses.Add(1); return filter.ParseJSON(raw) }
	t.Cleanup(func() { parseJSON = filter.ParseJSON })
	p := &countingDescriber{Projection: cloudevents.New()}
	w, err := New(nil, nil, nil, p)
	if err != nil {
		t.Fatal(err)
	}
	rec := func(seq uint64) *projection.Record {
		return &projection.Record{Stream: "JOURNAL", Seq: seq, Subject: "journal.orders.1", Time: time.Unix(1, 0),
			Header: map[string][]string{"Content-Type": {"application/json"}}, Data: []byte(`{"total": 150}`)}
	}
	screenAll := func(expr string, r *projection.Record) (delivered int) {
		var wg sync.WaitGroup
		var n atomic.Int32
		for i := range 1000 {
			reg := cursor.Registration{Config: cursor.Config{ID: fmt.Sprintf("r%d", i), Namespace: "outbox", Filter: expr}}
			wg.Go(func() {
				v, err := w.screen(&reg, r)
				if err != nil || v.err != "" {
					t.Errorf("screen: %+v, %v", v, err)
				}
				if v.deliver {
					n.Add(1)
				}
			})
		}
		wg.Wait()
		return int(n.Load())
	}
	if n := screenAll("", rec(1)); n != 1000 || p.described.Load() != 0 || parses.Load() != 0 {
		t.Fatalf("without a filter: %d delivered, %d described, %d parsed", n, p.described.Load(), parses.Load())
	}
	if n := screenAll("subject.startsWith('journal.orders.')", rec(2)); n != 1000 || p.described.Load() != 1 || parses.Load() != 0 {
		t.Fatalf("a filter without data: %d delivered, %d described, %d parsed", n, p.described.Load(), parses.Load())
	}
	if n := screenAll("data.total > 100", rec(3)); n != 1000 || p.described.Load() != 2 || parses.Load() != 1 {
		t.Fatalf("a filter on data: %d delivered, %d described, %d parsed; want one of each", n, p.described.Load(), parses.Load())
	}
	if n := screenAll("data.total > 200", rec(3)); n != 0 || p.described.Load() != 2 || parses.Load() != 1 {
		t.Fatalf("another filter on data: %d delivered, %d described, %d parsed; want the message's one parse", n, p.described.Load(), parses.Load())
	}
}

package daemon

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jetstream-bridge/bridge/cursor"
	"github.com/jetstream-bridge/bridge/journal"
)

// storeCollector reports registrations by namespace and state, and the
// backlog behind their cursors, read from the store at most every
// storeScrapeEvery.
type storeCollector struct {
	store gaugeStore
	// head is the journal stream's last sequence.
	head func(context.Context) (uint64, error)

	regs    *prometheus.Desc
	backlog *prometheus.Desc

	mu     sync.Mutex
	at     time.Time
	counts map[[2]string]float64
	behind map[string]float64
}

const storeScrapeEvery = 10 * time.Second

// gaugeStore is what the gauges read: counts and sums the store keeps
// beside the rows, so a scrape of a million registrations reads a few keys
// rather than walking them all (a second of CPU, and every page of the
// file made resident, each time).
type gaugeStore interface {
	Counts(ctx context.Context) (map[string]map[cursor.State]int, error)
	Backlog(ctx context.Context, last uint64) (map[string]uint64, error)
}

func newStoreCollector(store gaugeStore, head func(context.Context) (uint64, error)) *storeCollector {
	return &storeCollector{
		store: store,
		head:  head,
		regs: prometheus.NewDesc("bridge_registrations", "Registrations by namespace and state.",
			[]string{"namespace", "state"}, nil),
		backlog: prometheus.NewDesc("bridge_backlog_sequences",
			"Stream sequences behind the cursors of active and parked registrations, per namespace: an upper bound on undelivered messages (sequences of other subjects count too).",
			[]string{"namespace"}, nil),
	}
}

func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.regs
	ch <- c.backlog
}

func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.at) > storeScrapeEvery || c.counts == nil {
		c.refresh()
	}
	for k, v := range c.counts {
		ch <- prometheus.MustNewConstMetric(c.regs, prometheus.GaugeValue, v, k[0], k[1])
	}
	for ns, v := range c.behind {
		ch <- prometheus.MustNewConstMetric(c.backlog, prometheus.GaugeValue, v, ns)
	}
}

func (c *storeCollector) refresh() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	counts := map[[2]string]float64{}
	behind := map[string]float64{"outbox": 0, "a2a": 0}
	for _, ns := range []string{"outbox", "a2a"} {
		for _, st := range []cursor.State{cursor.Active, cursor.Parked, cursor.Completed} {
			counts[[2]string{ns, string(st)}] = 0
		}
	}
	stored, err := c.store.Counts(ctx)
	if err != nil {
		return
	}
	for ns, states := range stored {
		for st, n := range states {
			counts[[2]string{ns, string(st)}] = float64(n)
		}
	}
	last, err := c.head(ctx)
	var owed map[string]uint64
	if err == nil {
		owed, err = c.store.Backlog(ctx, last)
	}
	if err != nil {
		// Without the stream's head the backlog is unknown: the last
		// known one stands rather than a zero that would read as none.
		behind = c.behind
	}
	for ns, n := range owed {
		behind[ns] = float64(n)
	}
	c.counts, c.behind, c.at = counts, behind, time.Now()
}

// registerJournalMetrics exports the reader's counters, so an operator can
// see that registrations sharing a filter share its reads.
func registerJournalMetrics(reg prometheus.Registerer, r *journal.Reader) {
	counter := func(name, help string, v func(journal.Stats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
			func() float64 { return float64(v(r.Stats())) })
	}
	reg.MustRegister(
		counter("bridge_journal_requests_total", "Requests sent to the NATS server to read the journal (pages, probes, stream info).",
			func(s journal.Stats) uint64 { return s.ServerRequests }),
		counter("bridge_journal_fetches_total", "Journal page reads that went to the server.",
			func(s journal.Stats) uint64 { return s.Fetches }),
		counter("bridge_journal_messages_fetched_total", "Journal messages received from the server by page reads.",
			func(s journal.Stats) uint64 { return s.MessagesFetched }),
		counter("bridge_journal_cache_hits_total", "Journal records served from memory instead of the server.",
			func(s journal.Stats) uint64 { return s.CacheHits }),
		counter("bridge_journal_tail_messages_total", "Messages the live tail of the journal received.",
			func(s journal.Stats) uint64 { return s.TailMessages }),
	)
}

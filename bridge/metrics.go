package bridge

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jetstream-bridge/bridge/webhook"
)

// Metrics are the worker's Prometheus series. A nil *Metrics records
// nothing, so tests and embedders need not register any.
type Metrics struct {
	deliveries *prometheus.CounterVec
	duration   *prometheus.HistogramVec
	latency    *prometheus.HistogramVec
	skippedMsg *prometheus.CounterVec
	records    *prometheus.CounterVec
	parked     *prometheus.CounterVec
	completed  *prometheus.CounterVec
	saturated  *prometheus.CounterVec
	unserved   *prometheus.GaugeVec
	inFlight   *prometheus.GaugeVec
	filtered   *prometheus.CounterVec
	filterErrs *prometheus.CounterVec
}

// NewMetrics creates the series and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	ns := []string{"namespace"}
	m := &Metrics{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bridge_deliveries_total",
			Help: "POSTs made, by namespace and outcome class (2xx, 3xx, 4xx, 5xx, transport, refused).",
		}, []string{"namespace", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "bridge_delivery_duration_seconds",
			Help:    "Duration of one POST, answered or not.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, ns),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "bridge_publish_to_ack_seconds",
			Help:    "Time from the stream storing a message to its receiver acknowledging it.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 20),
		}, ns),
		skippedMsg: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bridge_skipped_messages_total",
			Help: "Journal messages the stream removed (limits, purge) below a cursor before delivery.",
		}, ns),
		records: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bridge_records_total",
			Help: "Journal messages fully acknowledged by a registration's receiver.",
		}, ns),
		parked: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bridge_parked_total",
			Help: "Registrations parked: a permanent refusal, an unprojectable message, or retries exhausted.",
		}, ns),
		completed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bridge_completed_total",
			Help: "Registrations completed by an acknowledged terminal message.",
		}, ns),
		saturated: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bridge_sweep_saturated_total",
			Help: "Dispatches that found more due registrations than free delivery slots.",
		}, ns),
		unserved: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "bridge_unserved_due_registrations",
			Help: "Due registrations of the other namespace seen by this namespace's worker at its last dispatch.",
		}, ns),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "bridge_posts_in_flight",
			Help: "POSTs sent and not yet answered, by namespace; --max-in-flight bounds their sum.",
		}, ns),
		filtered: namespaceCounter("bridge_filtered_total",
			"Journal messages a registration's filter answered false for, passed over as if acknowledged."),
		filterErrs: namespaceCounter("bridge_filter_errors_total",
			"Journal messages a registration's filter failed on (a missing field, a type mismatch, the cost limit), passed over undelivered."),
	}
	reg.MustRegister(m.deliveries, m.duration, m.latency, m.skippedMsg, m.records,
		m.parked, m.completed, m.saturated, m.unserved, m.inFlight, m.filtered, m.filterErrs)
	return m
}

// namespaceCounter is a counter by namespace.
func namespaceCounter(name, help string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"namespace"})
}

// deliverySeries are one namespace's per-POST series, resolved once: a
// label lookup hashes its values, and doing that three times on every POST
// showed in the drain's profile.
type deliverySeries struct {
	m                 *Metrics
	ns                string
	byClass           map[string]prometheus.Counter
	duration, latency prometheus.Observer
	inFlight          prometheus.Gauge
}

// forNamespace resolves ns's delivery series; nil records nothing.
func (m *Metrics) forNamespace(ns string) *deliverySeries {
	if m == nil {
		return nil
	}
	s := &deliverySeries{
		m: m, ns: ns, byClass: make(map[string]prometheus.Counter),
		duration: m.duration.WithLabelValues(ns),
		latency:  m.latency.WithLabelValues(ns),
		inFlight: m.inFlight.WithLabelValues(ns),
	}
	for _, c := range []string{webhook.Class2xx, webhook.Class3xx, webhook.Class4xx,
		webhook.Class5xx, webhook.ClassTransport, webhook.ClassRefused} {
		s.byClass[c] = m.deliveries.WithLabelValues(ns, c)
	}
	return s
}

// posting counts a POST leaving (+1) or answered (-1).
func (s *deliverySeries) posting(d float64) {
	if s != nil {
		s.inFlight.Add(d)
	}
}

// delivery records one POST; stored is when the stream stored its message.
func (s *deliverySeries) delivery(out webhook.Outcome, stored, now time.Time) {
	if s == nil {
		return
	}
	c, ok := s.byClass[out.Class]
	if !ok {
		c = s.m.deliveries.WithLabelValues(s.ns, out.Class)
	}
	c.Inc()
	s.duration.Observe(out.Duration.Seconds())
	if out.OK() && !stored.IsZero() {
		s.latency.Observe(now.Sub(stored).Seconds())
	}
}

func (m *Metrics) skipped(ns string, n uint64) {
	if m == nil {
		return
	}
	m.skippedMsg.WithLabelValues(ns).Add(float64(n))
}

// screened counts messages filters passed over: filtered answered
// false, failed failed.
func (m *Metrics) screened(ns string, filtered, failed uint64) {
	if m == nil || filtered+failed == 0 {
		return
	}
	m.filtered.WithLabelValues(ns).Add(float64(filtered))
	m.filterErrs.WithLabelValues(ns).Add(float64(failed))
}

func (m *Metrics) progress(ns string, p progress) {
	if m == nil {
		return
	}
	m.records.WithLabelValues(ns).Add(float64(p.records))
	m.parked.WithLabelValues(ns).Add(float64(p.parked))
	m.completed.WithLabelValues(ns).Add(float64(p.completed))
}

func (m *Metrics) dispatch(ns string, unserved int, saturated bool) {
	if m == nil {
		return
	}
	m.unserved.WithLabelValues(ns).Set(float64(unserved))
	if saturated {
		m.saturated.WithLabelValues(ns).Inc()
	}
}

func (m *Metrics) sweep(ns string, r Report) {
	if m == nil {
		return
	}
	m.dispatch(ns, r.Unserved, r.Saturated)
	m.progress(ns, progress{records: r.Records, parked: r.Parked, completed: r.Completed})
}

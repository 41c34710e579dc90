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
	}
	reg.MustRegister(m.deliveries, m.duration, m.latency, m.skippedMsg, m.records,
		m.parked, m.completed, m.saturated, m.unserved)
	return m
}

func (m *Metrics) delivery(ns string, out webhook.Outcome, stored, now time.Time) {
	if m == nil {
		return
	}
	m.deliveries.WithLabelValues(ns, out.Class).Inc()
	m.duration.WithLabelValues(ns).Observe(out.Duration.Seconds())
	if out.OK() && !stored.IsZero() {
		m.latency.WithLabelValues(ns).Observe(now.Sub(stored).Seconds())
	}
}

func (m *Metrics) skipped(ns string, n uint64) {
	if m == nil {
		return
	}
	m.skippedMsg.WithLabelValues(ns).Add(float64(n))
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

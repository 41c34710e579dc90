package daemon

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// registry is the daemon's own metrics registry, served on /metrics, that
// keeps the bridge's collectors so a host's registry can get them too.
type registry struct {
	own  *prometheus.Registry
	kept []prometheus.Collector
}

// newRegistry starts the daemon's registry with the Go runtime's and the
// process's collectors, which a host registry has already.
func newRegistry() *registry {
	own := prometheus.NewRegistry()
	own.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return &registry{own: own}
}

// Register registers c and keeps it for share.
func (r *registry) Register(c prometheus.Collector) error {
	if err := r.own.Register(c); err != nil {
		return err
	}
	r.kept = append(r.kept, c)
	return nil
}

// MustRegister registers cs, panicking on a duplicate: the daemon's own
// collectors are distinct by construction.
func (r *registry) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// Unregister removes c.
func (r *registry) Unregister(c prometheus.Collector) bool { return r.own.Unregister(c) }

// share registers every kept collector with host, as one, and returns what
// takes them out again. A collision (a second daemon in the same
// registry) is an error naming Registerer, not a panic.
func (r *registry) share(host prometheus.Registerer) (func(), error) {
	set := collectorSet(r.kept)
	if err := host.Register(set); err != nil {
		return nil, configErr("Registerer", "%s: %v (a second daemon in one registry needs prometheus.WrapRegistererWith)", err)
	}
	return func() { host.Unregister(set) }, nil
}

// collectorSet is several collectors as one.
type collectorSet []prometheus.Collector

func (s collectorSet) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range s {
		c.Describe(ch)
	}
}

func (s collectorSet) Collect(ch chan<- prometheus.Metric) {
	for _, c := range s {
		c.Collect(ch)
	}
}

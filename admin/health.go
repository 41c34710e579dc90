package admin

import (
	"net/http"
)

type statusView struct {
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
}

// healthz answers while the process serves HTTP at all; it checks nothing
// else, so a supervisor restarts only a process that is truly stuck.
func (s *server) healthz(w http.ResponseWriter, _ *http.Request) error {
	writeJSON(w, http.StatusOK, statusView{Status: "ok"})
	return nil
}

// readyz says whether the bridge can do its work now (store open, NATS
// connected), with the reason when it cannot.
func (s *server) readyz(w http.ResponseWriter, r *http.Request) error {
	if s.ready != nil {
		if err := s.ready(r.Context()); err != nil {
			writeJSON(w, http.StatusServiceUnavailable, statusView{Status: "unavailable", Reason: err.Error()})
			return nil
		}
	}
	writeJSON(w, http.StatusOK, statusView{Status: "ok"})
	return nil
}

// serveMetrics serves the Prometheus handler, which needs no token: the
// metrics carry counts and ids, never configuration.
func (s *server) serveMetrics(w http.ResponseWriter, r *http.Request) error {
	if s.metrics == nil {
		return errorf(http.StatusNotFound, codeNotFound, "metrics are not served by this bridge")
	}
	s.metrics.ServeHTTP(w, r)
	return nil
}

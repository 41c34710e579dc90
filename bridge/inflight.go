package bridge

// InFlight is how many POSTs of registration id this worker has in flight.
func (w *Worker) InFlight(id string) int { return 0 }

// InFlight is how many POSTs of registration id this bridge has in flight
// (CONTRACT §12's inFlight), over every namespace's worker.
func (d *Daemon) InFlight(id string) int {
	n := 0
	for _, w := range d.workers {
		n += w.InFlight(id)
	}
	return n
}

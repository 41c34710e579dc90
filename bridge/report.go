package bridge

// Report is the outcome of one bounded sweep.
type Report struct {
	Registrations int `json:"registrations"`
	Records       int `json:"records"`
	Deliveries    int `json:"deliveries"`
	Retries       int `json:"retries"`
	Completed     int `json:"completed"`
	// Parked counts registrations this sweep stopped delivering to: a
	// permanent refusal, a message that can never be projected, or a
	// receiver that stayed down past the retry ceiling. Counted apart from
	// Completed because both leave the due order and only one delivered.
	Parked int `json:"parked"`
	// Skipped counts journal messages the stream removed (limits, purge)
	// below a cursor before they were delivered.
	Skipped int `json:"skipped"`
	// Unserved counts due rows of the other namespace: visibility, not
	// alarm, since the other worker's rows are legitimately due between its
	// own sweeps.
	Unserved int `json:"unserved"`
	// Saturated means more rows were due than the sweep's limit.
	Saturated bool `json:"saturated"`
}

// NeedsAttention reports whether this sweep found something a person should
// see. A single retry is the ordinary shape of both a rebooting receiver
// and a dead one; only parking and a backlog larger than a sweep tell them
// apart from a quiet plane.
func (r Report) NeedsAttention() bool { return r.Saturated || r.Parked > 0 }

func (r *Report) add(p progress) {
	r.Records += p.records
	r.Deliveries += p.deliveries
	r.Retries += p.retries
	r.Completed += p.completed
	r.Parked += p.parked
	r.Skipped += p.skipped
}

// progress is what one registration's turn achieved; turns run
// concurrently and are summed afterwards, so none shares a mutable Report.
type progress struct {
	records, deliveries, retries, completed, parked, skipped int
	// yielded says the turn ended early to give its slot away (see
	// Worker.yields); it is no count.
	yielded bool
}

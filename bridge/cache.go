package bridge

import (
	"github.com/jetstream-bridge/bridge/internal/gencache"
	"github.com/jetstream-bridge/bridge/projection"
)

// projectionCacheSize bounds how many projected records a worker keeps:
// enough for every registration on a shared filter to find the page the
// first one projected.
const projectionCacheSize = 4096

// projectionCache remembers what recent records were projected as, per
// target shape, so a thousand registrations on one filter project each
// message once instead of a thousand times.
//
// Results are shared between turns: the sender copies a message's header
// map before adding its own, and nothing writes to a body or a header's
// values. Failures are not cached: a record that cannot be projected parks
// the registration that reads it, which then stops reading.
type projectionCache = gencache.Cache[cacheKey, projection.Result]

// cacheKey is everything a projection result depends on: the record and
// the target's wire choices. The stream's timestamp is part of the
// record's identity, because a stream deleted and re-created reuses its
// sequences for other messages.
type cacheKey struct {
	stream, taskID, format, dataContentType string
	seq                                     uint64
	stored                                  int64
}

// project returns what rec is sent as for target, projecting it once per
// record and target shape.
func (w *Worker) project(target projection.Target, rec *projection.Record) (projection.Result, error) {
	k := cacheKey{
		stream: rec.Stream, seq: rec.Seq, stored: rec.Time.UnixNano(),
		taskID: target.TaskID, format: target.Format, dataContentType: target.DataContentType,
	}
	if r, ok := w.cache.Get(k); ok {
		return r, nil
	}
	r, err := w.proj.Project(target, rec)
	if err == nil {
		w.cache.Put(k, r)
	}
	return r, err
}

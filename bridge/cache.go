package bridge

import (
	"sync"

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
// Results are shared between turns: the sender clones a message's
// headers before adding its own, and nothing writes to a body.
// Failures are not cached: a record that cannot be projected parks the
// registration that reads it, which then stops reading.
type projectionCache struct {
	mu      sync.Mutex
	limit   int
	current map[cacheKey]projection.Result
	older   map[cacheKey]projection.Result
}

// cacheKey is everything a projection result depends on: the record and
// the target's wire choices. The stream's timestamp is part of the
// record's identity, because a stream deleted and re-created reuses its
// sequences for other messages.
type cacheKey struct {
	stream, taskID, format, dataContentType string
	seq                                     uint64
	stored                                  int64
}

func newProjectionCache(limit int) *projectionCache {
	return &projectionCache{limit: limit, current: make(map[cacheKey]projection.Result)}
}

func (c *projectionCache) get(k cacheKey) (projection.Result, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r, ok := c.current[k]; ok {
		return r, true
	}
	r, ok := c.older[k]
	return r, ok
}

// put keeps r; when the current generation is full it becomes the older
// one and the oldest generation is dropped, which bounds the cache to two
// generations without per-entry bookkeeping.
func (c *projectionCache) put(k cacheKey, r projection.Result) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.current) >= c.limit {
		c.older, c.current = c.current, make(map[cacheKey]projection.Result, c.limit)
	}
	c.current[k] = r
}

// project returns what rec is sent as for target, projecting it once per
// record and target shape.
func (w *Worker) project(target projection.Target, rec *projection.Record) (projection.Result, error) {
	k := cacheKey{
		stream: rec.Stream, seq: rec.Seq, stored: rec.Time.UnixNano(),
		taskID: target.TaskID, format: target.Format, dataContentType: target.DataContentType,
	}
	if r, ok := w.cache.get(k); ok {
		return r, nil
	}
	r, err := w.proj.Project(target, rec)
	if err == nil {
		w.cache.put(k, r)
	}
	return r, err
}

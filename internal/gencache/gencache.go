// Package gencache is a map bounded without per-entry bookkeeping, for
// values that are cheap to recompute but costly to recompute on every
// message: when the current generation is full it becomes the old one and
// the old one is dropped, so at most two generations are held.
package gencache

import "sync"

// Cache holds up to two generations of limit entries. It is safe for
// concurrent use. Values are handed out as stored: a caller that may
// change one must store or return a copy.
type Cache[K comparable, V any] struct {
	// mu is read-locked for a hit in the current generation, the common
	// case: a keyed registration's POSTs look their messages up from many
	// goroutines at once, and an exclusive lock here was three quarters
	// of the drain's lock waits (BenchmarkDrainKeyed's mutex profile).
	mu             sync.RWMutex
	limit          int
	current, older map[K]V
}

// New returns a cache whose generations hold limit entries each (at least
// one).
func New[K comparable, V any](limit int) *Cache[K, V] {
	limit = max(limit, 1)
	return &Cache[K, V]{limit: limit, current: make(map[K]V)}
}

// Get returns the value stored under k. A value found in the old
// generation moves to the current one, so what is in use stays.
func (c *Cache[K, V]) Get(k K) (V, bool) {
	c.mu.RLock()
	v, ok := c.current[k]
	c.mu.RUnlock()
	if ok {
		return v, true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.current[k]; ok {
		return v, true
	}
	v, ok = c.older[k]
	if ok {
		c.putLocked(k, v)
	}
	return v, ok
}

// Put stores v under k.
func (c *Cache[K, V]) Put(k K, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.putLocked(k, v)
}

func (c *Cache[K, V]) putLocked(k K, v V) {
	if _, ok := c.current[k]; !ok && len(c.current) >= c.limit {
		c.older, c.current = c.current, make(map[K]V, c.limit)
	}
	c.current[k] = v
}

// Len reports how many entries are held, in both generations.
func (c *Cache[K, V]) Len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.current) + len(c.older)
}

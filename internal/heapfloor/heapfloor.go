// Package heapfloor keeps a process whose live heap is small from running
// the garbage collector every few megabytes it allocates.
//
// Go starts a collection when the heap has grown GOGC percent past what the
// last one found live. A bridge tailing a stream holds about 12 MiB live and
// allocates about 10 KiB per delivery, so at 1,000 messages a second it
// collected once a second, and each mark phase (5–8 ms on two cores)
// delayed the deliveries that fell into it: they were most of the slowest
// 1 %. A floor lets the heap grow to a fixed size before a collection while
// the heap is small; once the live heap is large enough that GOGC alone
// reaches the floor, GOGC applies unchanged: a large heap is collected as
// before, and the floor never adds more than its own size.
//
// The package only sets the collector's percentage (debug.SetGCPercent); a
// memory limit (GOMEMLIMIT) still caps the heap below the floor.
package heapfloor

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// heapMinimum is the Go runtime's smallest heap goal at GOGC=100; the
// runtime scales it with GOGC, so a percentage set for a tiny live heap
// would otherwise put the first collections far above the floor (a 1 MiB
// heap asking for 64 MiB would get 6,300 %, and a goal of 252 MiB).
const heapMinimum = 4 << 20

// liveHeap is the runtime metric of the heap the last collection marked.
const liveHeap = "/gc/heap/live:bytes"

// keeper re-tunes the collector after every collection.
type keeper struct {
	floor uint64
	base  int // the percentage Keep found, restored by stop

	mu      sync.Mutex
	current int
	stopped bool
	sample  [1]metrics.Sample
}

// sentinel is allocated only to be collected: its cleanup runs after each
// collection. It holds a pointer so it is never a tiny allocation, which
// could share its memory with something still live.
type sentinel struct {
	_ *keeper
	_ [2]uint64
}

// Keep makes each collection start when the heap reaches floor bytes or
// what the current GOGC asks for, whichever is more, re-tuning after every
// collection. It does nothing when floor is 0 or the collector is off. The
// returned function restores the percentage Keep found; it is safe to call
// more than once. The percentage is the process's: keep one floor at a time.
func Keep(floor uint64) (stop func()) {
	base := debug.SetGCPercent(100)
	debug.SetGCPercent(base)
	if floor == 0 || base < 0 {
		return func() {}
	}
	k := &keeper{floor: floor, base: base, current: base}
	k.sample[0].Name = liveHeap
	k.adjust()
	k.arm()
	return k.stop
}

// arm attaches the next re-tuning to an object the next collection frees.
func (k *keeper) arm() {
	runtime.AddCleanup(&sentinel{}, (*keeper).collected, k)
}

// collected runs after a collection: re-tune, then wait for the next one.
func (k *keeper) collected() {
	if k.adjust() {
		k.arm()
	}
}

// adjust sets the percentage whose goal is max(floor, live × (1 +
// base/100)). It reports false once stop was called.
func (k *keeper) adjust() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.stopped {
		return false
	}
	metrics.Read(k.sample[:])
	var live uint64
	if k.sample[0].Value.Kind() == metrics.KindUint64 {
		live = k.sample[0].Value.Uint64()
	}
	p := percentFor(k.floor, live, k.base)
	if p != k.current {
		debug.SetGCPercent(p)
		k.current = p
	}
	return true
}

// percentFor is the GOGC whose heap goal for live bytes marked is the
// floor, or base when base reaches the floor already. The goal is the
// larger of live × (1 + GOGC/100) and heapMinimum × GOGC/100, so the
// percentage is bounded by both.
func percentFor(floor, live uint64, base int) int {
	if live >= floor {
		return base
	}
	p := float64(floor) / heapMinimum
	if live > 0 {
		p = min(p, float64(floor-live)/float64(live))
	}
	// The runtime keeps the percentage in an int32; past it GOGC would
	// read as negative, which turns the collector off.
	return max(base, int(min(p*100, math.MaxInt32)))
}

func (k *keeper) stop() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.stopped {
		return
	}
	k.stopped = true
	debug.SetGCPercent(k.base)
}

package heapfloor

import (
	"math"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"
)

const mib = 1 << 20

func TestPercentFor(t *testing.T) {
	for _, c := range []struct {
		floor, live uint64
		base, want  int
	}{
		{floor: 64 * mib, live: 16 * mib, base: 100, want: 300},
		{floor: 64 * mib, live: 32 * mib, base: 100, want: 100}, // GOGC reaches the floor
		{floor: 64 * mib, live: 48 * mib, base: 100, want: 100},
		{floor: 64 * mib, live: 20 * mib, base: 300, want: 300}, // a higher GOGC is kept
		{floor: 64 * mib, live: 1 * mib, base: 100, want: 1600}, // the runtime's minimum goal binds
		{floor: 64 * mib, live: 0, base: 100, want: 1600},
		{floor: 64 * mib, live: 80 * mib, base: 100, want: 100},
		{floor: 1 * mib, live: 0, base: 100, want: 100},
		{floor: math.MaxUint64 / 100, live: 1, base: 100, want: math.MaxInt32},
		{floor: math.MaxUint64, live: mib, base: 100, want: math.MaxInt32},
		{floor: 64 * mib, live: 64 * mib, base: 100, want: 100},
	} {
		if got := percentFor(c.floor, c.live, c.base); got != c.want {
			t.Errorf("percentFor(floor %d, live %d, base %d) = %d, want %d", c.floor, c.live, c.base, got, c.want)
		}
	}
}

func readMetric(t *testing.T, name string) uint64 {
	t.Helper()
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		t.Fatalf("runtime metric %s unavailable", name)
	}
	return s[0].Value.Uint64()
}

func gogc(t *testing.T) int { return int(readMetric(t, "/gc/gogc:percent")) }

// goal is the heap size at which the next collection is due.
func goal(t *testing.T) uint64 { return readMetric(t, "/gc/heap/goal:bytes") }

// settled waits for the re-tuning that follows a collection, which runs
// on the runtime's cleanup goroutine.
func settled(t *testing.T, want func(int) bool) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		p := gogc(t)
		if want(p) {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("GOGC stayed %d", p)
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}

// collections counts the collections while n bytes of garbage are made.
func collections(n int) uint32 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	var keep []byte
	for range n / (64 << 10) {
		keep = make([]byte, 64<<10)
	}
	runtime.KeepAlive(keep)
	runtime.ReadMemStats(&after)
	return after.NumGC - before.NumGC
}

func TestKeepDefersCollectionsUntilTheFloor(t *testing.T) {
	const floor = 128 * mib
	base := gogc(t)
	stop := Keep(floor)
	raised := settled(t, func(p int) bool { return p > base })
	// The goal is the floor, not above it: the runtime's minimum goal
	// grows with GOGC too.
	if g := goal(t); g < floor || g > floor+floor/4 {
		t.Errorf("heap goal %d MiB under a %d MiB floor", g/mib, floor/mib)
	}
	with := collections(64 * mib)
	stop()
	stop() // twice is fine
	if p := gogc(t); p != base {
		t.Errorf("after stop GOGC is %d, want %d restored", p, base)
	}
	without := collections(64 * mib)
	t.Logf("GOGC %d → %d under the floor; collections for 64 MiB of garbage: %d with the floor, %d without", base, raised, with, without)
	if with > 1 || without < 4 {
		t.Errorf("collections for 64 MiB of garbage: %d under a 128 MiB floor (want at most 1), %d without it (want several)", with, without)
	}
	// A collection after stop must not re-tune.
	runtime.GC()
	time.Sleep(50 * time.Millisecond)
	if p := gogc(t); p != base {
		t.Errorf("a collection after stop set GOGC to %d, want %d", p, base)
	}
}

func TestKeepLeavesALargeHeapToGOGC(t *testing.T) {
	base := gogc(t)
	held := make([]byte, 48*mib)
	stop := Keep(32 * mib)
	defer stop()
	// 48 MiB live: GOGC alone puts the goal past a 32 MiB floor.
	settled(t, func(p int) bool { return p == base })
	runtime.KeepAlive(held)
	// With the heap let go, the floor applies again.
	settled(t, func(p int) bool { return p > base })
}

func TestKeepWithoutAFloorChangesNothing(t *testing.T) {
	base := gogc(t)
	stop := Keep(0)
	runtime.GC()
	time.Sleep(50 * time.Millisecond)
	if p := gogc(t); p != base {
		t.Errorf("Keep(0) set GOGC to %d, want %d", p, base)
	}
	stop()
}

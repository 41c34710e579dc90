package gencache

import (
	"sync"
	"testing"
)

func TestCacheHoldsAtMostTwoGenerations(t *testing.T) {
	c := New[int, string](100)
	for i := range 1000 {
		c.Put(i, "v")
		if n := c.Len(); n > 200 {
			t.Fatalf("after %d puts the cache holds %d entries, more than two generations of 100", i+1, n)
		}
	}
	if _, ok := c.Get(999); !ok {
		t.Error("the newest entry is gone")
	}
	if _, ok := c.Get(0); ok {
		t.Error("the oldest entry is still held after ten generations")
	}
}

func TestCacheKeepsWhatIsInUse(t *testing.T) {
	c := New[int, int](10)
	c.Put(-1, 42)
	for i := range 100 {
		c.Put(i, i)
		if v, ok := c.Get(-1); !ok || v != 42 {
			t.Fatalf("an entry read after every put was dropped after %d puts (got %d, %v)", i+1, v, ok)
		}
	}
}

func TestCacheReplacesAValue(t *testing.T) {
	c := New[string, int](2)
	c.Put("a", 1)
	c.Put("a", 2)
	c.Put("b", 3)
	if v, _ := c.Get("a"); v != 2 {
		t.Errorf("Get(a) = %d after it was replaced by 2", v)
	}
	if n := c.Len(); n != 2 {
		t.Errorf("Len = %d, want 2: replacing a key must not start a generation", n)
	}
}

func TestCacheIsSafeForConcurrentUse(t *testing.T) {
	c := New[int, int](16)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 1000 {
				c.Put(g*1000+i, i)
				c.Get(i)
			}
		})
	}
	wg.Wait()
	if c.Len() > 32 {
		t.Errorf("Len = %d after concurrent use, want at most 32", c.Len())
	}
}

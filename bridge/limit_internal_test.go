package bridge

import (
	"testing"

	"github.com/jetstream-bridge/bridge/cursor"
)

// A registration keeps its bucket while its limit stays, gets a new one
// when an update changes it, and none without a limit.
func TestLimitsFollowTheRegistration(t *testing.T) {
	l := newLimits()
	reg := &cursor.Registration{Config: cursor.Config{ID: "r", RateLimit: &cursor.RateLimit{PerSecond: 5}}}
	first := l.of(reg)
	if first == nil || first.lim.Burst() != 1 || first.lim.Limit() != 5 {
		t.Fatalf("bucket %+v, want 5/s with the default burst 1", first)
	}
	same := *reg
	same.RateLimit = &cursor.RateLimit{PerSecond: 5}
	if l.of(&same) != first {
		t.Error("an unchanged limit built a new bucket: a replace would reset the registration's pace")
	}
	changed := *reg
	changed.RateLimit = &cursor.RateLimit{PerSecond: 50, Burst: 10}
	if b := l.of(&changed); b == first || b.lim.Limit() != 50 || b.lim.Burst() != 10 {
		t.Errorf("a changed limit kept the old bucket or built %+v", b)
	}
	none := *reg
	none.RateLimit = nil
	if l.of(&none) != nil {
		t.Error("a registration without a limit got a bucket")
	}
}

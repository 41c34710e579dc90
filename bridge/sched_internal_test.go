package bridge

import "testing"

// poked reports whether the dispatcher was poked, and takes the poke.
func poked(s *scheduler) bool {
	select {
	case <-s.kick:
		return true
	default:
		return false
	}
}

// A message that wakes a registration during its turn is served by the
// same goroutine right after, with no poke of the dispatcher.
func TestSchedulerServesAWakeDuringATurnAgain(t *testing.T) {
	s := newScheduler(2)
	if !s.claimOrWake("a", 2) {
		t.Fatal("an idle registration with a free slot was not claimed")
	}
	if s.claimOrWake("a", 2) {
		t.Fatal("a registration in a turn was claimed twice")
	}
	if !s.again("a", 2) {
		t.Fatal("a registration woken during its turn was not served again")
	}
	if s.again("a", 2) {
		t.Fatal("a registration nothing woke was served again")
	}
	if poked(s) {
		t.Error("the dispatcher was poked with nothing for it to do")
	}
	if s.busy() != 0 || !s.claimOrWake("a", 2) {
		t.Error("the claim was not released after the last turn")
	}
}

// A registration does not keep its slot while others wait for one.
func TestSchedulerAgainYieldsTheSlot(t *testing.T) {
	t.Run("another woken registration", func(t *testing.T) {
		s := newScheduler(1)
		s.claimOrWake("a", 1)
		if s.claimOrWake("b", 1) {
			t.Fatal("claimed past the limit")
		}
		s.claimOrWake("a", 1)
		if s.again("a", 1) {
			t.Fatal("a kept the only slot while b waited")
		}
		if !poked(s) {
			t.Error("the dispatcher was not poked for b")
		}
		if got := s.wokenIDs(2); len(got) != 2 {
			t.Errorf("woken %v, want a and b", got)
		}
	})
	t.Run("due rows left waiting", func(t *testing.T) {
		s := newScheduler(4)
		s.claimOrWake("a", 4)
		s.claimOrWake("a", 4)
		s.setWaiting(true)
		if s.again("a", 4) || !poked(s) {
			t.Error("a kept its slot while the dispatcher had rows waiting")
		}
	})
	t.Run("a failed turn", func(t *testing.T) {
		s := newScheduler(4)
		s.claimOrWake("a", 4)
		s.later("a")
		s.claimOrWake("a", 4)
		if s.again("a", 4) {
			t.Error("a turn that failed on the bridge's side was retried at once")
		}
	})
}

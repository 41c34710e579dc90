package bridgetest_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every Env stops everything it started: the test binary ends with no
// goroutine of a server, a bridge or a receiver left.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

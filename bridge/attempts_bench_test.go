package bridge_test

import (
	"testing"
	"time"

	"github.com/jetstream-bridge/bridge/bridge"
)

// BenchmarkDrainAttemptLog is BenchmarkDrain with the attempt log off and
// on: what recording every POST costs the delivery path.
func BenchmarkDrainAttemptLog(b *testing.B) {
	b.Run("off", func(b *testing.B) { benchDrain(b, newEnv(b)) })
	b.Run("on", func(b *testing.B) {
		e := newEnv(b)
		benchDrain(b, e, bridge.WithRecorder(e.attemptLog(2*time.Second)))
	})
}

package bridge

import (
	"crypto/sha256"
	"encoding/binary"
	"time"
)

// MaxRetryAfter bounds a receiver's own Retry-After advice. Advice is
// honoured because a receiver naming its recovery knows better than a fixed
// schedule, but it comes from the one party with an interest in never being
// called again: an hour covers any real rate limit, and a hostile value
// costs one wasted hour rather than the life of the deployment.
const MaxRetryAfter = time.Hour

// nextAttemptAt is when a registration that just failed is tried again.
//
// attempts counts the failures before this one. Without advice the window
// is 1<<min(attempts, 8) seconds and the delay is drawn from its upper half
// by a hash of the registration and the attempt, never below one second.
// The spread is derived, not random: every registration that failed against
// one receiver failed in the same instant, and an undithered schedule would
// hit the recovering receiver with all of them at once; a random one would
// make every schedule untestable.
func nextAttemptAt(id string, at time.Time, attempts uint32, retryAfter time.Duration) time.Time {
	if retryAfter > 0 {
		return at.Add(min(max(retryAfter, time.Second), MaxRetryAfter))
	}
	window := uint64(1) << min(attempts, 8)
	half := window / 2
	delay := max(half+spread(id, attempts)%(half+1), 1)
	return at.Add(time.Duration(delay) * time.Second)
}

// spread is a registration's fixed place in its retry window: the first
// eight bytes of SHA-256 over the id, a separator and the attempt count.
// SHA-256 rather than a runtime hash so a schedule never moves with the
// toolchain.
func spread(id string, attempts uint32) uint64 {
	h := sha256.New()
	h.Write([]byte(id))
	h.Write([]byte{0x1f})
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], attempts)
	h.Write(n[:])
	return binary.BigEndian.Uint64(h.Sum(nil)[:8])
}

package webhook

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxRetryAfterSeconds keeps a huge delta-seconds from overflowing a
// Duration; the caller clamps far below it anyway.
const maxRetryAfterSeconds = math.MaxInt64 / int64(time.Second)

// ParseRetryAfter reads a Retry-After value: delta-seconds ("120") or an
// HTTP-date ("Wed, 21 Oct 2015 07:28:00 GMT", and the obsolete RFC 850 and
// asctime forms), the date counted from now. A date in the past gives 0.
// The duration is returned raw, unclamped; ok is false when v is neither
// form (a negative or fractional number is neither).
func ParseRetryAfter(v string, now time.Time) (d time.Duration, ok bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if isDigits(v) {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n > maxRetryAfterSeconds {
			n = maxRetryAfterSeconds // only overflow fails for digits
		}
		return time.Duration(n) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(t.Sub(now), 0), true
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

package bridge

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/jetstream-bridge/bridge/cursor"
	"github.com/jetstream-bridge/bridge/internal/gencache"
	"github.com/jetstream-bridge/bridge/webhook"
)

// limiterCacheSize bounds the token buckets held: two generations of this
// many rate-limited registrations. A registration deleted is forgotten
// once it ages out; one still delivering that ages out gets a fresh
// bucket, which lets at most one burst through early.
const limiterCacheSize = 4096

// paceInline is the longest wait for a rate limit slept inside a turn.
// A longer one ends the turn before its POST, so a slowly limited
// registration does not hold a turn's slot, which other registrations
// need, while it waits: a timer wakes it when its token is there.
const paceInline = turnQuantum

// limits holds one token bucket per rate-limited registration, shared by
// its turns and resends, so every POST of it counts against one limit.
type limits struct {
	cache *gencache.Cache[string, *limiter]
}

// limiter is one registration's bucket, for the RateLimit it was built
// from: a changed limit builds a new one.
type limiter struct {
	cfg cursor.RateLimit
	lim *rate.Limiter
	// armed is set while a timer is set to wake the registration when its
	// next token is there, so turns ending early set one timer, not one
	// each.
	armed atomic.Bool
}

func newLimits() *limits {
	return &limits{cache: gencache.New[string, *limiter](limiterCacheSize)}
}

// of returns reg's bucket, or nil when reg is not rate-limited.
func (l *limits) of(reg *cursor.Registration) *limiter {
	rl := reg.RateLimit
	if rl == nil || rl.PerSecond <= 0 {
		return nil
	}
	if b, ok := l.cache.Get(reg.ID); ok && b.cfg == *rl {
		return b
	}
	b := &limiter{cfg: *rl, lim: rate.NewLimiter(rate.Limit(rl.PerSecond), max(rl.Burst, 1))}
	l.cache.Put(reg.ID, b)
	return b
}

// delay is how long a POST of reg made now would wait for a token.
func (b *limiter) delay(now time.Time) time.Duration {
	missing := 1 - b.lim.TokensAt(now)
	if missing <= 0 {
		return 0
	}
	return time.Duration(missing / float64(b.lim.Limit()) * float64(time.Second))
}

// paced reports that reg's next POST would wait longer than paceInline
// for its rate limit. The turn then ends before it, its cursor where the
// last 2xx left it and no attempt counted, and the registration is woken
// when its token is there.
func (w *Worker) paced(reg *cursor.Registration) bool {
	b := w.limits.of(reg)
	if b == nil {
		return false
	}
	d := b.delay(time.Now())
	if d <= paceInline {
		return false
	}
	if b.armed.CompareAndSwap(false, true) {
		id := reg.ID
		time.AfterFunc(d, func() {
			b.armed.Store(false)
			w.Wake(id)
		})
	}
	return true
}

// keepDue makes a paced registration that a message woke from idle due
// in the store, its cursor unchanged: the timer that wakes it lives in
// memory only, and a bridge stopped before it fires would otherwise leave
// the message waiting for another one to wake the registration.
func (w *Worker) keepDue(ctx context.Context, reg *cursor.Registration) error {
	if !reg.NextAttemptAt.IsZero() {
		return nil
	}
	return w.advance(ctx, reg.ID, cursor.Progress{NextSeq: reg.NextSeq})
}

// waitLimit waits for reg's rate limit before a POST. The wait is not the
// POST's: its timeout starts after it, and a registration waiting is not
// failing. A POST that waited is stamped when it leaves, so its
// webhook-timestamp and signatures are not as old as the wait. false,
// with the outcome to report, when ctx ended first.
func (w *Worker) waitLimit(ctx context.Context, reg *cursor.Registration, req *webhook.Request) (webhook.Outcome, bool) {
	b := w.limits.of(reg)
	if b == nil {
		return webhook.Outcome{}, true
	}
	if b.lim.Allow() {
		return webhook.Outcome{}, true
	}
	if err := b.lim.Wait(ctx); err != nil {
		return webhook.Outcome{Class: webhook.ClassTransport, Err: fmt.Errorf("waiting for the rate limit: %w", err)}, false
	}
	req.At = w.now()
	req.Secrets = secrets(reg.Config, req.At)
	return webhook.Outcome{}, true
}

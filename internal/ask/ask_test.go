package ask

import (
	"context"
	"errors"
	"testing"
	"time"
)

// An attempt that gets no answer within wait is made again; one that
// fails otherwise, or the last one, is returned as it is.
func TestAgain(t *testing.T) {
	calls := 0
	v, err := Again(context.Background(), 5, 10*time.Millisecond, func(err error) bool { return errors.Is(err, context.DeadlineExceeded) },
		func(ctx context.Context) (int, error) {
			calls++
			if calls < 3 {
				<-ctx.Done() // the request lost in an election
				return 0, ctx.Err()
			}
			return 42, nil
		})
	if v != 42 || err != nil || calls != 3 {
		t.Fatalf("Again: %d, %v after %d calls; want 42 from the third", v, err, calls)
	}
	refused := errors.New("refused")
	calls = 0
	if _, err := Again(context.Background(), 5, time.Second, func(error) bool { return false },
		func(context.Context) (int, error) { calls++; return 0, refused }); !errors.Is(err, refused) || calls != 1 {
		t.Fatalf("Again: %v after %d calls; want the refusal at once", err, calls)
	}
	calls = 0
	if _, err := Again(context.Background(), 3, time.Millisecond, func(error) bool { return true },
		func(ctx context.Context) (int, error) { calls++; <-ctx.Done(); return 0, ctx.Err() }); err == nil || calls != 3 {
		t.Fatalf("Again: %v after %d calls; want the third attempt's error", err, calls)
	}
}

package admin

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/jetstream-bridge/bridge/cursor"
)

// electingStore is a store whose reads time out, as a replicated store's
// do while its leader is elected.
type electingStore struct{ cursor.Store }

func (electingStore) Get(context.Context, string) (cursor.Registration, error) {
	return cursor.Registration{}, fmt.Errorf("kvstore: read %q: %w: nats: timeout", "r1", cursor.ErrUnavailable)
}

// A read the store could not answer in time is 503 with the reason, not
// 500: the caller should try again.
func TestAnUnavailableStoreAnswers503(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.Store = electingStore{o.Store} })
	res := h.do(http.MethodGet, "/v1/registrations/r1", "")
	if res.status != http.StatusServiceUnavailable || !strings.Contains(string(res.body), `"code":"unavailable"`) ||
		!strings.Contains(string(res.body), "nats: timeout") {
		t.Fatalf("GET during an election: %d %s, want 503 unavailable naming the timeout", res.status, res.body)
	}
}

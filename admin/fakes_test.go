package admin

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/jetstream-bridge/bridge/projection"
)

// fakeJournal is a stream holding sequences first..last, one per second
// from base.
type fakeJournal struct {
	first, last uint64
	base        time.Time
}

func (j *fakeJournal) Bounds(context.Context) (uint64, uint64, error) { return j.first, j.last, nil }

func (j *fakeJournal) SeqAtTime(_ context.Context, t time.Time) (uint64, error) {
	if !t.After(j.base) {
		return j.first, nil
	}
	seq := j.first + uint64((t.Sub(j.base)+time.Second-1)/time.Second)
	return min(seq, j.last+1), nil
}

// fakeGuard refuses plain http for a2a and any host named refused.example,
// in the words the real guard uses.
type fakeGuard struct{}

func (fakeGuard) CheckURL(_ context.Context, ns projection.Namespace, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("url must be an absolute http or https URL")
	}
	if ns == projection.A2A && u.Scheme != "https" {
		return fmt.Errorf("url must use https for a2a registrations")
	}
	if u.Hostname() == "refused.example" {
		return fmt.Errorf("url host %q is not granted", u.Hostname())
	}
	return nil
}

// recordingWaker remembers every id it was asked to wake.
type recordingWaker struct {
	mu  sync.Mutex
	ids []string
}

func (w *recordingWaker) Wake(ids ...string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ids = append(w.ids, ids...)
}

func (w *recordingWaker) woken() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.ids)
}

package admin

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetstream-bridge/bridge/cursor"
)

// benchAPI is the admin handler on a real bbolt store, called without a
// network in between, so the figures are the API's own cost.
func benchAPI(b *testing.B) (http.Handler, *cursor.DB) {
	b.Helper()
	store, err := cursor.Open(filepath.Join(b.TempDir(), "bridge.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = store.Close() })
	return New(Options{
		Store:   store,
		Journal: &fakeJournal{first: 1, last: 1000, base: time.Now()},
		Guard:   fakeGuard{},
		Token:   testToken,
		Logger:  slog.New(slog.DiscardHandler),
	}), store
}

func serveBench(b *testing.B, h http.Handler, method, path, body string, want int) {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+testToken)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != want {
		b.Fatalf("%s %s: %d %s", method, path, rec.Code, rec.Body)
	}
	_, _ = io.Copy(io.Discard, rec.Body)
}

func BenchmarkCreate(b *testing.B) {
	h, _ := benchAPI(b)
	i := 0
	for b.Loop() {
		i++
		serveBench(b, h, "POST", "/v1/registrations",
			fmt.Sprintf(`{"id":"r%d","namespace":"outbox","subject":"journal.orders.>","url":"https://a.example/","secret":%q}`, i, goodSecret),
			http.StatusCreated)
	}
}

// BenchmarkCreateParallel16: 16 clients creating registrations at once,
// each answered only once its create is committed and fsynced. What it
// measures is how many creates share one commit.
func BenchmarkCreateParallel16(b *testing.B) {
	h, _ := benchAPI(b)
	runClients(b, 16, func(i int64) error {
		body := fmt.Sprintf(`{"id":"r%d","namespace":"outbox","subject":"journal.orders.>","url":"https://a.example/"}`, i)
		req := httptest.NewRequest("POST", "/v1/registrations", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+testToken)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusCreated {
			return fmt.Errorf("create r%d: %d %s", i, rec.Code, rec.Body)
		}
		return nil
	})
}

// runClients calls op b.N times in all from n goroutines and reports the
// rate of calls.
func runClients(b *testing.B, n int, op func(i int64) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for range n {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
				if err := op(i); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "creates/s")
}

func BenchmarkGet(b *testing.B) {
	h, store := benchAPI(b)
	seed(b, store, 1000)
	for b.Loop() {
		serveBench(b, h, "GET", "/v1/registrations/r500", "", http.StatusOK)
	}
}

func BenchmarkListPage(b *testing.B) {
	h, store := benchAPI(b)
	seed(b, store, 1000)
	for b.Loop() {
		serveBench(b, h, "GET", "/v1/registrations?limit=100&after=r300", "", http.StatusOK)
	}
}

func seed(b *testing.B, store *cursor.DB, n int) {
	b.Helper()
	for i := range n {
		reg := cursor.Registration{Config: cursor.Config{ID: fmt.Sprintf("r%d", i), Namespace: "outbox",
			Subject: "journal.x", URL: "https://a.example/", Format: "binary"}, NextSeq: 1}
		if _, _, err := store.Create(context.Background(), reg, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPlan1000Unchanged: one plan of 1,000 signed registrations the
// store holds as they are, what a second bridge apply sends per call.
func BenchmarkPlan1000Unchanged(b *testing.B) {
	h, _ := benchAPI(b)
	entries := make([]string, 1000)
	for i := range entries {
		entries[i] = fmt.Sprintf(`{"id":"r%04d","namespace":"outbox","subject":"journal.orders.%d","url":"https://a.example/%d","secret":%q}`, i, i, i, goodSecret)
		serveBench(b, h, "POST", "/v1/registrations", entries[i], http.StatusCreated)
	}
	body := `{"registrations":[` + strings.Join(entries, ",") + `]}`
	for b.Loop() {
		serveBench(b, h, "POST", "/v1/plan", body, http.StatusOK)
	}
}

package admin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/jetstream-bridge/bridge/cursor"
	"github.com/jetstream-bridge/bridge/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const testToken = "admin-token-for-tests"

// harness is an admin API on a loopback HTTP server, with the store, the
// journal and the worker's wake-ups in reach of the test.
type harness struct {
	t       *testing.T
	srv     *httptest.Server
	store   *cursor.DB
	journal *fakeJournal
	waker   *recordingWaker
	logs    *testutil.SyncBuffer
	clock   *testClock
}

func newHarness(t *testing.T, mod ...func(*Options)) *harness {
	t.Helper()
	clock := &testClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	store, err := cursor.Open(filepath.Join(t.TempDir(), "bridge.db"), cursor.WithClock(clock.now))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := store.Close(); err != nil {
			t.Errorf("closing the store: %v", err)
		}
	})
	h := &harness{
		t:       t,
		store:   store,
		journal: &fakeJournal{first: 1, last: 41, base: time.Date(2026, 3, 1, 11, 0, 0, 0, time.UTC)},
		waker:   &recordingWaker{},
		logs:    &testutil.SyncBuffer{},
		clock:   clock,
	}
	opts := Options{
		Store:   h.store,
		Journal: h.journal,
		Guard:   fakeGuard{},
		Waker:   h.waker,
		Token:   testToken,
		Logger:  slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Clock:   clock.now,
	}
	for _, f := range mod {
		f(&opts)
	}
	// Every exchange of the test is checked against the OpenAPI document.
	h.srv = httptest.NewServer(validated(t, New(opts)))
	t.Cleanup(h.srv.Close)
	return h
}

// response is one answer as a client sees it.
type response struct {
	status int
	header http.Header
	body   []byte
}

// do sends a request with the test token; headers come in name, value
// pairs and override it.
func (h *harness) do(method, path, body string, headers ...string) response {
	h.t.Helper()
	res, err := h.send(method, path, body, headers...)
	if err != nil {
		h.t.Fatal(err)
	}
	return res
}

// send is do for any goroutine: it returns what fails instead of ending
// the test.
func (h *harness) send(method, path, body string, headers ...string) (response, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, h.srv.URL+path, rd)
	if err != nil {
		return response{}, err
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] == "" {
			req.Header.Del(headers[i])
			continue
		}
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := h.srv.Client().Do(req)
	if err != nil {
		return response{}, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		return response{}, fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	return response{status: res.StatusCode, header: res.Header, body: data}, nil
}

// create registers body and requires a 201.
func (h *harness) create(body string) Registration {
	h.t.Helper()
	res := h.do("POST", "/v1/registrations", body)
	if res.status != http.StatusCreated {
		h.t.Fatalf("create %s: status %d, body %s", body, res.status, res.body)
	}
	return decodeView(h.t, res.body)
}

func decodeView(t *testing.T, body []byte) Registration {
	t.Helper()
	var v Registration
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("answer is not a registration: %v\n%s", err, body)
	}
	return v
}

// wantError checks an error answer: its status, its code, and that its
// message contains every fragment.
func wantError(t *testing.T, res response, status int, code string, fragments ...string) {
	t.Helper()
	if res.status != status {
		t.Fatalf("status %d, want %d; body %s", res.status, status, res.body)
	}
	if ct := res.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	var e errorBody
	if err := json.Unmarshal(res.body, &e); err != nil {
		t.Fatalf("error answer is not JSON: %v\n%s", err, res.body)
	}
	if e.Error.Code != code {
		t.Errorf("code %q, want %q (message %q)", e.Error.Code, code, e.Error.Message)
	}
	for _, f := range fragments {
		if !strings.Contains(e.Error.Message, f) {
			t.Errorf("message %q does not contain %q", e.Error.Message, f)
		}
	}
}

// complete is what the worker does when a terminal A2A status is
// acknowledged.
func (h *harness) complete(id string) {
	h.t.Helper()
	ctx := h.t.Context()
	reg, err := h.store.Get(ctx, id)
	if err == nil {
		err = h.store.Advance(ctx, id, cursor.Progress{NextSeq: reg.NextSeq + 1, Delivered: 1, Complete: true})
	}
	if err == nil {
		err = h.store.Flush(ctx)
	}
	if err != nil {
		h.t.Fatalf("completing %s: %v", id, err)
	}
}

type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

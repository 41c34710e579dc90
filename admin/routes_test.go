package admin

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/jetstream-bridge/bridge/cursor"
)

var cursorListAll = cursor.ListOptions{Limit: 1000}

// v1Routes is every token-protected route, with a body it would accept.
var v1Routes = []struct{ method, path, body string }{
	{"POST", "/v1/registrations", `{"namespace":"outbox","subject":"journal.x","url":"https://a.example/"}`},
	{"GET", "/v1/registrations", ""},
	{"GET", "/v1/registrations/r1", ""},
	{"PUT", "/v1/registrations/r1", `{"namespace":"outbox","subject":"journal.x","url":"https://a.example/"}`},
	{"DELETE", "/v1/registrations/r1", ""},
	{"POST", "/v1/registrations/r1/unpark", ""},
	{"POST", "/v1/registrations/r1/rewind", `{"seq":1}`},
	{"POST", "/v1/purge", `{"completedOlderThan":"720h"}`},
	{"GET", "/v1/nothing-here", ""},
}

func TestV1RefusesMissingOrWrongToken(t *testing.T) {
	h := newHarness(t)
	h.create(`{"id":"r1","namespace":"outbox","subject":"journal.x","url":"https://a.example/"}`)
	auths := map[string]string{
		"no header":    "",
		"wrong token":  "Bearer not-the-token",
		"token prefix": "Bearer " + testToken[:5],
		"basic scheme": "Basic " + testToken,
		"bare token":   testToken,
	}
	for _, rt := range v1Routes {
		for name, auth := range auths {
			res := h.do(rt.method, rt.path, rt.body, "Authorization", auth)
			t.Run(rt.method+" "+rt.path+" "+name, func(t *testing.T) {
				wantError(t, res, http.StatusUnauthorized, "unauthenticated")
				if res.header.Get("WWW-Authenticate") == "" {
					t.Error("401 without WWW-Authenticate")
				}
			})
		}
	}
	if _, err := h.store.Get(t.Context(), "r1"); err != nil {
		t.Errorf("an unauthenticated request changed the store: %v", err)
	}
}

func TestEmptyTokenRefusesEveryone(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.Token = "" })
	for _, auth := range []string{"", "Bearer ", "Bearer"} {
		wantError(t, h.do("GET", "/v1/registrations", "", "Authorization", auth), http.StatusUnauthorized, "unauthenticated")
	}
}

func TestUnknownPathAndWrongMethod(t *testing.T) {
	h := newHarness(t)
	wantError(t, h.do("GET", "/v2/registrations", ""), http.StatusNotFound, "not_found", "/v2/registrations")
	wantError(t, h.do("GET", "/v1/registrations/a/b/c", ""), http.StatusNotFound, "not_found")

	res := h.do("PATCH", "/v1/registrations/r1", `{}`)
	wantError(t, res, http.StatusMethodNotAllowed, "method_not_allowed", "GET", "PUT", "DELETE")
	if allow := res.header.Get("Allow"); !strings.Contains(allow, "PUT") {
		t.Errorf("Allow %q does not list PUT", allow)
	}
	wantError(t, h.do("PATCH", "/v1/registrations/r1", `{}`, "Authorization", ""), http.StatusUnauthorized, "unauthenticated")
	wantError(t, h.do("DELETE", "/healthz", ""), http.StatusMethodNotAllowed, "method_not_allowed")
}

func TestHealthReadyMetrics(t *testing.T) {
	var notReady error
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = w.Write([]byte("bridge_up 1\n"))
	})
	h := newHarness(t, func(o *Options) {
		o.Ready = func(context.Context) error { return notReady }
		o.Metrics = metrics
	})
	noToken := []string{"Authorization", ""}

	res := h.do("GET", "/healthz", "", noToken...)
	if res.status != 200 || strings.TrimSpace(string(res.body)) != `{"status":"ok"}` {
		t.Errorf("healthz: %d %s", res.status, res.body)
	}
	res = h.do("GET", "/readyz", "", noToken...)
	if res.status != 200 || strings.TrimSpace(string(res.body)) != `{"status":"ok"}` {
		t.Errorf("readyz when ready: %d %s", res.status, res.body)
	}
	notReady = errors.New("nats: not connected to nats://127.0.0.1:4222")
	res = h.do("GET", "/readyz", "", noToken...)
	if res.status != 503 || strings.TrimSpace(string(res.body)) != `{"status":"unavailable","reason":"nats: not connected to nats://127.0.0.1:4222"}` {
		t.Errorf("readyz when not ready: %d %s", res.status, res.body)
	}
	res = h.do("GET", "/metrics", "", noToken...)
	if res.status != 200 || string(res.body) != "bridge_up 1\n" {
		t.Errorf("metrics: %d %s", res.status, res.body)
	}

	bare := newHarness(t)
	wantError(t, bare.do("GET", "/metrics", "", noToken...), http.StatusNotFound, "not_found", "metrics")
	if res := bare.do("GET", "/readyz", "", noToken...); res.status != 200 {
		t.Errorf("readyz without a Ready func: %d %s", res.status, res.body)
	}
}

func TestNewRefusesMissingParts(t *testing.T) {
	h := newHarness(t)
	for name, o := range map[string]Options{
		"store":   {Journal: h.journal, Guard: fakeGuard{}},
		"journal": {Store: h.store, Guard: fakeGuard{}},
		"guard":   {Store: h.store, Journal: h.journal},
	} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(r.(string), "Options") {
					t.Errorf("New without a %s: recovered %v, want a panic naming Options", name, r)
				}
			}()
			New(o)
		}()
	}
}

package admin

import (
	"net/http"
	"strings"
	"testing"

	"github.com/jetstream-bridge/bridge/console"
)

// TestConsoleLoadsWithoutATokenAndTheAPIStillWantsOne serves /console/
// and its script to a browser that sends no token, with the console's
// policy, while /v1 still refuses such a caller.
func TestConsoleLoadsWithoutATokenAndTheAPIStillWantsOne(t *testing.T) {
	h := newHarness(t)
	for path, holds := range map[string]string{
		"/console/":           `<input type="password"`,
		"/console/console.js": "/v1/registrations",
	} {
		res := h.do("GET", path, "", "Authorization", "")
		if res.status != http.StatusOK || !strings.Contains(string(res.body), holds) {
			t.Errorf("GET %s without a token: %d, want 200 holding %q", path, res.status, holds)
		}
		if got := res.header.Get("Content-Security-Policy"); got != console.Policy {
			t.Errorf("GET %s: Content-Security-Policy %q", path, got)
		}
		if got := res.header.Get("X-Frame-Options"); got != "DENY" {
			t.Errorf("GET %s: X-Frame-Options %q", path, got)
		}
	}
	wantError(t, h.do("GET", "/v1/registrations", "", "Authorization", ""), http.StatusUnauthorized, "unauthenticated")
	wantError(t, h.do("POST", "/console/", "", "Authorization", ""), http.StatusMethodNotAllowed, "method_not_allowed")

	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(h.srv.URL + "/console")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != "/console/" {
		t.Errorf("GET /console: %s to %q, want 301 to /console/", resp.Status, resp.Header.Get("Location"))
	}
}

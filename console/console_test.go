package console_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/jetstream-bridge/bridge/console"
)

func get(t *testing.T, srv *httptest.Server, path string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// TestEveryAnswerForbidsWhatTheConsoleNeverDoes serves the page, its
// resources and a missing file: each carries the policy that lets only
// the console's own script run, the framing ban and nosniff.
func TestEveryAnswerForbidsWhatTheConsoleNeverDoes(t *testing.T) {
	srv := httptest.NewServer(console.Handler())
	defer srv.Close()
	for _, tc := range []struct {
		path, status, contentType, holds string
	}{
		{"/", "200 OK", "text/html; charset=utf-8", `<input type="password"`},
		{"/console.js", "200 OK", "text/javascript; charset=utf-8", "'use strict'"},
		{"/chart.js", "200 OK", "text/javascript; charset=utf-8", "export function drawHistory"},
		{"/console.css", "200 OK", "text/css; charset=utf-8", "@media"},
		{"/nothing.js", "404 Not Found", "text/plain; charset=utf-8", "not found"},
	} {
		resp, body := get(t, srv, tc.path)
		h := resp.Header
		if resp.Status != tc.status || h.Get("Content-Type") != tc.contentType || !strings.Contains(body, tc.holds) {
			t.Errorf("GET %s: %s %q, want %s %q holding %q", tc.path, resp.Status, h.Get("Content-Type"), tc.status, tc.contentType, tc.holds)
		}
		for name, want := range map[string]string{
			"Content-Security-Policy": console.Policy,
			"X-Frame-Options":         "DENY",
			"X-Content-Type-Options":  "nosniff",
			"Referrer-Policy":         "no-referrer",
		} {
			if got := h.Get(name); got != want {
				t.Errorf("GET %s: %s = %q, want %q", tc.path, name, got, want)
			}
		}
	}
}

// TestPolicyAllowsNothingInlineOrForeign reads the policy as a browser
// would: a script source that admitted inline code, eval or another
// origin would let markup in an API answer run.
func TestPolicyAllowsNothingInlineOrForeign(t *testing.T) {
	directives := map[string][]string{}
	for _, d := range strings.Split(console.Policy, ";") {
		f := strings.Fields(d)
		if len(f) > 0 {
			directives[f[0]] = f[1:]
		}
	}
	for _, name := range []string{"default-src", "frame-ancestors", "base-uri", "form-action"} {
		if got := directives[name]; len(got) != 1 || got[0] != "'none'" {
			t.Errorf("%s = %v, want 'none'", name, got)
		}
	}
	for name, sources := range directives {
		for _, src := range sources {
			if src != "'self'" && src != "'none'" {
				t.Errorf("%s allows %s", name, src)
			}
		}
	}
}

// TestPageHoldsNoInlineCodeAndScriptWritesNoMarkup guards what the policy
// would otherwise break or what it cannot see: an inline script or style
// the browser refuses, and a script that writes API data as markup.
func TestPageHoldsNoInlineCodeAndScriptWritesNoMarkup(t *testing.T) {
	srv := httptest.NewServer(console.Handler())
	defer srv.Close()
	_, page := get(t, srv, "/")
	for _, tag := range regexp.MustCompile(`<script[^>]*>[^<]*`).FindAllString(page, -1) {
		if !strings.Contains(tag, " src=") || !strings.HasSuffix(tag, ">") {
			t.Errorf("index.html holds an inline script: %q", tag)
		}
	}
	for _, bad := range []*regexp.Regexp{
		regexp.MustCompile(`<style`),
		regexp.MustCompile(`\sstyle=`),
		regexp.MustCompile(`\son[a-z]+=`),
		regexp.MustCompile(`javascript:`),
	} {
		if m := bad.FindString(page); m != "" {
			t.Errorf("index.html holds %q", m)
		}
	}
	for _, name := range []string{"console.js", "chart.js"} {
		res, script := get(t, srv, "/"+name)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("GET /%s: %s", name, res.Status)
		}
		for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "Function(",
			"localStorage", "document.cookie", ".style.", "'style'"} {
			if strings.Contains(script, bad) {
				t.Errorf("%s uses %s", name, bad)
			}
		}
	}
}

// TestRegistrationViewShowsOrdering: a registration's page lists its
// ordering (key and POSTs at once), its POSTs in flight and what its
// receiver acknowledged ahead of the cursor (CONTRACT §12), in that order
// among the members it knows, the ordering in words rather than JSON.
func TestRegistrationViewShowsOrdering(t *testing.T) {
	script, at := configOrder(t)
	if at("batch") < 0 || at("ordering") != at("batch")+1 || at("lag") < 0 || at("inFlight") != at("lag")+1 || at("ahead") != at("inFlight")+1 {
		t.Errorf("configOrder: want ordering after batch, inFlight and ahead after lag")
	}
	for _, words := range []string{`k === 'ordering'`, `' in flight'`, `'registration, one POST at a time'`} {
		if !strings.Contains(script, words) {
			t.Errorf("console.js does not describe the ordering: no %s", words)
		}
	}
}

// TestRegistrationViewShowsFilter: a registration's page lists its filter
// after its ordering, and what the filter passed over (filtered,
// filterErrors, lastFilterError) after delivered (CONTRACT §13); the
// filter is text, shown as the API answered it.
func TestRegistrationViewShowsFilter(t *testing.T) {
	_, at := configOrder(t)
	if at("ordering") < 0 || at("filter") != at("ordering")+1 || at("delivered") < 0 ||
		at("filtered") != at("delivered")+1 || at("filterErrors") != at("filtered")+1 || at("lastFilterError") != at("filterErrors")+1 {
		t.Error("configOrder: want filter after ordering, filtered, filterErrors and lastFilterError after delivered")
	}
}

// configOrder is console.js and where a member stands in its
// configOrder, -1 when it is not there.
func configOrder(t *testing.T) (string, func(string) int) {
	t.Helper()
	srv := httptest.NewServer(console.Handler())
	defer srv.Close()
	_, script := get(t, srv, "/console.js")
	m := regexp.MustCompile(`(?s)const configOrder = \[(.*?)\];`).FindStringSubmatch(script)
	if m == nil {
		t.Fatal("console.js has no configOrder")
	}
	var order []string
	for _, q := range regexp.MustCompile(`'([A-Za-z]+)'`).FindAllStringSubmatch(m[1], -1) {
		order = append(order, q[1])
	}
	return script, func(name string) int { return slices.Index(order, name) }
}

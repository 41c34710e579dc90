package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/jetstream-bridge/bridge/cursor"
)

// TestConsoleScale measures the console over a store of many
// registrations (BRIDGE_CONSOLE_BENCH=100000; unset, it does not run): from
// navigation to the first page of the list rendered, and from a state
// change to the list showing it, in headless Chromium. It reports the
// figures and asserts none: they are the machine's, not the bridge's
// promise.
func TestConsoleScale(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("BRIDGE_CONSOLE_BENCH"))
	if n <= 0 {
		t.Skip("set BRIDGE_CONSOLE_BENCH to a number of registrations to measure the console over them")
	}
	const samples, parkedEvery = 9, 10_000
	d := newDaemon(t)
	ok, gone := newSink(t), newGoneReceiver(t)
	began := time.Now()
	preloadConsole(t, filepath.Join(d.dataDir, "bridge.db"), n, parkedEvery, func(i int) string {
		if i == 0 {
			return gone.URL
		}
		return ok.URL
	})
	t.Logf("preloaded %d registrations (%d parked) in %v", n, (n-1)/parkedEvery, time.Since(began).Round(time.Millisecond))
	d.start()

	// What one poll of the list costs the API.
	for _, q := range []string{"?limit=100", "?state=parked&limit=100", "?prefix=reg-05&limit=100"} {
		var took []time.Duration
		for range samples {
			start := time.Now()
			if code := d.api("GET", "/v1/registrations"+q, nil, nil); code != http.StatusOK {
				t.Fatalf("GET /v1/registrations%s: %d", q, code)
			}
			took = append(took, time.Since(start))
		}
		t.Logf("GET /v1/registrations%s: %s", q, spread(took))
	}

	b := newBrowser(t)
	console := "http://" + d.admin + "/console/"
	b.do(chromedp.Navigate(console))
	b.signIn(d.token())
	firstPage := `document.querySelectorAll('#rest tbody tr').length === 100 && document.querySelectorAll('#parked tbody tr').length > 0`
	b.until("the first page", firstPage)

	var load, parked, unparked []time.Duration
	for range samples {
		b.do(chromedp.Navigate("about:blank"))
		start := time.Now()
		b.do(chromedp.Navigate(console)) // the token stays in the tab's sessionStorage
		b.until("the first page after a navigation", firstPage)
		load = append(load, time.Since(start))
	}
	pub := newPublisher(t, "nats://"+d.natsAddr)
	// A change made right after the list showed the last one would always
	// land at the start of the console's poll interval: each waits a random
	// part of it first, so the samples cover every phase.
	phase := func() { time.Sleep(rand.N(2500 * time.Millisecond)) }
	for range samples {
		gone.accept.Store(false)
		phase()
		start := time.Now()
		pub.publish(t, "journal.bench.0", `{}`)
		b.until("reg-000000 parked in the list", row("parked", "reg-000000")+`.includes('parked')`)
		parked = append(parked, time.Since(start))

		gone.accept.Store(true)
		phase()
		start = time.Now()
		if code := d.api("POST", "/v1/registrations/reg-000000/unpark", nil, nil); code != http.StatusOK {
			t.Fatalf("unpark: %d", code)
		}
		b.until("reg-000000 active in the list", row("rest", "reg-000000")+`.includes('active') && `+row("parked", "reg-000000")+` === ''`)
		unparked = append(unparked, time.Since(start))
	}
	t.Logf("%d registrations: navigation to the first page rendered %s; publish to parked shown %s; unpark to active shown %s",
		n, spread(load), spread(parked), spread(unparked))
}

// preloadConsole writes n idle registrations into a store before the
// bridge opens it, every parkedEvery-th of them parked: thousands of
// creates through the API would time the API, not the console.
func preloadConsole(t *testing.T, path string, n, parkedEvery int, url func(i int) string) {
	t.Helper()
	ctx := context.Background()
	db, err := cursor.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	const chunk = 10_000
	for lo := 0; lo < n; lo += chunk {
		rows := make([]cursor.Registration, 0, chunk)
		for i := lo; i < min(lo+chunk, n); i++ {
			rows = append(rows, cursor.Registration{NextSeq: 1, Config: cursor.Config{
				ID: fmt.Sprintf("reg-%06d", i), Namespace: "outbox",
				Subject: fmt.Sprintf("journal.bench.%d", i), URL: url(i) + "/hook",
			}})
		}
		if err := db.CreateMany(ctx, rows); err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if err := db.Advance(ctx, r.ID, cursor.Progress{NextSeq: 1, Idle: true}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := parkedEvery; i < n; i += parkedEvery {
		if err := db.Park(ctx, fmt.Sprintf("reg-%06d", i), "receiver answered 410 Gone"); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// spread is the median and the slowest of some durations.
func spread(d []time.Duration) string {
	s := slices.Clone(d)
	slices.Sort(s)
	return fmt.Sprintf("median %v, max %v (%d samples)", s[len(s)/2].Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond), len(s))
}

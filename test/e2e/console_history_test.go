package e2e

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestConsoleDrawsAStreakAndItsRecovery: a receiver that answers 503 five
// times and then 2xx again shows, in its registration's picture, five
// failed points (5xx) between delivered ones (2xx), in the order they
// happened, and a delay that rose during the streak and is 0 after the
// recovery. The list shows a parked registration's lag and failures as
// bars beside the numbers.
func TestConsoleDrawsAStreakAndItsRecovery(t *testing.T) {
	d := newDaemon(t)
	d.start()
	flaky := startHook(t, 204, 204, 204, 503, 503, 503, 503, 503)
	gone := newGoneReceiver(t)
	d.createOrders(map[string]string{"orders": flaky.URL, "archive": gone.URL})
	pub := newPublisher(t, "nats://"+d.natsAddr)
	publish := func(from, to int) {
		for i := from; i <= to; i++ {
			pub.publish(t, "journal.orders."+strconv.Itoa(i), fmt.Sprintf(`{"n":%d}`, i))
		}
	}
	publish(1, 3)
	waitFor(t, 10*time.Second, "three deliveries", func() bool { return flaky.count() == 3 })
	publish(4, 4) // answered 503 five times (Retry-After: 1), then 204
	waitFor(t, 30*time.Second, "the streak and its recovery", func() bool { return flaky.count() == 9 })
	publish(5, 6)
	waitFor(t, 10*time.Second, "two more deliveries", func() bool { return flaky.count() == 11 })

	b := newBrowser(t)
	b.do(chromedp.Navigate("http://" + d.admin + "/console/"))
	b.signIn(d.token())

	// The list: the parked archive's lag (all six messages) and its one
	// failure as bars; orders, caught up, with empty bars.
	bar := func(id, kind string) string {
		return fmt.Sprintf(`(() => { const a = [...document.querySelectorAll('#list tbody a')].find((a) => a.textContent === %s);
			const s = a && a.closest('tr').querySelector('svg.glance-%s');
			return s ? s.getAttribute('data-value') + ' ' + (Number(s.querySelector('.glance-fill').getAttribute('width')) > 0) : ''; })()`,
			jsString(id), kind)
	}
	b.until("archive parked", fmt.Sprintf(`%s.includes('parked')`, row("parked", "archive")))
	b.until("orders caught up", fmt.Sprintf(`%s.startsWith('orders | outbox | active | 0 | 0 | 6')`, row("rest", "orders")))
	// The API's lag reads the stream's last sequence at most a second
	// old, so the bars are waited for, not read once.
	for _, c := range []struct{ id, kind, want string }{
		{"archive", "lag", "6 true"}, {"archive", "failures", "1 true"},
		{"orders", "lag", "0 false"}, {"orders", "failures", "0 false"},
	} {
		b.untilIs(fmt.Sprintf("%s's %s bar (value, drawn)", c.id, c.kind), bar(c.id, c.kind), c.want)
	}

	// The picture: every attempt a point, in time order, its outcome in
	// the DOM.
	b.do(chromedp.Click(`//table[@id="rest"]//a[text()="orders"]`))
	outcomes := `[...document.querySelectorAll('#history [data-outcome]')].map((p) => p.getAttribute('data-outcome')).join(',')`
	want := "2xx,2xx,2xx,5xx,5xx,5xx,5xx,5xx,2xx,2xx,2xx"
	b.untilIs("the streak and the recovery in the picture", outcomes, want)
	inOrder := `(() => { const t = [...document.querySelectorAll('#history [data-outcome]')].map((p) => Date.parse(p.getAttribute('data-at')));
		return t.every((v, i) => !Number.isNaN(v) && (i === 0 || t[i-1] <= v)); })()`
	if !evaluate[bool](b, inOrder) {
		t.Error("the picture's points are not in the order of their attempts' times")
	}
	// Failed points are drawn below delivered ones, each in its outcome's colour.
	lanes := `[...document.querySelectorAll('#history [data-outcome]')].map((p) => p.getAttribute('cy') + ':' + getComputedStyle(p).fill).join('|')`
	got := strings.Split(evaluate[string](b, lanes), "|")
	if len(got) != 11 || got[0] != got[8] || got[3] == got[0] || got[3] != got[7] {
		t.Errorf("points' lanes and colours %v: delivered and failed should differ, alike among themselves", got)
	}
	// The delay rose for as long as message 4 waited (five 503s, a second
	// apart) and is 0 since its 204.
	delay := func(which string) float64 {
		return evaluate[float64](b, fmt.Sprintf(`Number(document.querySelector('#history .delay').getAttribute('data-%s-seconds'))`, which))
	}
	if peak, last := delay("max"), delay("last"); peak < 4.5 || last != 0 {
		t.Errorf("delay: peak %.3f s, now %.3f s; want ≥ 4.5 s during the streak and 0 after", peak, last)
	}
	legend := `[...document.querySelectorAll('#history-legend li')].map((l) => l.textContent).join(', ')`
	if got := evaluate[string](b, legend); got != "2xx 6, 5xx 5" {
		t.Errorf("legend %q, want %q", got, "2xx 6, 5xx 5")
	}
	const lagNow = "Now: 0 messages behind the stream's last (lag); 0 attempts in a row failed."
	if got := evaluate[string](b, `document.querySelector('#history-lag').textContent`); got != lagNow {
		t.Errorf("under the picture %q, want %q", got, lagNow)
	}
	b.noMarkupRan()
	b.shot("console-history.png")
}

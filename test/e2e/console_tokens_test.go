package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestConsoleWithScopedTokens signs the console in with tokens scoped to
// team-a- (CONTRACT §14): a viewer sees only team-a-* registrations, is
// told who it is, and has no button that changes anything; an operator
// unparks a parked team-a- registration.
func TestConsoleWithScopedTokens(t *testing.T) {
	d := newDaemon(t)
	d.start()
	gone := newGoneReceiver(t)
	d.createOrders(map[string]string{"team-a-orders": newSink(t).URL, "team-a-parked": gone.URL, "team-b-orders": newSink(t).URL})
	scoped := func(name, role string) string {
		var made struct{ Token string }
		if code := d.api("POST", "/v1/tokens", map[string]any{"name": name, "idPrefix": "team-a-", "role": role}, &made); code != http.StatusCreated || made.Token == "" {
			t.Fatalf("POST /v1/tokens %s: %d, token %t", name, code, made.Token != "")
		}
		return made.Token
	}
	viewer, operator := scoped("team-a-viewer", "viewer"), scoped("team-a-ops", "operator")
	newPublisher(t, "nats://"+d.natsAddr).publish(t, "journal.orders.1", `{"n":1}`)
	waitFor(t, 10*time.Second, "team-a-parked parked", func() bool { return d.registration("team-a-parked")["state"] == "parked" })

	b := newBrowser(t)
	b.do(chromedp.Navigate("http://" + d.admin + "/console/"))

	// The viewer: team-a-* alone, who is signed in, and no writes.
	b.signIn(viewer)
	ids := `[...document.querySelectorAll('#list tbody a')].map((a) => a.textContent).sort().join(',')`
	b.until("team-a-* alone in the list", fmt.Sprintf(`%s === 'team-a-orders,team-a-parked'`, ids))
	identity := `document.querySelector('#identity').textContent.replace(/\s+/g, ' ').trim()`
	if got, want := evaluate[string](b, identity), "Signed in as team-a-viewer viewer ids beginning team-a-"; got != want {
		t.Errorf("identity %q, want %q", got, want)
	}
	noToken := func(token string) {
		t.Helper()
		if evaluate[bool](b, fmt.Sprintf(`document.documentElement.outerHTML.includes(%s) || location.href.includes(%s)`, jsString(token), jsString(token))) {
			t.Error("the page shows the token")
		}
	}
	noToken(viewer)
	// A reload keeps the tab signed in as the same token.
	b.do(chromedp.Reload())
	b.until("the viewer's list after a reload", fmt.Sprintf(`%s === 'team-a-orders,team-a-parked' && %s === 'Signed in as team-a-viewer viewer ids beginning team-a-'`, ids, identity))
	b.until("the parked one's lag", fmt.Sprintf(`%s.startsWith('team-a-parked | outbox | parked | 1 | 1 | 0')`, row("parked", "team-a-parked")))
	b.shot("console-viewer.png")

	shownButtons := `[...document.querySelectorAll('button')].filter((b) => b.offsetParent !== null).map((b) => b.textContent).join(',')`
	b.do(chromedp.Click(`//table[@id="parked"]//a[text()="team-a-parked"]`))
	b.until("team-a-parked's page with its picture", `location.hash === '#/r/team-a-parked' && `+config("state")+` === 'parked' && `+visible(`#read-only`)+
		` && [...document.querySelectorAll('#history [data-outcome]')].map((p) => p.getAttribute('data-outcome')).join() === '4xx'`)
	if got := evaluate[string](b, shownButtons); got != "Sign out" {
		t.Errorf("a viewer's registration page shows the buttons %q, want only Sign out", got)
	}
	// Another team's registration answers as one that does not exist.
	b.do(chromedp.Navigate("http://" + d.admin + "/console/#/r/team-b-orders"))
	b.until("team-b-orders refused", `document.querySelector('#reg-status').textContent === 'Registration team-b-orders does not exist (any more).'`)
	b.do(chromedp.Click(button("Sign out")))

	// The operator: the same registrations, every registration button,
	// and Unpark delivers the parked message.
	b.signIn(operator)
	b.until("team-a-* alone in the list", fmt.Sprintf(`%s === 'team-a-orders,team-a-parked'`, ids))
	if got, want := evaluate[string](b, identity), "Signed in as team-a-ops operator ids beginning team-a-"; got != want {
		t.Errorf("identity %q, want %q", got, want)
	}
	b.do(chromedp.Click(`//table[@id="parked"]//a[text()="team-a-parked"]`))
	b.until("team-a-parked's page", `location.hash === '#/r/team-a-parked' && `+config("state")+` === 'parked'`)
	if got := evaluate[string](b, shownButtons); got != "Sign out,Unpark,Rewind,Resend,Delete" {
		t.Errorf("an operator's registration page shows the buttons %q, want Sign out, Unpark, Rewind, Resend, Delete", got)
	}
	gone.accept.Store(true)
	b.confirmAndClick("Unpark", "Unpark: 200 OK")
	waitFor(t, 10*time.Second, "the parked message delivered after unpark", func() bool { return len(gone.received()) == 1 })
	b.until("team-a-parked active with its retry", config("state")+` === 'active' && `+attempt(0)+`.includes('retry | 2xx | 204')`)
	noToken(operator)
	if got := d.registration("team-b-orders")["state"]; got != "active" {
		t.Errorf("team-b-orders: %v, want active and untouched", got)
	}
	if strings.Contains(d.logs.String(), viewer) || strings.Contains(d.logs.String(), operator) {
		t.Error("the bridge's log holds a token")
	}
	b.noMarkupRan()
}

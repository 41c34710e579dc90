package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// markup is what a hostile receiver answers: shown as markup, it would
// load an image and run a script.
const markup = `<img src=x onerror=alert(1)>`

// TestConsole drives the operator's console in headless Chromium against
// the real binary, as an operator would: a refused token, the list with a
// parked registration first and its hostile last error shown as text,
// its page and attempts, Unpark, Rewind, Resend and Delete, each confirmed
// in the browser's own dialog.
func TestConsole(t *testing.T) {
	d := newDaemon(t)
	d.start()
	ok1, ok2 := newSink(t), newSink(t)
	gone := newGoneReceiver(t)
	d.createOrders(map[string]string{"alpha": ok1.URL + "/hook", "beta": gone.URL + "/hook", "gamma": ok2.URL + "/hook"})

	b := newBrowser(t)
	b.do(chromedp.Navigate("http://" + d.admin + "/console"))
	b.until("the sign-in form", `location.pathname === '/console/' && `+visible(`input[type=password]`))

	// A refused token: the API's message, the form again, nothing loaded.
	b.do(chromedp.SendKeys(chromedp.CSS(`input[type=password]`), "not-the-token"), chromedp.Click(button("Sign in")))
	b.until("the refusal", visible(`#signin-error`)+` && document.querySelector('#signin-error').textContent === 'bearer token is not valid'`)
	if got := evaluate[bool](b, visible(`input[type=password]`)+` && document.querySelectorAll('#list tbody tr').length === 0 && `+hidden(`#list`)); !got {
		t.Fatal("after a refused token the sign-in form is not shown alone")
	}

	token := d.token()
	b.signIn(token)
	for _, id := range []string{"alpha", "beta", "gamma"} {
		b.until(id+" in the list", fmt.Sprintf(`%s.includes('active')`, row("rest", id)))
	}
	if got := evaluate[string](b, `document.querySelector('#identity').textContent.replace(/\s+/g, ' ').trim()`); got != "Signed in as root root every registration" {
		t.Errorf("identity %q, want the root token named, with its role and scope", got)
	}
	if kept := evaluate[bool](b, fmt.Sprintf(`localStorage.length === 0 && document.cookie === '' && !location.href.includes(%s)`, jsString(token))); !kept {
		t.Fatal("the token is kept in localStorage, a cookie or the URL")
	}

	// The receiver's 410 parks beta; the list shows it first, its error as text.
	seq := newPublisher(t, "nats://"+d.natsAddr).publish(t, "journal.orders.1", `{"n":1}`)
	b.until("beta parked at the top with its error", fmt.Sprintf(`%s.includes('parked') && %s.includes(%s) && %s === ''`,
		row("parked", "beta"), row("parked", "beta"), jsString("410 Gone: "+markup), row("rest", "beta")))
	b.until("alpha delivered", fmt.Sprintf(`%s === 'alpha | outbox | active | 0 | 0 | 1 | '`, row("rest", "alpha")))
	// A registration created by another client shows without a reload.
	if code := d.api("POST", "/v1/registrations", map[string]any{"id": "delta", "namespace": "outbox",
		"subject": "journal.other", "url": ok2.URL}, nil); code != http.StatusCreated {
		t.Fatalf("create delta: %d", code)
	}
	b.until("delta in the list", fmt.Sprintf(`%s.includes('active')`, row("rest", "delta")))

	// The filters: the beginning of the id, the state, the namespace.
	rows := func(table string) string {
		return fmt.Sprintf(`document.querySelectorAll('#%s tbody tr').length`, table)
	}
	b.do(chromedp.SendKeys(chromedp.CSS(`#filter-id`), "ga"))
	b.until("gamma alone", fmt.Sprintf(`%s !== '' && %s === 1 && %s === 0`, row("rest", "gamma"), rows("rest"), rows("parked")))
	b.choose(`#filter-id`, "", "input")
	b.choose(`#filter-state`, "parked", "change")
	b.until("beta alone", fmt.Sprintf(`%s !== '' && %s === 1 && `, row("rest", "beta"), rows("rest"))+hidden(`#parked-part`))
	b.choose(`#filter-state`, "", "change")
	b.choose(`#filter-namespace`, "a2a", "change")
	b.until("no a2a registration", fmt.Sprintf(`%s === 0 && %s === 0 && `, rows("rest"), rows("parked"))+visible(`#rest-empty`))
	b.choose(`#filter-namespace`, "", "change")
	b.until("all four again", fmt.Sprintf(`%s === 3 && %s === 1`, rows("rest"), rows("parked")))
	b.noMarkupRan()
	b.shot("console-list.png")
	b.phoneShot("console-phone.png")

	// Its page: the configuration and the attempts, newest first; Back returns.
	b.do(chromedp.Click(`//table[@id="parked"]//a[text()="beta"]`))
	b.until("beta's page with its attempt", `location.hash === '#/r/beta' && `+visible(`#attempts`)+
		fmt.Sprintf(` && %s.includes('delivery | 4xx | 410') && %s.includes(%s)`, attempt(0), attempt(0), jsString(markup)))
	b.noMarkupRan()
	b.shot("console-parked.png")
	b.do(chromedp.Evaluate[chromedp.Void](`history.back()`))
	b.until("the list after Back", visible(`#list`)+fmt.Sprintf(` && %s.includes('parked')`, row("parked", "beta")))
	b.do(chromedp.Click(`//table[@id="parked"]//a[text()="beta"]`))
	b.until("beta's page again", `location.hash === '#/r/beta' && `+visible(`#reg-config`))

	gone.accept.Store(true)
	b.confirmAndClick("Unpark", "Unpark: 200 OK")
	waitFor(t, 10*time.Second, "the retry after unpark", func() bool { return len(gone.received()) == 1 })
	b.until("beta active with its retry", config("state")+` === 'active' && `+attempt(0)+`.includes('retry | 2xx | 204')`)
	// The attempt is logged before the cursor moves; a rewind ahead of that
	// move would be overtaken by it, and nothing replayed.
	waitFor(t, 10*time.Second, "beta's cursor past the retried message", func() bool {
		n, _ := d.registration("beta")["nextSeq"].(float64)
		return uint64(n) > seq
	})

	b.do(chromedp.SendKeys(chromedp.CSS(`#rewind-seq`), fmt.Sprint(seq)))
	b.confirmAndClick("Rewind", "Rewind: 200 OK")
	waitFor(t, 10*time.Second, "the replay after rewind", func() bool { return len(gone.received()) == 2 })
	b.until("the replay in the attempts", attempt(0)+`.includes('replay | 2xx | 204')`)

	b.do(chromedp.SendKeys(chromedp.CSS(`#resend-seq`), fmt.Sprint(seq)))
	b.confirmAndClick("Resend", "Resend: 200 OK — the receiver: 2xx 204")
	waitFor(t, 10*time.Second, "the resent message", func() bool { return len(gone.received()) == 3 })
	b.until("the resend in the attempts", attempt(0)+`.includes('resend | 2xx | 204')`)
	for i, id := range gone.received() {
		if id != "JOURNAL-1" {
			t.Errorf("POST %d to beta carried webhook-id %q, want JOURNAL-1", i+1, id)
		}
	}

	// An error answer shows its status and the API's message.
	b.do(chromedp.SetValue(chromedp.CSS(`#resend-seq`), "99"))
	b.confirmAndClick("Resend", "Resend: 404 Not Found — ")
	b.until("the API's message", `document.querySelector('#answer').textContent.includes('99')`)

	// Delete: dismissed, nothing happens; confirmed, the list without beta.
	b.accept.Store(false)
	before := b.dialogCount()
	b.do(chromedp.Click(button("Delete")))
	waitFor(t, 10*time.Second, "the Delete confirmation", func() bool { return b.dialogCount() == before+1 })
	if code := d.api("GET", "/v1/registrations/beta", nil, nil); code != http.StatusOK {
		t.Fatalf("a dismissed Delete deleted: GET beta %d", code)
	}
	b.accept.Store(true)
	b.do(chromedp.Click(button("Delete")))
	b.until("the list without beta", visible(`#list`)+fmt.Sprintf(` && %s.includes('alpha') && %s === '' && %s === ''`,
		row("rest", "alpha"), row("rest", "beta"), row("parked", "beta"))+
		` && document.querySelector('#notice').textContent === 'Delete beta: 204 No Content'`)
	if code := d.api("GET", "/v1/registrations/beta", nil, nil); code != http.StatusNotFound {
		t.Fatalf("GET beta after Delete: %d, want 404", code)
	}
	b.noMarkupRan()
	if n := b.dialogCount(); n != 6 {
		t.Errorf("%d confirmations, want 6 (Unpark, Rewind, Resend twice, Delete twice)", n)
	}
}

// TestConsoleShowsOwners: with bridges sharing a kv store, the list
// names the bridge delivering each registration, as the API does.
func TestConsoleShowsOwners(t *testing.T) {
	d := newDaemon(t, "--store", "kv", "--kv-replicas", "1")
	d.start()
	if code := d.api("POST", "/v1/registrations", map[string]any{"id": "k1", "namespace": "outbox",
		"subject": "journal.k", "url": newSink(t).URL}, nil); code != http.StatusCreated {
		t.Fatalf("create: %d", code)
	}
	var owner string
	waitFor(t, 15*time.Second, "an owner for k1", func() bool {
		owner, _ = d.registration("k1")["owner"].(string)
		return owner != ""
	})
	b := newBrowser(t)
	b.do(chromedp.Navigate("http://" + d.admin + "/console/"))
	b.signIn(d.token())
	b.until("k1 with its owner", fmt.Sprintf(`%s === %s && [...document.querySelectorAll('#rest th')].map((h) => h.textContent).includes('owner')`,
		row("rest", "k1"), jsString("k1 | outbox | active | 0 | 0 | 0 |  | "+owner)))
}

// createOrders creates an outbox registration of journal.orders.> from
// the first message for each id, POSTing to its URL.
func (d *daemon) createOrders(urls map[string]string) {
	d.t.Helper()
	for id, url := range urls {
		body := map[string]any{"id": id, "namespace": "outbox", "subject": "journal.orders.>", "url": url, "start": "first"}
		if code := d.api("POST", "/v1/registrations", body, nil); code != http.StatusCreated {
			d.t.Fatalf("create %s: %d", id, code)
		}
	}
}

// goneReceiver answers 410 Gone with markup in its body until accept is
// set; then a sink answers, recording what it accepted.
type goneReceiver struct {
	*httptest.Server
	accept atomic.Bool
	ok     *sink
}

func newGoneReceiver(t *testing.T) *goneReceiver {
	g := &goneReceiver{ok: newSink(t)}
	g.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g.accept.Load() {
			g.ok.Config.Handler.ServeHTTP(w, r)
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusGone)
		_, _ = io.WriteString(w, markup)
	}))
	t.Cleanup(g.Close)
	return g
}

// received is the webhook-id of every POST accepted, in order.
func (g *goneReceiver) received() []string {
	var ids []string
	for _, r := range g.ok.requests() {
		ids = append(ids, r.header.Get("webhook-id"))
	}
	return ids
}

// browser is one headless Chromium tab. Every dialog it opens is
// recorded and answered with accept.
type browser struct {
	t       *testing.T
	ctx     context.Context
	accept  atomic.Bool
	mu      sync.Mutex
	dialogs []page.EventJavascriptDialogOpening
}

// chromium finds a Chromium or Chrome on PATH.
func chromium() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// newBrowser starts Chromium, or skips the test when none is installed.
func newBrowser(t *testing.T) *browser {
	t.Helper()
	path := chromium()
	if path == "" {
		t.Skip("the console browser test did not run: no Chromium found (chromium, chromium-browser or google-chrome on PATH)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.WindowSize(1280, 900))
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium refuses its sandbox to root
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	b := &browser{t: t, ctx: ctx}
	b.accept.Store(true)
	if err := chromedp.Do(ctx); err != nil { // starts the browser, bound to ctx only
		cancel()
		cancelAlloc()
		t.Fatalf("starting %s: %v", path, err)
	}
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev, err := range dialogs {
			if err != nil {
				return
			}
			b.mu.Lock()
			b.dialogs = append(b.dialogs, ev)
			b.mu.Unlock()
			_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: b.accept.Load()})
		}
	}()
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
		<-done
	})
	return b
}

// signIn types the token into the sign-in form and waits for the list.
func (b *browser) signIn(token string) {
	b.t.Helper()
	b.until("the sign-in form", visible(`input[type=password]`))
	b.do(chromedp.SendKeys(chromedp.CSS(`input[type=password]`), token), chromedp.Click(button("Sign in")))
	b.until("the list", visible(`#list`))
}

// choose sets a form field's value as a user's choice would, firing event.
func (b *browser) choose(css, value, event string) {
	b.t.Helper()
	b.do(chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => { const e = document.querySelector(%s); e.value = %s;
		e.dispatchEvent(new Event(%s, { bubbles: true })); })()`, jsString(css), jsString(value), jsString(event))))
}

// do runs steps, each bounded so a stuck browser fails the test instead
// of hanging it.
func (b *browser) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatalf("browser: %v\npage: %s", err, b.text())
	}
}

// until waits for a JavaScript condition to hold in the page. The
// console polls every few seconds; 20 s leaves room for a loaded machine.
func (b *browser) until(what, cond string) {
	b.t.Helper()
	if err := b.poll(cond); err != nil {
		b.t.Fatalf("waiting for %s: %v\npage: %s", what, err, b.text())
	}
}

// untilIs waits until the string expression expr is want; a failure
// says what expr was last.
func (b *browser) untilIs(what, expr, want string) {
	b.t.Helper()
	if err := b.poll(fmt.Sprintf(`(%s) === %s`, expr, jsString(want))); err != nil {
		b.t.Fatalf("waiting for %s: %v\nlast %q, want %q\npage: %s", what, err, evaluate[string](b, expr), want, b.text())
	}
}

// poll evaluates cond until it is true, for 20 s at most.
func (b *browser) poll(cond string) error {
	ctx, cancel := context.WithTimeout(b.ctx, 25*time.Second)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Poll[bool](cond, chromedp.WithPollingInterval(50*time.Millisecond),
		chromedp.WithPollingTimeout(20*time.Second)))
	return err
}

func evaluate[T any](b *browser, js string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		b.t.Fatalf("evaluating %s: %v", js, err)
	}
	return v
}

// text is what the page shows, for a failure's message.
func (b *browser) text() string {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + '\n' + document.body.innerText`))
	if err != nil {
		return err.Error()
	}
	return s
}

func (b *browser) dialogCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.dialogs)
}

// confirmAndClick clicks the button labelled word, expects one confirm
// dialog and waits for the answer shown to begin with want.
func (b *browser) confirmAndClick(word, want string) {
	b.t.Helper()
	before := b.dialogCount()
	b.do(chromedp.Click(button(word)))
	b.until(word+"'s answer", fmt.Sprintf(`document.querySelector('#answer').textContent.startsWith(%s)`, jsString(want)))
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.dialogs) != before+1 || b.dialogs[before].Type != page.DialogTypeConfirm {
		b.t.Fatalf("%s opened %d dialogs, want one confirm: %+v", word, len(b.dialogs)-before, b.dialogs[before:])
	}
}

// noMarkupRan checks that no alert opened and no image was made: a value
// from the API shown as markup would have done both.
func (b *browser) noMarkupRan() {
	b.t.Helper()
	if n := evaluate[int](b, `document.querySelectorAll('img').length`); n != 0 {
		b.t.Fatalf("the page holds %d images: a value from the API was shown as markup", n)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, d := range b.dialogs {
		if d.Type != page.DialogTypeConfirm {
			b.t.Fatalf("a %s dialog opened: %q", d.Type, d.Message)
		}
	}
}

// shot writes a PNG of the page into $BRIDGE_CONSOLE_SHOTS, when set.
func (b *browser) shot(name string) {
	b.t.Helper()
	dir := os.Getenv("BRIDGE_CONSOLE_SHOTS")
	if dir == "" {
		return
	}
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// phoneShot is shot at a phone's width, the page as it is.
func (b *browser) phoneShot(name string) {
	b.t.Helper()
	if os.Getenv("BRIDGE_CONSOLE_SHOTS") == "" {
		return
	}
	b.do(chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateScale(2)))
	b.shot(name)
	b.do(chromedp.EmulateViewport(1280, 900))
}

// button is a search for the button whose text is word.
func button(word string) string { return fmt.Sprintf(`//button[text()=%q]`, word) }

func visible(css string) string {
	return fmt.Sprintf(`(() => { const e = document.querySelector(%s); return !!e && e.offsetParent !== null; })()`, jsString(css))
}

func hidden(css string) string { return "!" + visible(css) }

// row is the texts of the cells of the row of table whose link reads id,
// joined by " | ", or "" when the table has no such row.
func row(table, id string) string {
	return fmt.Sprintf(`(() => { const a = [...document.querySelectorAll('#%s tbody a')].find((a) => a.textContent === %s);
		return a ? [...a.closest('tr').cells].map((c) => c.textContent).join(' | ') : ''; })()`, table, jsString(id))
}

// attempt is the texts of the cells of attempt i in the registration's
// page, newest first, from trigger on.
func attempt(i int) string {
	return fmt.Sprintf(`(() => { const r = document.querySelectorAll('#attempts tbody tr')[%d];
		return r ? [...r.cells].slice(3).map((c) => c.textContent).join(' | ') : ''; })()`, i)
}

// config is the value shown for a member of the registration.
func config(name string) string {
	return fmt.Sprintf(`(() => { const dt = [...document.querySelectorAll('#reg-config dt')].find((e) => e.textContent === %s);
		return dt ? dt.nextElementSibling.textContent : ''; })()`, jsString(name))
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

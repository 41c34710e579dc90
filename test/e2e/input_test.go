package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// Hostile input: what callers send to the admin API and what publishers put
// on the journal. The bridge refuses the first with a 4xx that names the
// problem and stores nothing; the second it delivers exactly or parks with
// a reason, and it never falls over.

// wantRefusal checks an admin API error answer: the status, a code, and a
// message holding every fragment.
func wantRefusal(t *testing.T, code int, body []byte, status int, fragments ...string) adminError {
	t.Helper()
	var e adminError
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("status %d; the answer is not a JSON error: %v\n%s", code, err, body)
	}
	if code != status {
		t.Fatalf("status %d, want %d; message %q", code, status, e.Error.Message)
	}
	if e.Error.Code == "" || e.Error.Message == "" {
		t.Fatalf("error answer without a code or a message: %s", body)
	}
	for _, f := range fragments {
		if !strings.Contains(e.Error.Message, f) {
			t.Errorf("message %q does not name the problem (%q)", e.Error.Message, f)
		}
	}
	t.Logf("%d %s: %s", code, e.Error.Code, e.Error.Message)
	return e
}

// storedIDs lists every registration the bridge holds.
func storedIDs(t *testing.T, d *daemon) []string {
	t.Helper()
	code, body := callAdmin(t, d, "GET", "/v1/registrations?limit=1000", nil)
	if code != http.StatusOK {
		t.Fatalf("list: %d %s", code, body)
	}
	var l struct {
		Registrations []regSnapshot `json:"registrations"`
	}
	if err := json.Unmarshal(body, &l); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range l.Registrations {
		ids = append(ids, r.ID)
	}
	return ids
}

// refusedA2AURLs are webhook URLs an A2A caller must not register, with a
// fragment the refusal must contain. The bridge runs without
// --a2a-allow-loopback and with no host grants, as in production.
var refusedA2AURLs = []struct{ url, why string }{
	// Private, loopback, link-local and other non-public IPv4.
	{"https://10.0.0.1/hook", "private-use"},
	{"https://172.16.0.1/hook", "private-use"},
	{"https://172.31.255.254/hook", "private-use"},
	{"https://192.168.1.1/hook", "private-use"},
	{"https://100.64.0.1/hook", "shared address space"},
	{"https://127.0.0.1/hook", "loopback"},
	{"https://127.255.255.254:8443/hook", "loopback"},
	{"https://0.0.0.0/hook", "this network"},
	{"https://169.254.1.1/hook", "link-local"},
	{"https://169.254.169.254/latest/meta-data/iam/security-credentials/", "link-local"},
	{"https://192.0.0.170/hook", "IETF protocol assignments"},
	{"https://192.0.2.1/hook", "documentation"},
	{"https://198.18.0.1/hook", "benchmarking"},
	{"https://224.0.0.1/hook", "multicast"},
	{"https://255.255.255.255/hook", "reserved"},
	// The names of loopback.
	{"https://localhost/hook", "loopback"},
	{"https://LOCALHOST/hook", "loopback"},
	// Refused as loopback where a name server answers for "localhost.",
	// as unresolvable where none does: either way the host is named.
	{"https://localhost./hook", `"localhost."`},
	// IPv4 in spellings other than a.b.c.d: each is refused as such.
	{"https://2130706433/hook", "non-canonical IPv4"},          // 127.0.0.1, decimal
	{"https://2852039166/hook", "non-canonical IPv4"},          // 169.254.169.254, decimal
	{"https://0x7f.0.0.1/hook", "non-canonical IPv4"},          // hex octet
	{"https://0x7f000001/hook", "non-canonical IPv4"},          // hex whole
	{"https://0xA9FEA9FE/hook", "non-canonical IPv4"},          // metadata, hex whole
	{"https://0177.0.0.1/hook", "non-canonical IPv4"},          // octal octet
	{"https://017700000001/hook", "non-canonical IPv4"},        // octal whole
	{"https://0251.0376.0251.0376/hook", "non-canonical IPv4"}, // metadata, octal
	{"https://127.1/hook", "non-canonical IPv4"},               // two parts
	{"https://169.254.43518/hook", "non-canonical IPv4"},       // metadata, three parts
	{"https://127.000.000.001/hook", "non-canonical IPv4"},     // leading zeros
	{"https://127.0.0.1./hook", "non-canonical IPv4"},          // trailing dot
	{"https://0/hook", "non-canonical IPv4"},
	// IPv6 and IPv4 inside IPv6.
	{"https://[::1]/hook", "loopback"},
	{"https://[0:0:0:0:0:0:0:1]:8443/hook", "loopback"},
	{"https://[::]/hook", "unspecified"},
	{"https://[fe80::1]/hook", "link-local"},
	{"https://[fe80::1%25eth0]/hook", "link-local"},
	{"https://[fc00::1]/hook", "unique local"},
	{"https://[fd00:ec2::254]/latest/meta-data/", "unique local"}, // the IPv6 metadata endpoint
	{"https://[fec0::1]/hook", "site-local"},
	{"https://[ff02::1]/hook", "multicast"},
	{"https://[2001:db8::1]/hook", "documentation"},
	{"https://[::ffff:127.0.0.1]/hook", "loopback"},
	{"https://[::ffff:7f00:1]/hook", "loopback"},
	{"https://[::ffff:169.254.169.254]/hook", "link-local"},
	{"https://[::ffff:10.0.0.1]/hook", "private-use"},
	{"https://[::127.0.0.1]/hook", "not global unicast"},
	{"https://[64:ff9b::a9fe:a9fe]/hook", "NAT64"},
	{"https://[2002:a9fe:a9fe::1]/hook", "6to4"},
	{"https://[zz::1]/hook", "not a valid URL"},
	{"https://[::1/hook", "not a valid URL"},
	// Userinfo: refused, and the password never repeated.
	{"https://user:hunter2@8.8.8.8/hook", "userinfo"},
	{"https://8.8.8.8:hunter2@127.0.0.1/hook", "userinfo"},
	{"https://@8.8.8.8/hook", "userinfo"},
	{"https://127.0.0.1%2f:hunter2@8.8.8.8/hook", "userinfo"},
	// Schemes, shapes and lengths.
	{"http://8.8.8.8/hook", "https"},
	{"http://127.0.0.1:8080/hook", "https"},
	{"ftp://8.8.8.8/hook", "scheme"},
	{"file:///etc/passwd", "scheme"},
	{"gopher://8.8.8.8:70/_hook", "scheme"},
	{"ws://8.8.8.8/hook", "scheme"},
	{"javascript:alert(1)", "absolute"},
	{"data:text/plain,hook", "absolute"},
	{"//8.8.8.8/hook", "absolute"},
	{"8.8.8.8/hook", "absolute"},
	{"https:8.8.8.8", "absolute"},
	{"https:///hook", "no host"},
	{"https://:443/hook", "no host"},
	{"https://8.8.8.8:0/hook", "between 1 and 65535"},
	{"https://8.8.8.8:99999/hook", "between 1 and 65535"},
	{"https://exämple.com/hook", "ASCII"},
	{"https://١٢٧.٠.٠.١/hook", "ASCII"},
	{"https://8.8.8.8/hook\x00", "not a valid URL"},
	{"https://8.8.8.8/hook\n", "not a valid URL"},
	{" https://8.8.8.8/hook", "not a valid URL"},
	{"https://8.8.8.8\\@127.0.0.1/hook", "not a valid URL"},
	{"https://8.8.8.8/" + strings.Repeat("a", 2100), "2048"},
	{"", "url is required"},
	// A name that does not resolve.
	{"https://no-such-host.invalid/hook", "does not resolve"},
}

// Every refused A2A URL is a 400 that names the problem, and none of them
// is stored; a public address in the same body is accepted, so it is the
// URL that is refused.
func TestRefusedA2AURLs(t *testing.T) {
	noLeaks(t)
	d := newDaemon(t)
	d.start()
	if len(refusedA2AURLs) < 40 {
		t.Fatalf("only %d cases", len(refusedA2AURLs))
	}
	enrol(t, d, map[string]any{"id": "control", "namespace": "a2a", "taskId": "t-1", "url": "https://8.8.8.8/hook"})
	for i, c := range refusedA2AURLs {
		name := c.url
		if len(name) > 64 {
			name = name[:64] + "…"
		}
		t.Run(name, func(t *testing.T) {
			body := mustJSON(t, map[string]any{"id": "refused-" + strconv.Itoa(i), "namespace": "a2a", "taskId": "t-1", "url": c.url})
			code, answer := callAdmin(t, d, "POST", "/v1/registrations", body)
			e := wantRefusal(t, code, answer, http.StatusBadRequest, c.why)
			if e.Error.Code != "invalid_argument" {
				t.Errorf("%q: code %q, want invalid_argument", c.url, e.Error.Code)
			}
			if strings.Contains(e.Error.Message, "hunter2") {
				t.Errorf("%q: the refusal repeats the password: %q", c.url, e.Error.Message)
			}
		})
	}
	// Bodies that say the url twice: the guard judges the value stored,
	// and a key spelt in another case is refused as such, so no spelling
	// carries a private address past the guard.
	for i, c := range []struct{ body, names string }{
		{`{"namespace":"a2a","taskId":"t-1","url":"https://8.8.8.8/hook","url":"https://169.254.169.254/"}`, "private address"},
		{`{"namespace":"a2a","taskId":"t-1","url":"https://8.8.8.8/hook","URL":"https://127.0.0.1/"}`, `unknown field "URL"`},
		{`{"namespace":"a2a","taskId":"t-1","url":"https://8.8.8.8/hook","Url":"https://[::1]/"}`, `unknown field "Url"`},
	} {
		t.Run("twice-"+strconv.Itoa(i), func(t *testing.T) {
			code, answer := callAdmin(t, d, "POST", "/v1/registrations", []byte(c.body))
			wantRefusal(t, code, answer, http.StatusBadRequest, c.names)
		})
	}
	if ids := storedIDs(t, d); len(ids) != 1 || ids[0] != "control" {
		t.Fatalf("stored after the refusals: %q, want only the control", ids)
	}
	bridgeAlive(t, d)
}

// malformedRequests are create bodies that are not a valid registration,
// each with the status and a fragment of the message that must name the
// problem. ok is the rest of a valid outbox registration.
func malformedRequests() []struct {
	name   string
	body   string
	status int
	why    string
} {
	const ok = `"namespace":"outbox","subject":"journal.orders.>","url":"http://127.0.0.1:9/hook"`
	nested := strings.Repeat("[", 20000) + strings.Repeat("]", 20000)
	return []struct {
		name   string
		body   string
		status int
		why    string
	}{
		// Malformed JSON.
		{"empty", ``, 400, "empty"},
		{"whitespace", " \n\t ", 400, "empty"},
		{"not JSON", `namespace=outbox`, 400, "not valid JSON"},
		{"truncated", `{"namespace":"outbox","subject":"journal.>"`, 400, "truncated"},
		{"trailing comma", `{` + ok + `,}`, 400, "not valid JSON"},
		{"single quotes", `{'namespace':'outbox'}`, 400, "not valid JSON"},
		{"byte order mark", "\xef\xbb\xbf{" + ok + "}", 400, "not valid JSON"},
		{"array", `[{` + ok + `}]`, 400, "JSON object"},
		{"string", `"outbox"`, 400, "JSON object"},
		{"number", `42`, 400, "JSON object"},
		{"two objects", `{` + ok + `}{` + ok + `}`, 400, "after the JSON object"},
		{"deeply nested", `{` + ok + `,"start":` + nested + `}`, 400, "JSON"},
		// Unknown fields, at the top and nested.
		{"unknown field", `{` + ok + `,"webhookUrl":"http://127.0.0.1:9/"}`, 400, "unknown field"},
		{"unknown in authentication", `{` + ok + `,"authentication":{"scheme":"Bearer","credentials":"c","realm":"x"}}`, 400, "unknown field"},
		{"unknown in batch", `{` + ok + `,"batch":{"maxEvents":10,"maxAge":"1s"}}`, 400, "unknown field"},
		{"unknown in start", `{` + ok + `,"start":{"seq":1,"from":"end"}}`, 400, "unknown field"},
		// Invalid ids.
		{"id with space", `{` + ok + `,"id":"a b"}`, 400, "id"},
		{"id with slash", `{` + ok + `,"id":"a/b"}`, 400, "id"},
		{"id traversal", `{` + ok + `,"id":"../../etc"}`, 400, "id"},
		{"id dot dot", `{` + ok + `,"id":".."}`, 400, "id"},
		{"id percent", `{` + ok + `,"id":"a%2fb"}`, 400, "id"},
		{"id non-ASCII", `{` + ok + `,"id":"caf\u00e9"}`, 400, "id"},
		{"id NUL", `{` + ok + `,"id":"a\u0000b"}`, 400, "id"},
		{"id too long", `{` + ok + `,"id":"` + strings.Repeat("x", 129) + `"}`, 400, "128"},
		// Invalid subject filters.
		{"no subject", `{"namespace":"outbox","url":"http://127.0.0.1:9/"}`, 400, "subject"},
		{"empty token", `{"namespace":"outbox","subject":"journal..x","url":"http://127.0.0.1:9/"}`, 400, "subject"},
		{"leading dot", `{"namespace":"outbox","subject":".journal","url":"http://127.0.0.1:9/"}`, 400, "subject"},
		{"trailing dot", `{"namespace":"outbox","subject":"journal.","url":"http://127.0.0.1:9/"}`, 400, "subject"},
		{"> not last", `{"namespace":"outbox","subject":"journal.>.x","url":"http://127.0.0.1:9/"}`, 400, "subject"},
		{"partial wildcard", `{"namespace":"outbox","subject":"journal.or*","url":"http://127.0.0.1:9/"}`, 400, "subject"},
		{"space", `{"namespace":"outbox","subject":"journal.a b","url":"http://127.0.0.1:9/"}`, 400, "subject"},
		{"tab", `{"namespace":"outbox","subject":"journal.\t","url":"http://127.0.0.1:9/"}`, 400, "subject"},
		{"NUL", `{"namespace":"outbox","subject":"journal.\u0000","url":"http://127.0.0.1:9/"}`, 400, "subject"},
		{"a2a task with dot", `{"namespace":"a2a","taskId":"t.1","url":"https://8.8.8.8/"}`, 400, "taskId"},
		{"a2a task wildcard", `{"namespace":"a2a","taskId":">","url":"https://8.8.8.8/"}`, 400, "taskId"},
		// Wrong types.
		{"id number", `{` + ok + `,"id":5}`, 400, "id"},
		{"namespace bool", `{"namespace":true,"subject":"journal.>","url":"http://127.0.0.1:9/"}`, 400, "namespace"},
		{"url array", `{"namespace":"outbox","subject":"journal.>","url":["http://127.0.0.1:9/"]}`, 400, "url"},
		{"subject object", `{"namespace":"outbox","subject":{},"url":"http://127.0.0.1:9/"}`, 400, "subject"},
		{"format number", `{` + ok + `,"format":1}`, 400, "format"},
		{"secret number", `{` + ok + `,"secret":12345}`, 400, "secret"},
		{"authentication string", `{` + ok + `,"authentication":"Bearer abc"}`, 400, "authentication"},
		{"credentials number", `{` + ok + `,"authentication":{"scheme":"Bearer","credentials":5}}`, 400, "credentials"},
		{"batch string", `{` + ok + `,"batch":"big"}`, 400, "batch"},
		{"maxEvents string", `{` + ok + `,"batch":{"maxEvents":"10"}}`, 400, "maxEvents"},
		{"maxEvents fraction", `{` + ok + `,"batch":{"maxEvents":1.5}}`, 400, "maxEvents"},
		{"maxEvents huge", `{` + ok + `,"batch":{"maxEvents":1e300}}`, 400, "maxEvents"},
		{"start number", `{` + ok + `,"start":5}`, 400, "start"},
		{"start array", `{` + ok + `,"start":["new"]}`, 400, "start"},
		{"start seq string", `{` + ok + `,"start":{"seq":"1"}}`, 400, "seq"},
		{"start seq negative", `{` + ok + `,"start":{"seq":-1}}`, 400, "seq"},
		// Values of the right type that mean nothing.
		{"namespace unknown", `{"namespace":"inbox","subject":"journal.>","url":"http://127.0.0.1:9/"}`, 400, "namespace"},
		{"format unknown", `{` + ok + `,"format":"xml"}`, 400, "format"},
		{"content type", `{` + ok + `,"dataContentType":"not a media type"}`, 400, "dataContentType"},
		{"secret short", `{` + ok + `,"secret":"whsec_c2hvcnQ="}`, 400, "secret"},
		{"secret no prefix", `{` + ok + `,"secret":"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}`, 400, "secret"},
		{"auth scheme", `{` + ok + `,"authentication":{"scheme":"Bear er","credentials":"c"}}`, 400, "scheme"},
		{"auth CRLF", `{` + ok + `,"authentication":{"scheme":"Bearer","credentials":"c\r\nX-Admin: 1"}}`, 400, "credentials"},
		{"maxEvents zero", `{` + ok + `,"batch":{"maxEvents":0}}`, 400, "maxEvents"},
		{"maxDelay", `{` + ok + `,"batch":{"maxDelay":"soon"}}`, 400, "maxDelay"},
		{"start word", `{` + ok + `,"start":"newest"}`, 400, "start"},
		{"start seq zero", `{` + ok + `,"start":{"seq":0}}`, 400, "seq"},
		{"start past end", `{` + ok + `,"start":{"seq":999999}}`, 400, "past the end"},
		{"start time", `{` + ok + `,"start":{"time":"yesterday"}}`, 400, "time"},
		{"start both", `{` + ok + `,"start":{"seq":1,"time":"2026-01-01T00:00:00Z"}}`, 400, "exactly one"},
		{"outbox task", `{` + ok + `,"taskId":"t-1"}`, 400, "taskId"},
		{"outbox token", `{` + ok + `,"token":"tok"}`, 400, "token"},
		{"a2a batch", `{"namespace":"a2a","taskId":"t-1","url":"https://8.8.8.8/","batch":{"maxEvents":1}}`, 400, "batch"},
		{"a2a token CR", `{"namespace":"a2a","taskId":"t-1","url":"https://8.8.8.8/","token":"a\rb"}`, 400, "token"},
		// Too big: 413 whatever the body holds.
		{"over 1 MiB of JSON", `{` + ok + `,"dataContentType":"text/plain; x=` + strings.Repeat("a", 1<<20) + `"}`, 413, "exceeds"},
		{"over 1 MiB of space", strings.Repeat(" ", 1<<20+1), 413, "exceeds"},
	}
}

// Malformed, unknown, mistyped and oversized create requests: each a 4xx
// that names the problem, and nothing stored.
func TestMalformedCreateRequests(t *testing.T) {
	noLeaks(t)
	d := newDaemon(t)
	d.start()
	for _, c := range malformedRequests() {
		t.Run(c.name, func(t *testing.T) {
			code, answer := callAdmin(t, d, "POST", "/v1/registrations", []byte(c.body))
			wantRefusal(t, code, answer, c.status, c.why)
		})
	}
	if ids := storedIDs(t, d); len(ids) != 0 {
		t.Fatalf("stored after the refusals: %q, want nothing", ids)
	}
	bridgeAlive(t, d)
}

// JSON allows only space, tab, CR and LF around a value; a body followed
// by other Unicode spaces has data after the JSON object.
func TestCreateRefusesTrailingUnicodeSpace(t *testing.T) {
	noLeaks(t)
	d := newDaemon(t)
	d.start()
	for _, space := range []string{"\u00a0", "\u0085", "\u2028", "\u3000"} {
		body := `{"namespace":"outbox","subject":"journal.>","url":"http://127.0.0.1:9/hook"}` + space
		code, answer := callAdmin(t, d, "POST", "/v1/registrations", []byte(body))
		wantRefusal(t, code, answer, http.StatusBadRequest, "after the JSON object")
	}
	if ids := storedIDs(t, d); len(ids) != 0 {
		t.Fatalf("stored: %q, want nothing", ids)
	}
}

// wholeRecorder is a receiver keeping every request whole.
type wholeRecorder struct {
	*httptest.Server
	mu   sync.Mutex
	reqs map[string][]received // by path
}

func newWholeRecorder(t *testing.T) *wholeRecorder {
	r := &wholeRecorder{reqs: map[string][]received{}}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.reqs[req.URL.Path] = append(r.reqs[req.URL.Path], received{header: req.Header.Clone(), body: string(b)})
		r.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *wholeRecorder) at(path string) []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.reqs[path]...)
}

// publishMsg publishes a whole message, headers included, and returns its
// stream sequence.
func publishMsg(t *testing.T, p *publisher, m *nats.Msg) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ack, err := p.js.PublishMsg(ctx, m)
	if err != nil {
		t.Fatalf("publish %s (%d bytes): %v", m.Subject, len(m.Data), err)
	}
	return ack.Sequence
}

// A2A journal messages that are not a valid StreamResponse for the task:
// the one before is delivered, the registration parks with a lastError
// naming the sequence, nothing after it overtakes it, and rewinding past
// it and unparking delivers the next.
func TestInvalidA2AMessagesPark(t *testing.T) {
	noLeaks(t)
	d := newDaemon(t, "--a2a-allow-loopback")
	d.start()
	pub := newPublisher(t, "nats://"+d.natsAddr)
	rec := newWholeRecorder(t)
	status := func(task, state string) string {
		return `{"statusUpdate":{"taskId":"` + task + `","contextId":"c-1","status":{"state":"` + state + `"}}}`
	}
	bad := []struct{ name, data string }{
		{"text", "this is not JSON"},
		{"empty", ""},
		{"binary", "\xff\xfe\x00\x01binary"},
		{"truncated", `{"statusUpdate":{"taskId":`},
		{"empty array", `[]`},
		{"empty object", `{}`},
		{"null", `null`},
		{"number", `42`},
		{"unknown kind", `{"notification":{"taskId":"x"}}`},
		{"two kinds", `{"statusUpdate":{"taskId":"T","contextId":"c","status":{"state":"TASK_STATE_WORKING"}},"task":{"id":"T","contextId":"c","status":{"state":"TASK_STATE_WORKING"}}}`},
		{"unknown state", `{"statusUpdate":{"taskId":"T","contextId":"c","status":{"state":"TASK_STATE_BORED"}}}`},
		{"status a string", `{"statusUpdate":{"taskId":"T","contextId":"c","status":"working"}}`},
		{"no context", `{"statusUpdate":{"taskId":"T","status":{"state":"TASK_STATE_WORKING"}}}`},
		{"another task", status("someone-else", "TASK_STATE_COMPLETED")},
		{"bad element", `[` + status("T", "TASK_STATE_WORKING") + `,{"artifactUpdate":7}]`},
		{"deeper than any decoder goes", strings.Repeat(`{"task":`, 20000) + `1` + strings.Repeat(`}`, 20000)},
	}
	type tc struct {
		id, task, path string
		badSeq         uint64
	}
	var cases []tc
	for i, b := range bad {
		c := tc{id: fmt.Sprintf("a2a-%d", i), task: fmt.Sprintf("task-%d", i), path: fmt.Sprintf("/push/%d", i)}
		enrol(t, d, map[string]any{"id": c.id, "namespace": "a2a", "taskId": c.task, "url": rec.URL + c.path})
		subject := "journal.a2a." + c.task
		pub.publish(t, subject, status(c.task, "TASK_STATE_WORKING"))
		c.badSeq = publishMsg(t, pub, &nats.Msg{Subject: subject, Data: []byte(strings.ReplaceAll(b.data, `"T"`, `"`+c.task+`"`))})
		pub.publish(t, subject, status(c.task, "TASK_STATE_COMPLETED"))
		cases = append(cases, c)
	}
	for i, c := range cases {
		s := waitSnapshot(t, d, c.id, "parked on the "+bad[i].name+" message", isParked)
		if want := strconv.FormatUint(c.badSeq, 10); !strings.Contains(s.LastError, want) {
			t.Errorf("%s (%s): lastError %q does not name sequence %s", c.id, bad[i].name, s.LastError, want)
		}
		t.Logf("%s: %s", bad[i].name, s.LastError)
		if s.NextSeq != c.badSeq {
			t.Errorf("%s (%s): parked at nextSeq %d, want the invalid message %d", c.id, bad[i].name, s.NextSeq, c.badSeq)
		}
		if got := rec.at(c.path); len(got) != 1 || !strings.Contains(got[0].body, "TASK_STATE_WORKING") {
			t.Errorf("%s (%s): the receiver got %d requests, want only the message before the invalid one", c.id, bad[i].name, len(got))
		}
	}
	for i, c := range cases {
		code, body := callAdmin(t, d, "POST", "/v1/registrations/"+c.id+"/rewind", mustJSON(t, map[string]any{"seq": c.badSeq + 1}))
		if code != http.StatusOK {
			t.Fatalf("rewind %s: %d %s", c.id, code, body)
		}
		if code, body := callAdmin(t, d, "POST", "/v1/registrations/"+c.id+"/unpark", nil); code != http.StatusOK {
			t.Fatalf("unpark %s: %d %s", c.id, code, body)
		}
		waitSnapshot(t, d, c.id, "completed after skipping the "+bad[i].name+" message", func(s regSnapshot) bool { return s.State == "completed" })
		if got := rec.at(c.path); len(got) != 2 || !strings.Contains(got[1].body, "TASK_STATE_COMPLETED") {
			t.Errorf("%s: the receiver got %d requests, want the message after the skipped one last", c.id, len(got))
		}
	}
	bridgeAlive(t, d)
}

// Outbox payloads are bytes: binary, empty and near the server's 1 MiB
// limit, each arrives byte-exact in binary mode and decodes byte-exact
// from structured mode.
func TestOutboxPayloadsArriveByteExact(t *testing.T) {
	noLeaks(t)
	d := newDaemon(t)
	d.start()
	pub := newPublisher(t, "nats://"+d.natsAddr)
	rec := newWholeRecorder(t)
	enrol(t, d, map[string]any{"id": "bin", "namespace": "outbox", "subject": "journal.bytes", "url": rec.URL + "/binary"})
	enrol(t, d, map[string]any{"id": "structured", "namespace": "outbox", "subject": "journal.bytes", "url": rec.URL + "/structured", "format": "structured"})

	every := make([]byte, 256)
	for i := range every {
		every[i] = byte(i)
	}
	max := int(pub.nc.MaxPayload())
	near := make([]byte, max) // the largest message the server takes
	rng := rand.NewChaCha8([32]byte{1})
	_, _ = rng.Read(near)
	payloads := [][]byte{
		every,
		{},
		{0},
		bytes.Repeat([]byte{0}, 1000),
		[]byte("\xff\xfe\xfd not UTF-8 \xc3\x28"),
		[]byte("{\"looks\": \"like JSON\"}"),
		[]byte("\x1b[2J\x1b[31mterminal escapes\r\n"),
		near,
	}
	for _, p := range payloads {
		publishMsg(t, pub, &nats.Msg{Subject: "journal.bytes", Data: p})
	}
	waitFor(t, 60*time.Second, "every payload in both modes", func() bool {
		return len(rec.at("/binary")) >= len(payloads) && len(rec.at("/structured")) >= len(payloads)
	})
	sum := func(b []byte) string { return fmt.Sprintf("%d bytes, sha256 %x", len(b), sha256.Sum256(b)) }
	for i, r := range rec.at("/binary")[:len(payloads)] {
		if r.body != string(payloads[i]) {
			t.Errorf("binary mode, payload %d: got %s, want %s", i, sum([]byte(r.body)), sum(payloads[i]))
		}
		if ct := r.header.Get("Content-Type"); ct != "application/octet-stream" {
			t.Errorf("binary mode, payload %d: Content-Type %q", i, ct)
		}
	}
	for i, r := range rec.at("/structured")[:len(payloads)] {
		var ev struct {
			Data       json.RawMessage `json:"data"`
			DataBase64 string          `json:"data_base64"`
		}
		if err := json.Unmarshal([]byte(r.body), &ev); err != nil {
			t.Errorf("structured mode, payload %d: not JSON: %v", i, err)
			continue
		}
		got := []byte(ev.Data)
		if ev.Data == nil {
			var err error
			if got, err = base64.StdEncoding.DecodeString(ev.DataBase64); err != nil {
				t.Errorf("structured mode, payload %d: data_base64: %v", i, err)
				continue
			}
		}
		if !bytes.Equal(got, payloads[i]) {
			t.Errorf("structured mode, payload %d: got %s, want %s", i, sum(got), sum(payloads[i]))
		}
	}
	t.Logf("largest payload %d bytes (server max_payload %d): delivered whole in both modes", len(near), max)
	bridgeAlive(t, d)
}

// Journal messages whose headers hold control characters, invalid UTF-8
// or a line break: each is delivered with clean HTTP headers or parks with
// a lastError naming its sequence; the bridge stays up throughout.
func TestHostileHeadersOnOutbox(t *testing.T) {
	noLeaks(t)
	d := newDaemon(t, "--max-attempts", "3")
	d.start()
	pub := newPublisher(t, "nats://"+d.natsAddr)
	rec := newWholeRecorder(t)
	ce := func(extra ...string) nats.Header {
		h := nats.Header{"ce-specversion": {"1.0"}, "ce-id": {"e-1"}, "ce-source": {"/test"}, "ce-type": {"t"}}
		for i := 0; i+1 < len(extra); i += 2 {
			h.Set(extra[i], extra[i+1])
		}
		return h
	}
	cases := []struct {
		name   string
		header nats.Header
	}{
		{"content type SOH", nats.Header{"Content-Type": {"text/plain\x01"}}},
		{"content type DEL", nats.Header{"Content-Type": {"text/plain\x7f"}}},
		{"content type not UTF-8", nats.Header{"Content-Type": {"text/\xff\xfe"}}},
		{"content type NUL", nats.Header{"Content-Type": {"text/plain\x00; charset=utf-8"}}},
		{"content type tab", nats.Header{"Content-Type": {"text/plain;\tcharset=utf-8"}}},
		{"msg id NUL", nats.Header{"Nats-Msg-Id": {"id\x00-1"}}},
		{"msg id escape", nats.Header{"Nats-Msg-Id": {"id-\x1b[31m"}}},
		{"ce-type escape", nats.Header{"ce-type": {"evil\x1b]0;pwned\x07"}}},
		{"binary CE id SOH", ce("ce-id", "e\x01")},
		{"binary CE extension STX", ce("ce-myext", "a\x02b")},
		{"binary CE not UTF-8", ce("ce-subject", "\xc3\x28")},
		{"unmapped header", nats.Header{"X-Custom": {"\x01\x02\x03"}}},
		// NATS itself refuses a header name with a control character, and
		// stores line breaks in a value as spaces; these reach the bridge
		// as such.
		{"line break in value", nats.Header{"Content-Type": {"text/plain\r\nX-Injected: 1"}}},
		{"bare LF in value", nats.Header{"ce-type": {"a\nb"}}},
	}
	seqs := make([]uint64, len(cases))
	for i, c := range cases {
		subject := fmt.Sprintf("journal.hdr.%d", i)
		enrol(t, d, map[string]any{"id": fmt.Sprintf("hdr-%d", i), "namespace": "outbox", "subject": subject, "url": rec.URL + fmt.Sprintf("/hdr/%d", i)})
		seqs[i] = publishMsg(t, pub, &nats.Msg{Subject: subject, Header: c.header, Data: []byte("payload")})
	}
	for i, c := range cases {
		id := fmt.Sprintf("hdr-%d", i)
		s := waitSnapshot(t, d, id, "delivered or parked", func(s regSnapshot) bool { return s.Delivered > 0 || s.State == "parked" })
		switch {
		case s.Delivered > 0:
			for _, r := range rec.at(fmt.Sprintf("/hdr/%d", i)) {
				for k, vs := range r.header {
					for _, v := range vs {
						if strings.ContainsFunc(v, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }) {
							t.Errorf("%s: delivered with header %s: %q holding control characters", c.name, k, v)
						}
					}
				}
				if r.header.Get("X-Injected") != "" {
					t.Errorf("%s: a header was injected into the POST", c.name)
				}
			}
			t.Logf("%s: delivered", c.name)
		default:
			if want := strconv.FormatUint(seqs[i], 10); !strings.Contains(s.LastError, "journal message "+want) {
				t.Errorf("%s: parked with lastError %q, want a reason naming journal message %s", c.name, s.LastError, want)
			}
			if s.Attempts != 1 {
				t.Errorf("%s: parked after %d attempts; a message that can never be sent parks at once", c.name, s.Attempts)
			}
			t.Logf("%s: parked: %s", c.name, s.LastError)
		}
	}
	bridgeAlive(t, d)
	// And it still delivers.
	enrol(t, d, map[string]any{"id": "after", "namespace": "outbox", "subject": "journal.after", "url": rec.URL + "/after"})
	pub.publish(t, "journal.after", "still here")
	waitFor(t, 15*time.Second, "a delivery after the hostile headers", func() bool { return len(rec.at("/after")) == 1 })
}

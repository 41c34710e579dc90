package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jetstream-bridge/bridge/internal/testutil"
)

// startListen runs "bridge listen" until the test ends and returns its
// URL and its output.
func startListen(t *testing.T, args ...string) (string, *testutil.SyncBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out, errOut := &testutil.SyncBuffer{}, &testutil.SyncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- dispatch(ctx, append([]string{"listen", "--addr", "127.0.0.1:0"}, args...), streams{out: out, errOut: errOut})
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("listen exited %d: %s", code, errOut)
		}
	})
	re := regexp.MustCompile(`listening on (http://\S+)`)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			return m[1], out
		}
		select {
		case code := <-done:
			t.Fatalf("listen exited %d before listening: %s", code, errOut)
		default:
		}
	}
	t.Fatal("listen did not say where it listens")
	return "", nil
}

// signByHand is the Standard Webhooks signature, computed here by hand so the
// test does not trust the code it checks.
func signByHand(t *testing.T, key64, id string, ts int64, body string) string {
	t.Helper()
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(key64, "whsec_"))
	if err != nil {
		t.Fatal(err)
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + strconv.FormatInt(ts, 10) + "." + body))
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

func postDelivery(t *testing.T, url string, header map[string]string, body string) int {
	t.Helper()
	req, err := http.NewRequest("POST", url+"/hook", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Close = true // no idle connection outlives the test
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

func TestListenVerifiesSignatures(t *testing.T) {
	url, out := startListen(t, "--secret", testSecret, "--status", "202")
	ts := time.Now().Unix()
	body := `{"order":1}`
	good := map[string]string{
		"webhook-id":        "JOURNAL-7",
		"webhook-timestamp": strconv.FormatInt(ts, 10),
		"webhook-signature": "v1," + base64.StdEncoding.EncodeToString(make([]byte, 32)) + " " + signByHand(t, testSecret, "JOURNAL-7", ts, body),
		"ce-type":           "io.nats.jetstream.message",
		"ce-subject":        "journal.orders.1",
		"Content-Type":      "application/json",
	}
	if status := postDelivery(t, url, good, body); status != 202 {
		t.Errorf("listen answered %d, want --status 202", status)
	}
	bad := map[string]string{
		"webhook-id":        "JOURNAL-8",
		"webhook-timestamp": strconv.FormatInt(ts, 10),
		"webhook-signature": signByHand(t, testSecret, "JOURNAL-8", ts, body+"tampered"),
	}
	postDelivery(t, url, bad, body)
	postDelivery(t, url, map[string]string{"webhook-id": "JOURNAL-9", "Content-Type": "text/plain"}, "no signature here")
	a2a := `{"statusUpdate":{"taskId":"task-42","contextId":"c","status":{"state":"TASK_STATE_COMPLETED"}}}`
	postDelivery(t, url, map[string]string{"webhook-id": "JOURNAL-10-0", "Content-Type": "application/a2a+json"}, a2a)

	waitFor(t, out, "JOURNAL-10-0")
	lines := strings.Split(out.String(), "\n")
	want := map[string][]string{
		"webhook-id=JOURNAL-7":    {"POST /hook", "ce-type=io.nats.jetstream.message", "ce-subject=journal.orders.1", "signature=ok"},
		"webhook-id=JOURNAL-8":    {"signature=FAILED"},
		"webhook-id=JOURNAL-9":    {"signature=unsigned", "content-type=text/plain"},
		"webhook-id=JOURNAL-10-0": {"a2a=statusUpdate", "taskId=task-42", "state=TASK_STATE_COMPLETED"},
	}
	for id, frags := range want {
		i := indexOfLine(lines, id)
		if i < 0 || i+1 >= len(lines) {
			t.Errorf("no delivery line for %s in\n%s", id, out)
			continue
		}
		for _, f := range frags {
			if !strings.Contains(lines[i], f) {
				t.Errorf("line %q lacks %q", lines[i], f)
			}
		}
	}
	if i := indexOfLine(lines, "webhook-id=JOURNAL-7"); lines[i+1] != `    {"order":1}` {
		t.Errorf("body preview %q, want the body", lines[i+1])
	}
}

func TestListenPreviewIsShort(t *testing.T) {
	url, out := startListen(t)
	postDelivery(t, url, map[string]string{"webhook-id": "long"}, strings.Repeat("x", 1000))
	waitFor(t, out, "webhook-id=long")
	lines := strings.Split(out.String(), "\n")
	preview := strings.TrimSpace(lines[indexOfLine(lines, "webhook-id=long")+1])
	if n := len([]rune(preview)); n != previewRunes {
		t.Errorf("preview is %d characters, want %d", n, previewRunes)
	}
}

func indexOfLine(lines []string, frag string) int {
	for i, l := range lines {
		if strings.Contains(l, frag) {
			return i
		}
	}
	return -1
}

// waitFor waits until out has a delivery line and its preview for frag.
func waitFor(t *testing.T, out *testutil.SyncBuffer, frag string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		lines := strings.Split(out.String(), "\n")
		if i := indexOfLine(lines, frag); i >= 0 && i+2 < len(lines) {
			return
		}
	}
	t.Fatalf("no delivery %s in\n%s", frag, out)
}

package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/jetstream-bridge/bridge/attempt"
	"github.com/jetstream-bridge/bridge/cursor"
)

// fakeLog answers reads from a fixed list and resends from a table.
type fakeLog struct {
	byReg  []attempt.Attempt
	next   uint64
	asked  []string
	resent map[uint64]error
}

func (f *fakeLog) Registration(_ context.Context, id string, limit int, before uint64) ([]attempt.Attempt, uint64, error) {
	f.asked = append(f.asked, fmt.Sprintf("%s limit=%d before=%d", id, limit, before))
	return f.byReg, f.next, nil
}

func (f *fakeLog) Sequence(_ context.Context, seq uint64) ([]attempt.Attempt, error) {
	return f.byReg, nil
}

func (f *fakeLog) Resend(_ context.Context, id string, seq uint64) ([]attempt.Attempt, error) {
	if err := f.resent[seq]; err != nil {
		return nil, err
	}
	if id == "nobody" {
		return nil, cursor.ErrNotFound
	}
	n := int(seq % 3)
	out := make([]attempt.Attempt, 0, n)
	for i := range n {
		out = append(out, attempt.Attempt{Registration: id, Seq: seq, Index: i, Attempt: 2,
			Outcome: attempt.Outcome2xx, Status: http.StatusNoContent, Trigger: attempt.TriggerResend})
	}
	return out, nil
}

func TestAttemptRoutes(t *testing.T) {
	log := &fakeLog{byReg: []attempt.Attempt{{Registration: "a", Seq: 3, Attempt: 1,
		Outcome: attempt.Outcome5xx, Status: 503, Error: "503 Service Unavailable", Trigger: attempt.TriggerDelivery}}, next: 17,
		resent: map[uint64]error{
			9:  fmt.Errorf("%w: 9", attempt.ErrNoMessage),
			10: fmt.Errorf("%w: 10", attempt.ErrUnprojectable),
		}}
	h := newHarness(t, func(o *Options) { o.Attempts, o.Resender = log, log })
	h.create(`{"id":"a","namespace":"outbox","subject":"journal.>","url":"https://x.example/","start":"first"}`)

	res := h.do("GET", "/v1/registrations/a/attempts?limit=5&before=99", "")
	var page AttemptPage
	if err := json.Unmarshal(res.body, &page); res.status != 200 || err != nil || len(page.Attempts) != 1 || page.Next != "17" {
		t.Fatalf("attempts page = %d %s", res.status, res.body)
	}
	if log.asked[0] != "a limit=5 before=99" {
		t.Fatalf("the log was asked %v", log.asked)
	}
	h.do("GET", "/v1/registrations/a/attempts", "")
	if log.asked[1] != "a limit=100 before=0" {
		t.Fatalf("the default page was asked as %v", log.asked[1])
	}
	wantError(t, h.do("GET", "/v1/registrations/nobody/attempts", ""), 404, "not_found")
	for _, q := range []string{"limit=0", "limit=1001", "limit=x", "before=x"} {
		wantError(t, h.do("GET", "/v1/registrations/a/attempts?"+q, ""), 400, "invalid_argument")
	}
	if res := h.do("GET", "/v1/attempts?seq=3", ""); res.status != 200 || !json.Valid(res.body) {
		t.Fatalf("attempts by seq = %d %s", res.status, res.body)
	}
	for _, q := range []string{"", "?seq=", "?seq=x", "?seq=-1"} {
		wantError(t, h.do("GET", "/v1/attempts"+q, ""), 400, "invalid_argument", "seq")
	}

	one := h.do("POST", "/v1/registrations/a/resend", `{"seq":4}`)
	var a attempt.Attempt
	if err := json.Unmarshal(one.body, &a); one.status != 200 || err != nil || a.Seq != 4 || a.Trigger != "resend" {
		t.Fatalf("resend of one POST = %d %s", one.status, one.body)
	}
	several := h.do("POST", "/v1/registrations/a/resend", `{"seq":5}`)
	var list AttemptList
	if err := json.Unmarshal(several.body, &list); several.status != 200 || err != nil || len(list.Attempts) != 2 {
		t.Fatalf("resend of two POSTs = %d %s", several.status, several.body)
	}
	wantError(t, h.do("POST", "/v1/registrations/a/resend", `{"seq":9}`), 404, "not_found")
	wantError(t, h.do("POST", "/v1/registrations/a/resend", `{"seq":10}`), 422, "invalid_argument")
	wantError(t, h.do("POST", "/v1/registrations/nobody/resend", `{"seq":4}`), 404, "not_found")
	wantError(t, h.do("POST", "/v1/registrations/a/resend", `{}`), 400, "invalid_argument", "seq")
	wantError(t, h.do("POST", "/v1/registrations/a/resend", `{"seq":"4"}`), 400, "invalid_argument")
}

func TestAttemptRoutesWithTheLogOff(t *testing.T) {
	h := newHarness(t)
	h.create(`{"id":"a","namespace":"outbox","subject":"journal.>","url":"https://x.example/","start":"first"}`)
	for _, path := range []string{"/v1/registrations/a/attempts", "/v1/attempts?seq=1"} {
		res := h.do("GET", path, "")
		var m map[string]json.RawMessage
		if err := json.Unmarshal(res.body, &m); res.status != http.StatusOK || err != nil || string(m["attempts"]) != "[]" {
			t.Fatalf("%s with the log off = %d %s, want an empty list", path, res.status, res.body)
		}
	}
}

func TestLag(t *testing.T) {
	h := newHarness(t)
	r := h.create(`{"id":"a","namespace":"outbox","subject":"journal.>","url":"https://x.example/","start":"first"}`)
	if r.Lag != 41 {
		t.Fatalf("lag of a cursor at 1 with the stream at 41 = %d, want 41", r.Lag)
	}
	n := h.create(`{"id":"n","namespace":"outbox","subject":"journal.>","url":"https://x.example/","start":"new"}`)
	if n.Lag != 0 {
		t.Fatalf("lag of a new cursor = %d", n.Lag)
	}
	h.complete("a")
	if got := decodeView(t, h.do("GET", "/v1/registrations/a", "").body); got.Lag != 0 {
		t.Fatalf("lag of a completed registration = %d", got.Lag)
	}
}

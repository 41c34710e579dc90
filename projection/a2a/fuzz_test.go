package a2a_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/jetstream-bridge/bridge/projection"
	"github.com/jetstream-bridge/bridge/projection/a2a"
)

// FuzzProject checks that no journal message panics the projection, that
// every refusal names the record's sequence, and that what is sent is
// valid UTF-8 JSON in canonical form (projecting a sent body again gives
// the same body and the same terminal verdict) that a strict A2A 1.0
// reader accepts: whatever is sent, a receiver generated from a2a.proto
// reads.
func FuzzProject(f *testing.F) {
	f.Add([]byte(working), "t-1", uint64(17))
	f.Add([]byte("["+working+","+chunk+","+completed+"]"), "t-1", uint64(1))
	f.Add([]byte(`{"message":{"messageId":"m","taskId":"t-1","role":"ROLE_USER","parts":[{"raw":"AA=="},{"data":null}]}}`), "t-1", uint64(2))
	f.Add([]byte(`{"task":{"id":"t","contextId":"c","status":{"state":"TASK_STATE_FAILED"},"metadata":{}}}`), "t", uint64(1<<40))
	f.Add([]byte(`[{"statusUpdate":{"taskId":"x"}}]`), "t-1", uint64(0))
	f.Add([]byte(`{"statusUpdate":{"taskId":"t","contextId":"c","status":{"state":"TASK_STATE_WORKING","timestamp":"2024-03-15T20:30:00.5+02:00"},`+
		`"metadata":{"n":[1e308,-0.0,1E-400],"s":"\ud83d\ude00"}}}`), "t", uint64(3))
	f.Add([]byte(`{"artifactUpdate":{"taskId":"t","contextId":"c","lastChunk":true,"artifact":{"artifactId":"a","parts":[{"raw":"AAE_-w","mediaType":"m"}]}}}`), "t", uint64(4))

	p := a2a.New()
	strict := newStrictReader(f)
	f.Fuzz(func(t *testing.T, data []byte, taskID string, seq uint64) {
		target := projection.Target{ID: "push", TaskID: taskID}
		res, err := p.Project(target, &projection.Record{Stream: "JOURNAL", Seq: seq, Data: data})
		if err != nil {
			if !strings.Contains(err.Error(), "journal message "+strconv.FormatUint(seq, 10)) {
				t.Fatalf("error %q does not name sequence %d", err, seq)
			}
			return
		}
		if len(res.Messages) == 0 {
			t.Fatal("no error and no message")
		}
		for i, m := range res.Messages {
			if want := "JOURNAL-" + strconv.FormatUint(seq, 10) + "-" + strconv.Itoa(i); m.ID != want {
				t.Fatalf("message %d: ID %q, want %q", i, m.ID, want)
			}
			if !utf8.Valid(m.Body) || !json.Valid(m.Body) {
				t.Fatalf("message %d: body is not UTF-8 JSON: %q", i, m.Body)
			}
			if err := strict.read(m.Body); err != nil {
				t.Fatalf("message %d: a strict A2A 1.0 reader refuses it: %v\n%s", i, err, m.Body)
			}
			again, err := p.Project(target, &projection.Record{Stream: "JOURNAL", Seq: seq, Data: m.Body})
			if err != nil {
				t.Fatalf("message %d: its own body does not project again: %v\n%s", i, err, m.Body)
			}
			if string(again.Messages[0].Body) != string(m.Body) {
				t.Fatalf("message %d: not canonical:\n%s\n%s", i, m.Body, again.Messages[0].Body)
			}
		}
	})
}

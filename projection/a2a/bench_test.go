package a2a_test

import (
	"testing"

	"github.com/jetstream-bridge/bridge/projection"
	"github.com/jetstream-bridge/bridge/projection/a2a"
)

// BenchmarkProjectA2A projects a typical push: one status update with an
// agent message, as a journal array of one.
func BenchmarkProjectA2A(b *testing.B) {
	data := []byte(`[{"statusUpdate":{"taskId":"43667960-d455-4453-b0cf-1bae4955270d","contextId":"c295ea44-7543-4f78-b524-7a38915ad6e4",` +
		`"status":{"state":"TASK_STATE_WORKING","timestamp":"2024-03-15T18:30:00Z","message":{"messageId":"6dbc13b5-bd57-4c2b-b503-24e381b6c8d6",` +
		`"role":"ROLE_AGENT","parts":[{"text":"Generating the Q1 sales report, 40% done."}]}},"metadata":{"progress":0.4}}}]`)
	p := a2a.New()
	r := &projection.Record{Stream: "JOURNAL", Seq: 123456, Subject: "journal.a2a.43667960-d455-4453-b0cf-1bae4955270d", Data: data}
	t := projection.Target{ID: "push-1", TaskID: "43667960-d455-4453-b0cf-1bae4955270d"}
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := p.Project(t, r); err != nil {
			b.Fatal(err)
		}
	}
}

package a2a_test

import (
	"strings"
	"testing"

	"github.com/jetstream-bridge/bridge/projection"
	"github.com/jetstream-bridge/bridge/projection/a2a"
)

const (
	working   = `{"statusUpdate":{"taskId":"t-1","contextId":"c-1","status":{"state":"TASK_STATE_WORKING"}}}`
	completed = `{"statusUpdate":{"taskId":"t-1","contextId":"c-1","status":{"state":"TASK_STATE_COMPLETED"}}}`
	chunk     = `{"artifactUpdate":{"taskId":"t-1","contextId":"c-1","artifact":{"artifactId":"a-1","parts":[{"text":"x"}]}}}`
)

// project projects data as journal message 17 for task t-1 and fails t
// unless a strict A2A 1.0 reader accepts every message sent.
func project(t testing.TB, data string) (projection.Result, error) {
	t.Helper()
	r := &projection.Record{Stream: "JOURNAL", Seq: 17, Subject: "journal.a2a.t-1", Data: []byte(data)}
	res, err := a2a.New().Project(projection.Target{ID: "push-1", TaskID: "t-1"}, r)
	if err == nil {
		newStrictReader(t).conform(t, res)
	}
	return res, err
}

func TestArrayGivesMessagesInOrder(t *testing.T) {
	res, err := project(t, "["+working+","+chunk+","+chunk+","+completed+"]")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"JOURNAL-17-0", "JOURNAL-17-1", "JOURNAL-17-2", "JOURNAL-17-3"}
	if len(res.Messages) != len(want) {
		t.Fatalf("got %d messages, want %d", len(res.Messages), len(want))
	}
	for i, m := range res.Messages {
		if m.ID != want[i] {
			t.Errorf("message %d: ID %q, want %q", i, m.ID, want[i])
		}
	}
	if !strings.Contains(string(res.Messages[3].Body), "TASK_STATE_COMPLETED") || !res.Terminal {
		t.Errorf("last message %s, terminal %v; want the completed status and terminal", res.Messages[3].Body, res.Terminal)
	}
}

func TestTerminalStates(t *testing.T) {
	for state, terminal := range map[string]bool{
		"TASK_STATE_SUBMITTED": false, "TASK_STATE_WORKING": false,
		"TASK_STATE_INPUT_REQUIRED": false, "TASK_STATE_AUTH_REQUIRED": false,
		"TASK_STATE_COMPLETED": true, "TASK_STATE_FAILED": true,
		"TASK_STATE_CANCELED": true, "TASK_STATE_REJECTED": true,
	} {
		for _, ev := range []string{
			`{"statusUpdate":{"taskId":"t-1","contextId":"c-1","status":{"state":"` + state + `"}}}`,
			`{"task":{"id":"t-1","contextId":"c-1","status":{"state":"` + state + `"}}}`,
		} {
			res, err := project(t, ev)
			if err != nil {
				t.Fatalf("%s: %v", ev, err)
			}
			if res.Terminal != terminal {
				t.Errorf("%s: terminal %v, want %v", ev, res.Terminal, terminal)
			}
		}
	}
}

// Events after a terminal one in the same record are still sent, in order.
func TestEventsAfterTerminalAreSent(t *testing.T) {
	res, err := project(t, "["+completed+","+chunk+"]")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Messages) != 2 || !res.Terminal || !strings.Contains(string(res.Messages[1].Body), "artifactUpdate") {
		t.Errorf("got %d messages, terminal %v; want both events and terminal", len(res.Messages), res.Terminal)
	}
}

func TestDropsWhatA2ADoesNotDefine(t *testing.T) {
	res, err := project(t, `{"statusUpdate":{"taskId":"t-1","contextId":"c-1","kind":"status-update","final":true,`+
		`"status":{"state":"TASK_STATE_WORKING","extra":1},"metadata":null},"x-junk":{"a":1}}`)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"statusUpdate":{"taskId":"t-1","contextId":"c-1","status":{"state":"TASK_STATE_WORKING"}}}`
	if got := string(res.Messages[0].Body); got != want {
		t.Errorf("body %s\nwant %s", got, want)
	}
}

func TestKeepsMetadataAndPartsAsSent(t *testing.T) {
	ev := `{"message":{"messageId":"m","contextId":"c-1","taskId":"t-1","role":"ROLE_AGENT",` +
		`"parts":[{"data":[1,"<&>",{"k":null}],"mediaType":"application/json"},{"raw":"AAE_-w","filename":"a.bin"},{"text":""}],` +
		`"metadata":{"n":1.50,"s":"é"},"referenceTaskIds":["t-0"]}}`
	res, err := project(t, ev)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(res.Messages[0].Body); got != ev {
		t.Errorf("body %s\nwant %s", got, ev)
	}
}

func TestPermanentErrorsNameTheProblemAndSequence(t *testing.T) {
	tests := []struct{ name, data, want string }{
		{"not json", `{"statusUpdate":`, "journal message 17 is not JSON"},
		{"empty", ``, "journal message 17 is empty"},
		{"empty array", ` [ ] `, "journal message 17 is an empty array"},
		{"array of junk", `[1,`, "journal message 17 is not JSON"},
		{"no kind", `{"foo":{}}`, "event 0 of journal message 17 is not a valid StreamResponse: sets none of"},
		{"null event", `[` + working + `,null]`, "event 1 of journal message 17 is not a valid StreamResponse: sets none of"},
		{"two kinds", `{"task":{"id":"t-1","contextId":"c","status":{"state":"TASK_STATE_WORKING"}},"message":{"messageId":"m","taskId":"t-1","role":"ROLE_USER","parts":[{"text":"x"}]}}`, "sets 2 of"},
		{"wrong type", `{"statusUpdate":{"taskId":7}}`, "statusUpdate.taskId is a JSON number, want string"},
		{"status without taskId", `{"statusUpdate":{"contextId":"c","status":{"state":"TASK_STATE_WORKING"}}}`, "statusUpdate.taskId is missing"},
		{"status without contextId", `{"statusUpdate":{"taskId":"t-1","status":{"state":"TASK_STATE_WORKING"}}}`, "statusUpdate.contextId is missing"},
		{"status without status", `{"statusUpdate":{"taskId":"t-1","contextId":"c"}}`, "statusUpdate.status is missing"},
		{"0.3 state", `{"statusUpdate":{"taskId":"t-1","contextId":"c","status":{"state":"completed"}}}`, `statusUpdate.status.state "completed" is not a TASK_STATE_`},
		{"unspecified state", `{"task":{"id":"t-1","contextId":"c","status":{"state":"TASK_STATE_UNSPECIFIED"}}}`, `task.status.state "TASK_STATE_UNSPECIFIED"`},
		{"bad timestamp", `{"task":{"id":"t-1","contextId":"c","status":{"state":"TASK_STATE_WORKING","timestamp":"yesterday"}}}`, "task.status.timestamp"},
		{"task without id", `{"task":{"contextId":"c","status":{"state":"TASK_STATE_WORKING"}}}`, "task.id is missing"},
		{"task without contextId", `{"task":{"id":"t-1","status":{"state":"TASK_STATE_WORKING"}}}`, "task.contextId is missing"},
		{"artifact without id", `{"artifactUpdate":{"taskId":"t-1","contextId":"c","artifact":{"parts":[{"text":"x"}]}}}`, "artifactUpdate.artifact.artifactId is missing"},
		{"artifact without parts", `{"artifactUpdate":{"taskId":"t-1","contextId":"c","artifact":{"artifactId":"a","parts":[]}}}`, "artifactUpdate.artifact.parts is empty"},
		{"artifact missing", `{"artifactUpdate":{"taskId":"t-1","contextId":"c"}}`, "artifactUpdate.artifact is missing"},
		{"message without messageId", `{"message":{"taskId":"t-1","role":"ROLE_USER","parts":[{"text":"x"}]}}`, "message.messageId is missing"},
		{"message bad role", `{"message":{"messageId":"m","taskId":"t-1","role":"user","parts":[{"text":"x"}]}}`, `message.role "user"`},
		{"part with two contents", `{"message":{"messageId":"m","taskId":"t-1","role":"ROLE_USER","parts":[{"text":"x"},{"text":"y","url":"u"}]}}`, "message.parts[1] sets 2 of text, raw, url, data"},
		{"part without content", `{"message":{"messageId":"m","taskId":"t-1","role":"ROLE_USER","parts":[{"filename":"f"}]}}`, "message.parts[0] sets 0 of"},
		{"bad raw", `{"message":{"messageId":"m","taskId":"t-1","role":"ROLE_USER","parts":[{"raw":"***"}]}}`, "message.parts[0].raw is not base64"},
		{"metadata not object", `{"message":{"messageId":"m","taskId":"t-1","role":"ROLE_USER","parts":[{"text":"x"}],"metadata":[1]}}`, "message.metadata is not a JSON object"},
		{"nested history", `{"task":{"id":"t-1","contextId":"c","status":{"state":"TASK_STATE_WORKING"},"history":[{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}]},{"role":"ROLE_USER"}]}}`, "task.history[1].messageId is missing"},
		{"other task", `[` + working + `,{"statusUpdate":{"taskId":"X","contextId":"c","status":{"state":"TASK_STATE_WORKING"}}}]`, `event 1 of journal message 17 is for task "X", not this registration's task "t-1"`},
		{"other task's artifact", `{"artifactUpdate":{"taskId":"X","contextId":"c","artifact":{"artifactId":"a","parts":[{"text":"x"}]}}}`, `is for task "X"`},
		{"other task's snapshot", `{"task":{"id":"X","contextId":"c","status":{"state":"TASK_STATE_WORKING"}}}`, `is for task "X"`},
		{"message for no task", `{"message":{"messageId":"m","role":"ROLE_AGENT","parts":[{"text":"x"}]}}`, "is a message without a taskId"},
		{"trailing junk", working + `x`, "event 0 of journal message 17 is not JSON"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := project(t, tc.data)
			if err == nil {
				t.Fatalf("Project sent %d messages; want a permanent error", len(res.Messages))
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

func TestRegistrationWithoutTaskID(t *testing.T) {
	r := &projection.Record{Seq: 5, Data: []byte(working)}
	_, err := a2a.New().Project(projection.Target{ID: "push-1"}, r)
	if err == nil || !strings.Contains(err.Error(), "journal message 5") || !strings.Contains(err.Error(), "no task id") {
		t.Errorf("error %v; want one naming the missing task id and sequence 5", err)
	}
}

func TestStreamNameInIDs(t *testing.T) {
	r := &projection.Record{Seq: 9, Data: []byte(working)}
	res, err := a2a.New(a2a.WithStream("TASKS")).Project(projection.Target{TaskID: "t-1"}, r)
	if err != nil {
		t.Fatal(err)
	}
	if res.Messages[0].ID != "TASKS-9-0" {
		t.Errorf("ID %q, want TASKS-9-0 for a record that does not name its stream", res.Messages[0].ID)
	}
}

func TestNamespace(t *testing.T) {
	if ns := a2a.New().Namespace(); ns != projection.A2A {
		t.Errorf("Namespace = %q, want a2a", ns)
	}
}

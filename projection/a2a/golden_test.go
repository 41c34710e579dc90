package a2a_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jetstream-bridge/bridge/projection"
	"github.com/jetstream-bridge/bridge/projection/a2a"
)

var update = flag.Bool("update", false, "rewrite testdata/golden from the current output")

// TestGolden projects the specification's examples (see testdata/README.md)
// and compares every message sent with the golden files.
func TestGolden(t *testing.T) {
	tests := []struct {
		file     string
		taskID   string
		messages int
		terminal bool
	}{
		{"task.json", "task-uuid", 1, true},
		{"status_update.json", "43667960-d455-4453-b0cf-1bae4955270d", 1, true},
		{"artifact_update.json", "task-uuid", 1, false},
		{"message.json", "task-uuid", 1, false},
		{"message_raw.json", "43667960-d455-4453-b0cf-1bae4955270d", 1, false},
		{"task_url.json", "43667960-d455-4453-b0cf-1bae4955270d", 1, true},
		{"task_history.json", "789abc-def0-1234-5678-9abcdef01234", 1, false},
		{"stream.json", "task-uuid", 4, true},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", "spec", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			r := &projection.Record{Stream: "JOURNAL", Seq: 17, Subject: "journal.a2a." + tc.taskID, Data: data}
			res, err := a2a.New().Project(projection.Target{ID: "push-1", TaskID: tc.taskID}, r)
			if err != nil {
				t.Fatalf("Project: %v", err)
			}
			if len(res.Messages) != tc.messages || res.Terminal != tc.terminal {
				t.Fatalf("got %d messages, terminal %v; want %d, %v", len(res.Messages), res.Terminal, tc.messages, tc.terminal)
			}
			var got bytes.Buffer
			for _, m := range res.Messages {
				if ct := m.Header.Get("Content-Type"); ct != "application/a2a+json" {
					t.Errorf("message %s: Content-Type %q", m.ID, ct)
				}
				got.WriteString(m.ID + " " + string(m.Body) + "\n")
			}
			golden := filepath.Join("testdata", "golden", strings.TrimSuffix(tc.file, ".json")+".txt")
			if *update {
				if err := os.WriteFile(golden, got.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(got.Bytes(), want) {
				t.Errorf("output differs from %s\ngot:\n%s\nwant:\n%s", golden, got.Bytes(), want)
			}
			assertSameA2A(t, data, res.Messages)
			newStrictReader(t).conform(t, res)
		})
	}
}

// assertSameA2A checks, independently of the golden files, that every body
// is the corresponding input event less the fields A2A 1.0 does not define.
func assertSameA2A(t *testing.T, input []byte, msgs []projection.Message) {
	t.Helper()
	var events []map[string]any
	if bytes.HasPrefix(bytes.TrimSpace(input), []byte("[")) {
		if err := json.Unmarshal(input, &events); err != nil {
			t.Fatal(err)
		}
	} else {
		var one map[string]any
		if err := json.Unmarshal(input, &one); err != nil {
			t.Fatal(err)
		}
		events = []map[string]any{one}
	}
	for i, m := range msgs {
		var got map[string]any
		if err := json.Unmarshal(m.Body, &got); err != nil {
			t.Fatalf("message %d: body is not JSON: %v", i, err)
		}
		want := events[i]
		for _, ev := range want {
			delete(ev.(map[string]any), "final") // not an A2A 1.0 field
		}
		if g, w := canonical(t, got), canonical(t, want); g != w {
			t.Errorf("message %d:\n got %s\nwant %s", i, g, w)
		}
	}
}

func canonical(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

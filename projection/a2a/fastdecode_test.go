package a2a

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzDecodeFast holds decodeFast to its promise: whatever it accepts,
// encoding/json decodes to the very same events.
func FuzzDecodeFast(f *testing.F) {
	for _, s := range []string{
		`{"statusUpdate":{"taskId":"t","contextId":"c","status":{"state":"TASK_STATE_WORKING","timestamp":"2024-03-15T18:30:00Z"},"metadata":{"a":[1,2.5e3,null]}}}`,
		`[{"task":{"id":"t","contextId":"c","status":{"state":"TASK_STATE_COMPLETED"},"artifacts":[],"history":[{"messageId":"m","role":"ROLE_USER","parts":[{"text":"a\"b\u00e9"}],"extensions":[],"referenceTaskIds":["x"]}],"kind":"task"}}]`,
		`[{"artifactUpdate":{"taskId":"t","contextId":"c","append":true,"lastChunk":false,"artifact":{"artifactId":"a","name":"n","description":"d","parts":[{"raw":"AA==","filename":"f","mediaType":"m"},{"url":"u"},{"data":null,"metadata":{}}],"extensions":["e"]}}},{"message":{"messageId":"m","taskId":"t","contextId":"c","role":"ROLE_AGENT","parts":[]}}]`,
		`{"message":{"messageId":"m","MessageId":"n"}}`, `{"message":{"messageId":"m","messageId":"n"}}`, `{"task":null}`, `[]`, `[{}]`, `{"taskK":1}`,
		`{"statusUpdate":{"taskId":"t\ud800"}}`, `{"artifactUpdate":{"append":1}}`, `[{"task":{}} , {"message":{}} ] `,
	} {
		f.Add([]byte(s))
	}
	// Golden lines are "<message id> <body>": every body is a valid event.
	files, _ := filepath.Glob(filepath.Join("testdata", "golden", "*.txt"))
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		for line := range strings.Lines(string(b)) {
			if _, body, ok := strings.Cut(strings.TrimSpace(line), " "); ok {
				f.Add([]byte(body))
			}
		}
	}
	for _, b := range specExamples(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 || b[0] == ' ' || b[0] == '\t' || b[0] == '\r' || b[0] == '\n' || !utf8.Valid(b) {
			return
		}
		checkDecodeFast(t, b)
	})
}

// TestDecodeFastTakesSpecExamples makes sure the specification's examples,
// the shape of real traffic, go the fast way rather than falling back.
func TestDecodeFastTakesSpecExamples(t *testing.T) {
	for name, b := range specExamples(t) {
		if _, err := decodeFast(b); err != nil {
			t.Errorf("%s: decodeFast refuses it: %v", name, err)
		}
	}
}

// specExamples returns testdata/spec's records by file name, with leading
// whitespace trimmed as decode does.
func specExamples(tb testing.TB) map[string][]byte {
	files, err := filepath.Glob(filepath.Join("testdata", "spec", "*.json"))
	if err != nil || len(files) == 0 {
		tb.Fatalf("no examples in testdata/spec: %v", err)
	}
	examples := make(map[string][]byte, len(files))
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			tb.Fatal(err)
		}
		examples[filepath.Base(name)] = bytes.TrimLeft(b, " \t\r\n")
	}
	return examples
}

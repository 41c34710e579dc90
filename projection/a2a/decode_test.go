package a2a

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// benchRecords are journal records as the bridge receives them: a status
// update with an agent message (the record of BenchmarkProjectA2A), a
// 1 KiB one whose message spans lines, and a 64 KiB artifact chunk of a
// Markdown report.
func benchRecords() []struct {
	name string
	data []byte
} {
	const ids = `"taskId":"43667960-d455-4453-b0cf-1bae4955270d","contextId":"c295ea44-7543-4f78-b524-7a38915ad6e4"`
	status := func(text string) []byte {
		return []byte(`[{"statusUpdate":{` + ids + `,"status":{"state":"TASK_STATE_WORKING","timestamp":"2024-03-15T18:30:00Z",` +
			`"message":{"messageId":"6dbc13b5-bd57-4c2b-b503-24e381b6c8d6","role":"ROLE_AGENT","parts":[{"text":"` + text + `"}]}},` +
			`"metadata":{"progress":0.4}}}]`)
	}
	line := `| North | 1,204 | 1,318 | +9.5% |\n`
	report := `# Q1 sales report\n\nRevenue grew in three of four regions; \"North\" led.\n\n| region | Jan | Mar | change |\n|---|---|---|---|\n`
	return []struct {
		name string
		data []byte
	}{
		{"small", status("Generating the Q1 sales report, 40% done.")},
		{"1KiB", status(report + strings.Repeat(line, 16))},
		{"1KiB-one-line", status(strings.Repeat("Q1 revenue grew in three of four regions. ", 17))},
		{"64KiB", []byte(`[{"artifactUpdate":{` + ids + `,"append":true,"lastChunk":false,` +
			`"artifact":{"artifactId":"9f3c2b1e-report","name":"q1-sales-report.md","parts":[{"text":"` + report + strings.Repeat(line, 1800) + `",` +
			`"mediaType":"text/markdown"}],"metadata":{"chunk":3}}}}]`)},
	}
}

// decodeSlow is what encoding/json makes of a record, as decode would.
func decodeSlow(v []byte) ([]streamResponse, error) {
	if v[0] != '[' {
		events := make([]streamResponse, 1)
		return events, json.Unmarshal(v, &events[0])
	}
	var events []streamResponse
	return events, json.Unmarshal(v, &events)
}

// checkDecodeFast fails t unless decodeFast either refuses b or gives
// encoding/json's events, so what it accepts means what it meant to
// encoding/json. It reports whether decodeFast took b.
func checkDecodeFast(t *testing.T, b []byte) bool {
	t.Helper()
	got, err := decodeFast(b)
	if err != nil {
		return false
	}
	want, err := decodeSlow(b)
	if err != nil {
		t.Fatalf("decodeFast accepted %q, encoding/json refuses it: %v", b, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decodeFast(%q) = %#v, encoding/json = %#v", b, got, want)
	}
	return true
}

// TestDecodeFastDeclinesWhatItCannotMirror holds decodeFast to encoding/json
// on records encoding/json refuses, or reads in ways json/v2 does not by
// default, and on the benchmarked records, and checks which go the fast way.
func TestDecodeFastDeclinesWhatItCannotMirror(t *testing.T) {
	const su = `{"statusUpdate":{"taskId":"t","contextId":"c","status":{"state":"TASK_STATE_WORKING"}`
	tests := []struct {
		name, data string
		fast       bool
	}{
		{"not JSON", su, false},
		{"trailing junk", su + `}} x`, false},
		{"array of junk", `[1,`, false},
		{"wrong type", `{"statusUpdate":{"taskId":7}}`, false},
		{"bool as number", `{"artifactUpdate":{"append":1}}`, false},
		{"event not an object", `[` + su + `}},1]`, false},
		{"empty array", `[]`, true},
		{"member twice", `{"message":{"messageId":"m","messageId":"n"}}`, false},
		{"member twice by case", `{"message":{"messageId":"m","MessageId":"n"}}`, false},
		{"metadata member twice", su + `,"metadata":{"a":1,"a":2}}}`, false},
		{"lone surrogate", `{"statusUpdate":{"taskId":"t\ud800"}}`, false},
		{"null event", `[` + su + `}},null]`, true},
		{"null member", `{"task":null}`, true},
		{"key by case", `{"StatusUpdate":{"TASKID":"t"}}`, true},
		{"key by Kelvin sign", `{"tas` + "\u212a" + `":{"id":"t"}}`, true},
		{"escaped key", `{"status\u0055pdate":{"taskId":"t"}}`, true},
		{"proto name", `{"statusUpdate":{"task_id":"t"}}`, false},
		{"proto name by case", `{"statusUpdate":{"Task_Id":"t"}}`, false},
		{"number beyond float64", su + `,"metadata":{"a":[1,-1e400]}}}`, false},
		{"empty object", `[{}]`, true},
		{"metadata null", su + `,"metadata":null}}`, true},
		{"escapes", `{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"a\"b\u00e9\n"}],"extensions":[],"referenceTaskIds":["x"]}}`, true},
		{"spaces", `[ {"task" : {"id":"t"}} , {"message":{"parts":[ ]}} ] `, true},
	}
	for _, r := range benchRecords() {
		tests = append(tests, struct {
			name, data string
			fast       bool
		}{r.name, string(r.data), true})
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if fast := checkDecodeFast(t, []byte(tc.data)); fast != tc.fast {
				t.Errorf("decodeFast takes it: %v, want %v", fast, tc.fast)
			}
		})
	}
}

// BenchmarkDecode compares decodeFast with encoding/json on the same records.
func BenchmarkDecode(b *testing.B) {
	slow := func(v []byte) ([]streamResponse, bool) {
		events, err := decodeSlow(v)
		return events, err == nil
	}
	fast := func(v []byte) ([]streamResponse, bool) {
		events, err := decodeFast(v)
		return events, err == nil
	}
	for _, r := range benchRecords() {
		for _, impl := range []struct {
			name   string
			decode func([]byte) ([]streamResponse, bool)
		}{{"jsonv2", fast}, {"encoding-json", slow}} {
			b.Run(r.name+"/"+impl.name, func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(r.data)))
				for b.Loop() {
					if _, ok := impl.decode(r.data); !ok {
						b.Fatal("declined")
					}
				}
			})
		}
	}
}

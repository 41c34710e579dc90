package a2a

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"
	jsonv1 "github.com/go-json-experiment/json/v1"
)

// decodeV2 is decodeFast's contract written with
// github.com/go-json-experiment/json (the json/v2 design): the same events
// as encoding/json, or a refusal. Names match case-insensitively as in
// encoding/json, where json/v2 would also ignore '_' and '-'. What json/v2
// refuses and encoding/json takes (a member given twice, a lone surrogate
// escape) is left to decode's encoding/json path, as decodeFast leaves it.
func decodeV2(v []byte) ([]streamResponse, bool) {
	opts := jsonv2.JoinOptions(jsonv2.MatchCaseInsensitiveNames(true), jsonv1.MatchCaseSensitiveDelimiter(true))
	if v[0] != '[' {
		events := make([]streamResponse, 1)
		return events, jsonv2.Unmarshal(v, &events[0], opts) == nil
	}
	var events []streamResponse
	if jsonv2.Unmarshal(v, &events, opts) != nil || len(events) == 0 {
		return nil, false
	}
	return events, true
}

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

// checkFastPaths fails t unless each of decodeFast and decodeV2 either
// declines b or gives encoding/json's events, so decode's outcome is the
// same whichever it uses. It reports whether each accepted b.
func checkFastPaths(t *testing.T, b []byte) (fastOK, v2OK bool) {
	t.Helper()
	slow, err := decodeSlow(b)
	for _, p := range []struct {
		name   string
		decode func([]byte) ([]streamResponse, bool)
		ok     *bool
	}{{"decodeFast", decodeFast, &fastOK}, {"decodeV2", decodeV2, &v2OK}} {
		var got []streamResponse
		if got, *p.ok = p.decode(b); !*p.ok {
			continue
		}
		if err != nil {
			t.Fatalf("%s accepted %q, encoding/json refuses it: %v", p.name, b, err)
		}
		if !reflect.DeepEqual(got, slow) {
			t.Fatalf("%s(%q) = %#v, encoding/json = %#v", p.name, b, got, slow)
		}
	}
	return fastOK, v2OK
}

// TestDecodeV2AgreesWithDecodeFast holds both fast paths to encoding/json on
// the benchmarked records, the specification's examples and records
// encoding/json refuses or decodes in ways only it knows, and checks which
// go the fast way.
func TestDecodeV2AgreesWithDecodeFast(t *testing.T) {
	const su = `{"statusUpdate":{"taskId":"t","contextId":"c","status":{"state":"TASK_STATE_WORKING"}`
	tests := []struct {
		name         string
		data         string
		fast, jsonv2 bool // whether each takes the record
	}{
		{"not JSON", su, false, false},
		{"trailing junk", su + `}} x`, false, false},
		{"array of junk", `[1,`, false, false},
		{"wrong type", `{"statusUpdate":{"taskId":7}}`, false, false},
		{"bool as number", `{"artifactUpdate":{"append":1}}`, false, false},
		{"event not an object", `[` + su + `}},1]`, false, false},
		{"empty array", `[]`, false, false},
		{"member twice", `{"message":{"messageId":"m","messageId":"n"}}`, false, false},
		{"member twice by case", `{"message":{"messageId":"m","MessageId":"n"}}`, false, false},
		{"lone surrogate", `{"statusUpdate":{"taskId":"t\ud800"}}`, true, false},
		{"null event", `[` + su + `}},null]`, false, true},
		{"null member", `{"task":null}`, false, true},
		{"key by case", `{"StatusUpdate":{"TASKID":"t"}}`, false, true},
		{"key by Kelvin sign", `{"tas` + "\u212a" + `":{"id":"t"}}`, false, true},
		{"escaped key", `{"status\u0055pdate":{"taskId":"t"}}`, false, true},
		{"snake_case key", `{"statusUpdate":{"task_id":"t"}}`, true, true},
		{"empty object", `[{}]`, true, true},
		{"metadata null", su + `,"metadata":null}}`, true, true},
		{"metadata member twice", su + `,"metadata":{"a":1,"a":2}}}`, true, false},
		{"escapes", `{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"a\"b\u00e9\n"}],"extensions":[],"referenceTaskIds":["x"]}}`, true, true},
		{"spaces", `[ {"task" : {"id":"t"}} , {"message":{"parts":[ ]}} ] `, true, true},
	}
	for _, r := range benchRecords() {
		tests = append(tests, struct {
			name         string
			data         string
			fast, jsonv2 bool
		}{r.name, string(r.data), true, true})
	}
	for name, b := range specExamples(t) {
		tests = append(tests, struct {
			name         string
			data         string
			fast, jsonv2 bool
		}{name, string(b), true, true})
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fast, v2 := checkFastPaths(t, []byte(tc.data))
			if fast != tc.fast || v2 != tc.jsonv2 {
				t.Errorf("decodeFast takes it: %v, decodeV2: %v; want %v, %v", fast, v2, tc.fast, tc.jsonv2)
			}
		})
	}
}

// BenchmarkDecode compares decodeFast with decodeV2 on the same records.
func BenchmarkDecode(b *testing.B) {
	for _, r := range benchRecords() {
		for _, impl := range []struct {
			name   string
			decode func([]byte) ([]streamResponse, bool)
		}{{"fastdecode", decodeFast}, {"jsonv2", decodeV2}} {
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

package a2a_test

import (
	"fmt"
	"strings"
	"testing"
)

// TestTimestampsSentInUTC: a timestamp with an offset is sent as the same
// instant in UTC with Z, its fractional digits as given.
func TestTimestampsSentInUTC(t *testing.T) {
	tests := []struct{ in, want string }{
		{"2024-03-15T20:30:00+02:00", "2024-03-15T18:30:00Z"},
		{"2024-03-15T18:30:00.5-05:30", "2024-03-16T00:00:00.5Z"},
		{"2024-03-15T18:30:00.123456789+00:00", "2024-03-15T18:30:00.123456789Z"},
		{"2024-03-15T18:30:00-00:00", "2024-03-15T18:30:00Z"},
		{"2024-12-31T23:30:00.100-01:00", "2025-01-01T00:30:00.100Z"},
		{"2024-03-01T00:30:00+01:00", "2024-02-29T23:30:00Z"},
		{"0000-12-31T23:30:00-01:00", "0001-01-01T00:30:00Z"},
		{"2024-03-15t18:30:00z", "2024-03-15T18:30:00Z"},
		{"2024-03-15T18:30:00,25Z", "2024-03-15T18:30:00.25Z"},
		{"2024-03-15T18:30:00.000Z", "2024-03-15T18:30:00.000Z"},
		{"9999-12-31T23:59:59.999999999Z", "9999-12-31T23:59:59.999999999Z"},
	}
	const status = `"status":{"state":"TASK_STATE_WORKING","timestamp":"%s"}`
	for _, tc := range tests {
		for _, ev := range []string{
			`{"statusUpdate":{"taskId":"t-1","contextId":"c-1",` + status + `}}`,
			`{"task":{"id":"t-1","contextId":"c-1",` + status + `}}`,
		} {
			res, err := project(t, fmt.Sprintf(ev, tc.in))
			if err != nil {
				t.Errorf("%s: %v", tc.in, err)
				continue
			}
			if got, want := string(res.Messages[0].Body), fmt.Sprintf(ev, tc.want); got != want {
				t.Errorf("%s: body %s\nwant %s", tc.in, got, want)
			}
		}
	}
}

// TestRefusesWhatAStrictReaderRefuses: a journal message that cannot be
// sent as A2A 1.0 a strict reader accepts without changing its meaning is
// refused, naming the member's path and the message's sequence.
func TestRefusesWhatAStrictReaderRefuses(t *testing.T) {
	const (
		ids   = `"taskId":"t-1","contextId":"c-1"`
		state = `"status":{"state":"TASK_STATE_WORKING"}`
		su    = `{"statusUpdate":{` + ids + `,` + state + `,"metadata":%s}}`
		msg   = `{"message":{"messageId":"m","taskId":"t-1","role":"ROLE_USER","parts":[{"data":%s}]}}`
		raw   = `{"message":{"messageId":"m","taskId":"t-1","role":"ROLE_USER","parts":[{"raw":"%s"}]}}`
	)
	at := func(ts string) string {
		return `{"statusUpdate":{` + ids + `,"status":{"state":"TASK_STATE_WORKING","timestamp":"` + ts + `"}}}`
	}
	tests := []struct{ name, data, want string }{
		{"ten fractional digits", at("2024-03-15T18:30:00.1234567890Z"), `statusUpdate.status.timestamp "2024-03-15T18:30:00.1234567890Z" has more than nine fractional digits`},
		{"before year 1 in UTC", at("0001-01-01T00:30:00+01:00"), `statusUpdate.status.timestamp "0001-01-01T00:30:00+01:00" is outside the years 0001 to 9999`},
		{"after year 9999 in UTC", at("9999-12-31T23:30:00-01:00"), "statusUpdate.status.timestamp"},
		{"year 0", at("0000-06-01T00:00:00Z"), "statusUpdate.status.timestamp"},
		{"no such day", at("2023-02-29T00:00:00Z"), `statusUpdate.status.timestamp "2023-02-29T00:00:00Z" is not an RFC 3339 time`},
		{"hour 24", at("2024-03-15T24:00:00Z"), "is not an RFC 3339 time"},
		{"leap second", at("2024-06-30T23:59:60Z"), "is not an RFC 3339 time"},
		{"empty fraction", at("2024-03-15T18:30:00.Z"), "is not an RFC 3339 time"},
		{"offset of 24 hours", at("2024-03-15T18:30:00+24:00"), "is not an RFC 3339 time"},
		{"offset without colon", at("2024-03-15T18:30:00+0200"), "is not an RFC 3339 time"},
		{"no zone", at("2024-03-15T18:30:00"), "is not an RFC 3339 time"},
		{"space for T", at("2024-03-15 18:30:00Z"), "is not an RFC 3339 time"},

		{"member twice", `{"statusUpdate":{` + ids + `,"taskId":"t-1",` + state + `}}`, "statusUpdate.taskId is given twice"},
		{"member twice by case", `{"message":{"messageId":"m","MessageId":"m","taskId":"t-1","role":"ROLE_USER","parts":[{"text":"x"}]}}`, "message.MessageId is given twice"},
		{"metadata member twice", fmt.Sprintf(su, `{"a":1,"b":2,"a":1}`), "statusUpdate.metadata.a is given twice"},
		{"escaped member twice", fmt.Sprintf(su, `{"a":1,"\u0061":1}`), "statusUpdate.metadata.a is given twice"},
		{"deep member twice", fmt.Sprintf(msg, `[0,{"x":[{"y":1,"y":2}]}]`), "message.parts[0].data[1].x[0].y is given twice"},
		{"member twice under a digit name", fmt.Sprintf(su, `{"2":{"a":1,"a":1}}`), "statusUpdate.metadata.2.a is given twice"},
		{"member twice in a later event", `[` + fmt.Sprintf(su, `{}`) + `,` + fmt.Sprintf(su, `{"k":{"v":1,"v":2}}`) + `]`, "event 1 of journal message 17 does not decode: statusUpdate.metadata.k.v is given twice"},

		{"lone surrogate", `{"statusUpdate":{"taskId":"t-1\ud800","contextId":"c-1",` + state + `}}`, "statusUpdate.taskId holds a lone surrogate escape"},
		{"lone low surrogate in metadata", fmt.Sprintf(su, `{"a":["x","\udc00"]}`), "statusUpdate.metadata.a[1] holds a lone surrogate escape"},
		{"surrogate in a member name", fmt.Sprintf(su, `{"\ud83d":1}`), "statusUpdate.metadata holds a lone surrogate escape"},
		{"reversed surrogate pair", fmt.Sprintf(msg, `"\ude00\ud83d"`), "message.parts[0].data holds a lone surrogate escape"},

		{"number beyond float64", fmt.Sprintf(su, `{"a":[1,1e400]}`), "statusUpdate.metadata.a[1] is beyond the range of a float64"},
		{"negative number beyond float64", fmt.Sprintf(msg, `{"n":-1.8e308}`), "message.parts[0].data.n is beyond the range of a float64"},
		{"data number beyond float64", fmt.Sprintf(msg, `1E+309`), "message.parts[0].data is beyond the range of a float64"},
		{"long number beyond float64", fmt.Sprintf(su, `{"a":`+strings.Repeat("9", 310)+`}`), "statusUpdate.metadata.a is beyond the range of a float64"},

		{"raw with a line break", fmt.Sprintf(raw, `AAAA\nAA==`), "message.parts[0].raw is not base64"},
		{"raw of both alphabets", fmt.Sprintf(raw, `A+_A`), "message.parts[0].raw is not base64"},
		{"raw padded short", fmt.Sprintf(raw, `AA=`), "message.parts[0].raw is not base64"},

		{"status without state", `{"statusUpdate":{` + ids + `,"status":{}}}`, `statusUpdate.status.state "" is not a TASK_STATE_ value`},
		{"message without role", `{"message":{"messageId":"m","taskId":"t-1","parts":[{"text":"x"}]}}`, `message.role ""`},
		{"message without parts", `{"message":{"messageId":"m","taskId":"t-1","role":"ROLE_USER"}}`, "message.parts is empty"},
		{"history message without parts", `{"task":{"id":"t-1","contextId":"c",` + state + `,"history":[{"messageId":"m","role":"ROLE_USER"}]}}`, "task.history[0].parts is empty"},
		{"status message without messageId", `{"statusUpdate":{` + ids + `,"status":{"state":"TASK_STATE_WORKING","message":{"role":"ROLE_AGENT","parts":[{"text":"x"}]}}}}`, "statusUpdate.status.message.messageId is missing"},

		{"proto name", `{"statusUpdate":{"task_id":"t-1","contextId":"c-1",` + state + `}}`, "statusUpdate.task_id is a proto field name; A2A 1.0 JSON names it taskId"},
		{"proto name beside the JSON name", `{"statusUpdate":{` + ids + `,"context_id":"c-2",` + state + `}}`, "statusUpdate.context_id is a proto field name; A2A 1.0 JSON names it contextId"},
		{"proto name of the kind", `{"status_update":{` + ids + `,` + state + `}}`, "status_update is a proto field name; A2A 1.0 JSON names it statusUpdate"},
		{"proto name by case", `{"artifactUpdate":{` + ids + `,"Last_Chunk":true,"artifact":{"artifactId":"a","parts":[{"text":"x"}]}}}`, "artifactUpdate.Last_Chunk is a proto field name; A2A 1.0 JSON names it lastChunk"},
		{"proto name in a part", `{"message":{"messageId":"m","taskId":"t-1","role":"ROLE_USER","parts":[{"text":"x","media_type":"text/plain"}]}}`, "message.parts[0].media_type is a proto field name; A2A 1.0 JSON names it mediaType"},
		{"proto name in history", `{"task":{"id":"t-1","contextId":"c",` + state + `,"history":[{"message_id":"m","role":"ROLE_USER","parts":[{"text":"x"}]}]}}`, "task.history[0].message_id is a proto field name; A2A 1.0 JSON names it messageId"},
		{"proto name of an artifact", `{"artifactUpdate":{` + ids + `,"artifact":{"artifact_id":"a","parts":[{"text":"x"}]}}}`, "artifactUpdate.artifact.artifact_id is a proto field name"},
		{"proto name of references", `{"message":{"messageId":"m","taskId":"t-1","role":"ROLE_USER","parts":[{"text":"x"}],"reference_task_ids":["t-0"]}}`, "message.reference_task_ids is a proto field name; A2A 1.0 JSON names it referenceTaskIds"},

		{"state as a number", `{"statusUpdate":{` + ids + `,"status":{"state":3}}}`, "statusUpdate.status.state is a number; A2A 1.0 JSON gives an enum by its name"},
		{"role as a number", `{"message":{"messageId":"m","taskId":"t-1","role":1,"parts":[{"text":"x"}]}}`, "message.role is a number; A2A 1.0 JSON gives an enum by its name"},
		{"state as a number in history", `{"task":{"id":"t-1","contextId":"c",` + state + `,"history":[{"messageId":"m","role":2,"parts":[{"text":"x"}]}]}}`, "task.history[0].role is a number"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := project(t, tc.data)
			if err == nil {
				t.Fatalf("Project sent %s; want a permanent error", res.Messages[0].Body)
			}
			if !strings.Contains(err.Error(), "journal message 17 ") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not name journal message 17 and %q", err, tc.want)
			}
		})
	}
}

// TestKeepsWhatAStrictReaderTakes: numbers a float64 holds (if only as 0
// or with fewer digits) and escaped surrogate pairs are forwarded as sent.
func TestKeepsWhatAStrictReaderTakes(t *testing.T) {
	for _, ev := range []string{
		`{"statusUpdate":{"taskId":"t-1","contextId":"c-1","status":{"state":"TASK_STATE_WORKING"},` +
			`"metadata":{"n":[1.7976931348623157e308,-0.0,1E-400,123456789012345678901234567890],"s":"\ud83d\ude00","\u00e9":"\u2028"}}}`,
		`{"message":{"messageId":"m","taskId":"t-1","role":"ROLE_USER","parts":[{"data":-4.9e-324},{"raw":"AA"},{"raw":"AA=="},{"raw":"_-8"}]}}`,
	} {
		res, err := project(t, ev)
		if err != nil {
			t.Fatal(err)
		}
		if got := string(res.Messages[0].Body); got != ev {
			t.Errorf("body %s\nwant %s", got, ev)
		}
	}
}

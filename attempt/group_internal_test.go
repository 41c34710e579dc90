package attempt

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// A group's records are found by line, and a sequence by its member,
// whatever the answers they carry hold.
func TestAGroupSplitsIntoItsRecordsWhateverTheyHold(t *testing.T) {
	tricky := "line one\n\",\"seq\":99,\"x\":[{\"a\":1}],\n]"
	recs := []*Attempt{
		{Registration: "a.b", Seq: 33, At: time.Unix(1, 0).UTC(), Outcome: Outcome5xx, Error: "500", Response: tricky},
		{Registration: "a.b", Seq: 34, At: time.Unix(2, 0).UTC(), Outcome: Outcome2xx},
	}
	data, err := encodeGroup(recs)
	if err != nil {
		t.Fatal(err)
	}
	var whole []Attempt
	if err := json.Unmarshal(data, &whole); err != nil || len(whole) != 2 || whole[0].Response != tricky {
		t.Fatalf("the group is not the JSON array of its records: %v %+v\n%s", err, whole, data)
	}
	lines := records(data)
	if len(lines) != 2 {
		t.Fatalf("%d records split from the group, want 2:\n%s", len(lines), data)
	}
	for i, want := range []uint64{33, 34} {
		if n, ok := quickSeq(lines[i]); !ok || n != want {
			t.Fatalf("record %d: quickSeq = %d, %v; want %d", i, n, ok, want)
		}
	}
	if got := recordsIn(&nats.Msg{Data: data}); got != 2 {
		t.Fatalf("recordsIn = %d, want 2", got)
	}
}

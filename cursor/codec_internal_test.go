package cursor

import (
	"encoding/binary"
	"reflect"
	"slices"
	"testing"
	"time"
)

// TestStateRecordCoversRegistration fails when Registration gains a field
// the binary state record does not store: such a field would be dropped by
// every Flush. Add it to appendState and readState, then to this list.
func TestStateRecordCoversRegistration(t *testing.T) {
	stored := []string{"Config", "State", "NextSeq", "Attempts", "NextAttemptAt", "LastError",
		"Delivered", "CreatedAt", "UpdatedAt", "CompletedAt", "Furthest", "Ahead",
		"Filtered", "FilterErrors", "LastFilterError"}
	var fields []string
	for f := range reflect.TypeFor[Registration]().Fields() {
		fields = append(fields, f.Name)
	}
	if !slices.Equal(fields, stored) {
		t.Fatalf("Registration has fields %v; the state record stores %v", fields, stored)
	}
}

func TestRowsRoundTrip(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
	in := row{inc: 42, Registration: Registration{
		Config: Config{ID: "billing", Namespace: "outbox", Subject: "journal.orders.>", URL: "https://x.example/",
			Secret: "whsec_x", PreviousSecretUntil: at, Batch: &Batch{MaxEvents: 10, MaxDelay: time.Second}},
		State: Parked, NextSeq: 1 << 40, Attempts: 31, NextAttemptAt: at.Add(time.Hour), LastError: "503 é",
		Delivered: 7, CreatedAt: at, UpdatedAt: at.Add(time.Minute), CompletedAt: time.Time{}, Furthest: 1<<40 + 9,
		Ahead:    Ahead{1<<40 + 2, 1<<40 + 3, 1<<40 + 4000},
		Filtered: 1 << 33, FilterErrors: 3, LastFilterError: "journal message 1099511627780: no such key: total",
	}}
	v, err := encodeRow(&in)
	if err != nil {
		t.Fatal(err)
	}
	full, err := decodeRow("bridge.db", []byte("billing"), v, true)
	if err != nil {
		t.Fatal(err)
	}
	if full.inc != in.inc || !reflect.DeepEqual(full.Registration, in.Registration) || full.config != nil {
		t.Fatalf("full decode = %+v\nwant          %+v", full, in)
	}

	// A state-only read leaves the Config encoded and writes it back as is.
	part, err := decodeRow("bridge.db", []byte("billing"), v, false)
	if err != nil {
		t.Fatal(err)
	}
	if part.ID != "billing" || part.Namespace != "outbox" || part.URL != "" || part.NextSeq != in.NextSeq {
		t.Fatalf("state decode = %+v", part)
	}
	part.Delivered++
	v2, err := encodeRow(&part)
	if err != nil {
		t.Fatal(err)
	}
	again, err := decodeRow("bridge.db", []byte("billing"), v2, true)
	in.Delivered++
	if err != nil || !reflect.DeepEqual(again.Registration, in.Registration) {
		t.Fatalf("after a state-only write = %+v, %v", again, err)
	}

	for cut := range len(v) {
		if _, err := decodeRow("bridge.db", []byte("billing"), v[:cut], true); err == nil {
			t.Fatalf("decoding %d of %d bytes succeeded", cut, len(v))
		}
	}
}

// TestRowsFilterCountsWithoutAhead: the filter's counts follow an empty
// acknowledged-ahead set, and a row without either ends after Furthest.
func TestRowsFilterCountsWithoutAhead(t *testing.T) {
	for _, in := range []Registration{
		{Config: Config{ID: "a", Namespace: "outbox", Filter: "subject == 'x'"}, State: Active, NextSeq: 7, Filtered: 4},
		{Config: Config{ID: "a", Namespace: "outbox"}, State: Active, NextSeq: 7, FilterErrors: 1, LastFilterError: "e"},
		{Config: Config{ID: "a", Namespace: "outbox"}, State: Active, NextSeq: 7, Ahead: Ahead{9}},
		{Config: Config{ID: "a", Namespace: "outbox"}, State: Active, NextSeq: 7},
	} {
		v, err := encodeRow(&row{inc: 1, Registration: in})
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeRow("bridge.db", []byte("a"), v, true)
		if err != nil || !reflect.DeepEqual(got.Registration, in) {
			t.Fatalf("decode = %+v, %v\nwant     %+v", got.Registration, err, in)
		}
	}
}

// TestRowsWithoutFurthest reads a row written before Furthest existed:
// its state record ends after CompletedAt.
func TestRowsWithoutFurthest(t *testing.T) {
	in := row{inc: 1, Registration: Registration{Config: Config{ID: "a", Namespace: "outbox"}, State: Active, NextSeq: 7}}
	v, err := encodeRow(&in)
	if err != nil {
		t.Fatal(err)
	}
	inc, state, config, err := splitRow(v)
	if err != nil {
		t.Fatal(err)
	}
	old := state[:len(state)-1] // Furthest 0 is one byte
	w := append([]byte{rowFormat}, v[1:9]...)
	w = binary.AppendUvarint(w, uint64(len(old)))
	w = append(append(w, old...), config...)
	got, err := decodeRow("bridge.db", []byte("a"), w, true)
	if err != nil || got.inc != inc || got.NextSeq != 7 || got.Furthest != 0 || got.HighWater() != 7 {
		t.Fatalf("old row = %+v, %v", got, err)
	}
}

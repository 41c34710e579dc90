package attempt_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jetstream-bridge/bridge/attempt"
)

func TestExcerpt(t *testing.T) {
	euro := "€" // three bytes
	cases := []struct {
		name string
		body []byte
		want string
	}{
		{"empty", nil, ""},
		{"text as is", []byte("busy, try later"), "busy, try later"},
		{"1 MiB cut to 4 KiB", bytes.Repeat([]byte("x"), 1<<20), strings.Repeat("x", 4096)},
		{"a character cut at the limit is dropped", []byte(strings.Repeat("a", 4095) + euro), strings.Repeat("a", 4095)},
		{"binary as base64", []byte{0xff, 0xfe, 0}, "base64:" + base64.StdEncoding.EncodeToString([]byte{0xff, 0xfe, 0})},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := attempt.Excerpt(c.body); got != c.want {
				t.Fatalf("Excerpt = %.80q (%d bytes), want %.80q (%d bytes)", got, len(got), c.want, len(c.want))
			}
		})
	}
	// Invalid bytes inside the kept part: the 4096 bytes, in base64.
	bin := append([]byte{0xff}, bytes.Repeat([]byte("y"), 8000)...)
	got := attempt.Excerpt(bin)
	raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(got, "base64:"))
	if !strings.HasPrefix(got, "base64:") || err != nil || !bytes.Equal(raw, bin[:4096]) {
		t.Fatalf("Excerpt of invalid UTF-8 = %.40q…, decoded %d bytes, %v", got, len(raw), err)
	}
	if s := attempt.Excerpt([]byte(strings.Repeat("é", 3000))); !utf8.ValidString(s) || len(s) != 4096 {
		t.Fatalf("two-byte characters: %d bytes, valid %v", len(s), utf8.ValidString(s))
	}
}

func TestAttemptJSONHasEveryMember(t *testing.T) {
	b, err := json.Marshal(attempt.Attempt{At: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"registration", "seq", "index", "webhookId", "attempt", "at", "durationMs", "outcome", "status", "error", "response", "trigger"} {
		if _, ok := m[k]; !ok {
			t.Errorf("member %q missing from %s", k, b)
		}
	}
	if len(m) != 12 {
		t.Errorf("%d members, want the 12 of the contract: %s", len(m), b)
	}
	if m["at"] != "2026-01-02T03:04:05Z" {
		t.Errorf("at = %v, want RFC 3339 UTC", m["at"])
	}
}

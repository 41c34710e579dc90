package webhook

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestExcerpt(t *testing.T) {
	for _, c := range []struct {
		body    string
		n       int
		secrets []string
		want    string
	}{
		{"", 10, nil, ""},
		{"service  unavailable\r\n\ttry later", 256, nil, "service unavailable try later"},
		{"\x1b[31mred\x1b[0m \u202eevil", 256, nil, "[31mred [0m evil"},
		{"bad\xff\xfeutf8", 256, nil, "bad utf8"},
		{"\n\n  leading", 256, nil, "leading"},
		{"abcdefghij", 5, nil, "abcde…"},
		{"héllo wörld", 6, nil, "héllo…"},
		{"token=abcd1234 and abcd1234", 256, []string{"abcd1234"}, "token=[redacted] and [redacted]"},
		{"Authorization: Bearer s3cr3t-credential", 256, []string{"", "s3c", "s3cr3t-credential"}, "Authorization: Bearer [redacted]"},
		{"key whsec_AAAA and AAAA", 256, []string{"whsec_AAAA", "AAAA"}, "key [redacted] and [redacted]"},
		{"anything", 0, nil, ""},
	} {
		got := excerpt([]byte(c.body), c.n, c.secrets)
		if got != c.want {
			t.Errorf("excerpt(%q, %d) = %q, want %q", c.body, c.n, got, c.want)
		}
		if !utf8.ValidString(got) || len(strings.TrimSuffix(got, "…")) > c.n {
			t.Errorf("excerpt(%q, %d) = %q: invalid or too long", c.body, c.n, got)
		}
	}
}

package webhook

import (
	"bytes"
	"strings"
	"unicode"
	"unicode/utf8"
)

// redacted replaces a secret a receiver echoed back.
const redacted = "[redacted]"

// minRedactLen is the shortest value redacted: replacing every "a" of a
// body because a credential was "a" would garble the excerpt and protect
// nothing a guess would not find.
const minRedactLen = 4

// excerpt turns a response body into one short printable line for a
// registration's lastError, which the admin API shows to whoever may read
// the registration. So: every secret of the request the receiver may have
// echoed is replaced first, then invalid UTF-8 and control or format
// characters (terminal escapes, bidi overrides) become spaces, runs of
// space collapse, and the line is cut to at most n bytes on a rune
// boundary, marked with "…".
func excerpt(body []byte, n int, secrets []string) string {
	if n <= 0 || len(body) == 0 {
		return ""
	}
	s := string(body)
	for _, sec := range secrets {
		if len(sec) >= minRedactLen {
			s = strings.ReplaceAll(s, sec, redacted)
		}
	}
	var b strings.Builder
	space := false
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		if r == utf8.RuneError && size == 1 || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			space = b.Len() > 0
			continue
		}
		need := utf8.RuneLen(r)
		if space {
			need++
		}
		if b.Len()+need > n {
			b.WriteString("…")
			break
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(r)
	}
	return b.String()
}

// keep returns the first n bytes of body with every secret of the request
// replaced, the bytes otherwise as received: what a log of attempts shows
// of an answer.
func keep(body []byte, n int, secrets []string) []byte {
	out := body
	for _, sec := range secrets {
		if len(sec) >= minRedactLen && bytes.Contains(out, []byte(sec)) {
			out = bytes.ReplaceAll(out, []byte(sec), []byte(redacted))
		}
	}
	if len(out) > n {
		out = out[:n]
	}
	return bytes.Clone(out)
}

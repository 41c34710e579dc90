package cloudevents

import "strings"

// facts are the few NATS headers the CloudEvents rules look at. nats.go
// keeps keys as published, so names are matched case-insensitively, in one
// pass over the header; when a name is spelled several ways, the canonical
// spelling wins, then the alphabetically first, so the choice is stable.
type facts struct {
	contentType string // Content-Type
	msgID       string // Nats-Msg-Id
	ceType      string // ce-type
	binaryEvent bool   // a ce-specversion header is present
}

func readFacts(h map[string][]string) facts {
	var f facts
	var keys [3]string // the key each value above was taken from
	for k, vs := range h {
		if len(vs) == 0 {
			continue
		}
		switch {
		case strings.EqualFold(k, "Content-Type"):
			pick(&f.contentType, &keys[0], "Content-Type", k, vs[0])
		case strings.EqualFold(k, "Nats-Msg-Id"):
			pick(&f.msgID, &keys[1], "Nats-Msg-Id", k, vs[0])
		case strings.EqualFold(k, "ce-type"):
			pick(&f.ceType, &keys[2], "Ce-Type", k, vs[0])
		case strings.EqualFold(k, "ce-specversion"):
			f.binaryEvent = true
		}
	}
	return f
}

func pick(dst, from *string, canonical, key, value string) {
	if *from == "" || key == canonical || (*from != canonical && key < *from) {
		*dst, *from = value, key
	}
}

const upperHex = "0123456789ABCDEF"

// mustEscape reports the bytes the HTTP binding requires percent-encoded in
// a ce- header value: anything outside printable ASCII, space, '"' and '%'.
// Multi-byte UTF-8 characters are thereby encoded byte by byte, as required.
func mustEscape(c byte) bool { return c <= ' ' || c >= 0x7f || c == '"' || c == '%' }

// percentEncode encodes s for a ce- header value. It returns s itself when
// nothing needs encoding, which is the common case and allocates nothing.
func percentEncode(s string) string {
	n := 0
	for i := 0; i < len(s); i++ {
		if mustEscape(s[i]) {
			n++
		}
	}
	if n == 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 2*n)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if mustEscape(c) {
			b.WriteByte('%')
			b.WriteByte(upperHex[c>>4])
			b.WriteByte(upperHex[c&0xf])
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// percentDecode undoes percentEncode. A '%' not followed by two hex digits
// is kept as it is: publishers that never encode lose nothing but the
// literal %XX sequences the binding reserves.
func percentDecode(s string) string {
	i := strings.IndexByte(s, '%')
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	b.WriteString(s[:i])
	for ; i < len(s); i++ {
		c := s[i]
		if c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
			i += 2
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

func isHex(c byte) bool {
	return ('0' <= c && c <= '9') || ('a' <= c && c <= 'f') || ('A' <= c && c <= 'F')
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

// Package jsonscan checks JSON validity fast, for the projections: the
// same answer as json.Valid and utf8.Valid together, in one pass. It never
// decodes and never allocates.
package jsonscan

import "unicode/utf8"

// maxDepth is encoding/json's nesting limit, so Valid refuses
// exactly what json.Valid refuses.
const maxDepth = 10000

// Valid reports whether b is one UTF-8 JSON value, optionally
// surrounded by whitespace: json.Valid(b) && utf8.Valid(b), in one
// byte-at-a-time pass instead of encoding/json's state machine, which costs
// several times as much on every structured message with a JSON payload.
func Valid(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	i, ok := SkipValue(b, SkipSpace(b, 0), 0)
	return ok && SkipSpace(b, i) == len(b)
}

// SkipSpace returns the offset of the first byte at or after i that is
// not JSON whitespace.
func SkipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// SkipValue returns the offset just past the JSON value at b[i:].
func SkipValue(b []byte, i, depth int) (int, bool) {
	if i >= len(b) {
		return i, false
	}
	switch c := b[i]; {
	case c == '"':
		return SkipString(b, i)
	case c == '{':
		if depth >= maxDepth {
			return i, false
		}
		i = SkipSpace(b, i+1)
		if i < len(b) && b[i] == '}' {
			return i + 1, true
		}
		for {
			if i >= len(b) || b[i] != '"' {
				return i, false
			}
			var ok bool
			if i, ok = SkipString(b, i); !ok {
				return i, false
			}
			i = SkipSpace(b, i)
			if i >= len(b) || b[i] != ':' {
				return i, false
			}
			if i, ok = SkipValue(b, SkipSpace(b, i+1), depth+1); !ok {
				return i, false
			}
			i = SkipSpace(b, i)
			if i >= len(b) {
				return i, false
			}
			switch b[i] {
			case ',':
				i = SkipSpace(b, i+1)
			case '}':
				return i + 1, true
			default:
				return i, false
			}
		}
	case c == '[':
		if depth >= maxDepth {
			return i, false
		}
		i = SkipSpace(b, i+1)
		if i < len(b) && b[i] == ']' {
			return i + 1, true
		}
		for {
			var ok bool
			if i, ok = SkipValue(b, i, depth+1); !ok {
				return i, false
			}
			i = SkipSpace(b, i)
			if i >= len(b) {
				return i, false
			}
			switch b[i] {
			case ',':
				i = SkipSpace(b, i+1)
			case ']':
				return i + 1, true
			default:
				return i, false
			}
		}
	case c == 't':
		return skipJSONLiteral(b, i, "true")
	case c == 'f':
		return skipJSONLiteral(b, i, "false")
	case c == 'n':
		return skipJSONLiteral(b, i, "null")
	case c == '-' || (c >= '0' && c <= '9'):
		return skipJSONNumber(b, i)
	}
	return i, false
}

func skipJSONLiteral(b []byte, i int, lit string) (int, bool) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return i, false
	}
	return i + len(lit), true
}

func skipJSONNumber(b []byte, i int) (int, bool) {
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = skipJSONDigits(b, i+1)
	default:
		return i, false
	}
	if i < len(b) && b[i] == '.' {
		j := skipJSONDigits(b, i+1)
		if j == i+1 {
			return j, false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := skipJSONDigits(b, i)
		if j == i {
			return j, false
		}
		i = j
	}
	return i, true
}

func skipJSONDigits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

// SkipString returns the offset just past the string that opens at
// b[i]. UTF-8 is checked by the caller, once for the whole document.
func SkipString(b []byte, i int) (int, bool) {
	for i++; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i + 1, true
		case c < 0x20:
			return i, false
		case c == '\\':
			i++
			if i >= len(b) {
				return i, false
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if len(b)-i < 5 {
					return i, false
				}
				for _, h := range b[i+1 : i+5] {
					if !isHex(h) {
						return i, false
					}
				}
				i += 4
			default:
				return i, false
			}
		}
	}
	return i, false
}

func isHex(c byte) bool {
	return ('0' <= c && c <= '9') || ('a' <= c && c <= 'f') || ('A' <= c && c <= 'F')
}

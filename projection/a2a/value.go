package a2a

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// value is a google.protobuf.Struct or Value member (metadata, a data
// part): any JSON, forwarded as it was sent, compacted. json/v2 has
// already refused what a protojson reader refuses in it but JSON allows
// (a member given twice, a lone surrogate escape); UnmarshalJSON refuses
// the rest, a number no float64 holds, which protojson reads every
// number of a Struct as.
type value []byte

// MarshalJSON returns v, or null when v is nil, as json.RawMessage does.
func (v value) MarshalJSON() ([]byte, error) {
	if v == nil {
		return []byte("null"), nil
	}
	return v, nil
}

// UnmarshalJSON keeps a copy of b, a JSON value, unless a number in it
// is beyond float64.
func (v *value) UnmarshalJSON(b []byte) error {
	if at := numberBeyondFloat64(b); at >= 0 {
		return &valueError{at: pointerAt(b, at), problem: "is beyond the range of a float64"}
	}
	*v = append((*v)[:0], b...)
	return nil
}

// valueError is a problem of the member of a value at pointer at.
type valueError struct {
	at      jsontext.Pointer
	problem string
}

func (e *valueError) Error() string { return string(e.at) + " " + e.problem }

// numberBeyondFloat64 returns the offset of the first number in b, valid
// JSON, that overflows a float64 (1e400), or -1. Only a number with an
// exponent or of 300 digits and more can, so no other is parsed.
func numberBeyondFloat64(b []byte) int {
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			i = closingQuote(b, i)
		case c == '-' || '0' <= c && c <= '9':
			j, exp := i+1, false
			for ; j < len(b) && isNumberByte(b[j]); j++ {
				exp = exp || b[j] == 'e' || b[j] == 'E'
			}
			if exp || j-i >= 300 {
				if _, err := strconv.ParseFloat(string(b[i:j]), 64); err != nil {
					return i
				}
			}
			i = j - 1
		}
	}
	return -1
}

func isNumberByte(c byte) bool {
	return '0' <= c && c <= '9' || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'
}

// closingQuote returns the offset of the quote that ends the JSON string
// opening at b[open].
func closingQuote(b []byte, open int) int {
	for i := open + 1; ; {
		n := bytes.IndexByte(b[i:], '"')
		if n < 0 {
			return len(b)
		}
		i += n
		escapes := 0
		for k := i - 1; b[k] == '\\'; k-- {
			escapes++
		}
		if escapes%2 == 0 {
			return i
		}
		i++
	}
}

// pointerAt returns the JSON pointer of the token of b that spans offset at.
func pointerAt(b []byte, at int) jsontext.Pointer {
	dec := jsontext.NewDecoder(bytes.NewReader(b))
	for {
		if _, err := dec.ReadToken(); err != nil || dec.InputOffset() > int64(at) {
			return dec.StackPointer()
		}
	}
}

// protoName is the type of members named as in a2a.proto (task_id)
// rather than in its JSON form (taskId). A protojson reader takes either,
// so a publisher who wrote task_id meant taskId: dropping the member as
// unknown would change the event, and forwarding it is not A2A 1.0 JSON,
// so it is refused. It never encodes (omitzero).
type protoName struct{}

var errProtoName = errors.New("is a proto field name")

func (*protoName) UnmarshalJSON([]byte) error { return errProtoName }

// jsonName returns the JSON name of a proto field name: task_id → taskId.
func jsonName(protoName string) string {
	b := make([]byte, 0, len(protoName))
	upper := false
	for _, c := range []byte(protoName) {
		switch {
		case c == '_':
			upper = true
		case upper && 'a' <= c && c <= 'z':
			b, upper = append(b, c-'a'+'A'), false
		case !upper && 'A' <= c && c <= 'Z':
			b = append(b, c-'A'+'a')
		default:
			b, upper = append(b, c), false
		}
	}
	return string(b)
}

// pathOf spells ptr, a JSON pointer into the record data, the way field
// errors name fields (statusUpdate.metadata.a[2]), and returns apart the
// index of the event it is in when data is an array. A token is an index
// only where data holds an array there, as a metadata member may be
// named "2"; past what data lets it follow, a token of digits is taken
// for one.
func pathOf(data []byte, ptr jsontext.Pointer) (event int, path string) {
	dec := jsontext.NewDecoder(bytes.NewReader(data), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	var b []byte
	first, follow := true, true
	for tok := range ptr.Tokens() {
		kind := jsontext.Kind(0)
		if follow {
			kind = dec.PeekKind()
		}
		index := kind == '[' || kind == 0 && isDigits(tok)
		switch {
		case first && kind == '[':
			event, _ = strconv.Atoi(tok)
		case index:
			b = append(append(append(b, '['), tok...), ']')
		default:
			if len(b) > 0 {
				b = append(b, '.')
			}
			b = append(b, tok...)
		}
		first = false
		follow = follow && enter(dec, kind, tok)
	}
	return event, string(b)
}

// enter moves dec, at a value of kind, into its element or member tok.
func enter(dec *jsontext.Decoder, kind jsontext.Kind, tok string) bool {
	if kind != '[' && kind != '{' {
		return false
	}
	if _, err := dec.ReadToken(); err != nil {
		return false
	}
	if kind == '[' {
		n, err := strconv.Atoi(tok)
		for ; err == nil && n > 0; n-- {
			err = dec.SkipValue()
		}
		return err == nil && dec.PeekKind() != ']'
	}
	for dec.PeekKind() == '"' {
		name, err := dec.ReadToken()
		if err != nil {
			return false
		}
		if name.String() == tok {
			return true
		}
		if dec.SkipValue() != nil {
			return false
		}
	}
	return false
}

func isDigits(s string) bool {
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

// describe turns an error of json/v2 decoding data into JSON terms: what
// is wrong, and at which member (the path of a fieldError), inside the
// event it names when data is an array. Its errors read after "event N of
// journal message S" or, for data that is no JSON, "journal message S".
// Byte offsets are counted from lead bytes before data.
func describe(data []byte, lead int, err error) error {
	var se *jsontext.SyntacticError
	var me *jsonv2.SemanticError
	if errors.As(err, &me) {
		// json/v2 stops at the first problem it meets: a member of the wrong
		// type must not hide that the record is no JSON at all.
		var raw jsontext.Value
		if serr := jsonv2.Unmarshal(data, &raw); serr != nil {
			err, me = serr, nil
		}
	}
	switch {
	case me != nil:
		ptr, ve := me.JSONPointer, (*valueError)(nil)
		if errors.As(me.Err, &ve) {
			ptr += ve.at
		}
		event, path := pathOf(data, ptr)
		return &eventError{event, fmt.Errorf("does not decode: %w", semanticProblem(path, me, ve))}
	case errors.As(err, &se) && (se.Err == jsontext.ErrDuplicateName || json.Valid(data)):
		problem := "is given twice"
		if se.Err != jsontext.ErrDuplicateName {
			// Valid JSON that json/v2 refuses, its UTF-8 checked before:
			// an escaped UTF-16 surrogate without its pair.
			problem = "holds a lone surrogate escape (\\ud800 to \\udfff), which is no Unicode character"
		}
		event, path := pathOf(data, se.JSONPointer)
		return &eventError{event, fmt.Errorf("does not decode: %w", invalid(path, problem))}
	case errors.As(err, &se):
		err = fmt.Errorf("is not JSON: %v at byte %d", se.Err, int64(lead)+se.ByteOffset)
		if data[0] != '[' {
			return &eventError{0, err}
		}
		return err
	}
	return fmt.Errorf("is not JSON: %w", err)
}

// semanticProblem says what is wrong with the member at path.
func semanticProblem(path string, me *jsonv2.SemanticError, ve *valueError) error {
	name := me.JSONPointer.LastToken()
	switch {
	case ve != nil:
		return invalid(path, ve.problem)
	case errors.Is(me.Err, errProtoName):
		return invalid(path, "is a proto field name; A2A 1.0 JSON names it "+jsonName(name))
	case me.JSONKind == '0' && (name == "state" || name == "role"):
		return invalid(path, "is a number; A2A 1.0 JSON gives an enum by its name")
	case path == "":
		path = "it"
	}
	if me.Err != nil {
		return invalid(path, me.Err.Error())
	}
	return invalid(path, fmt.Sprintf("is a JSON %s, want %s", kindName(me.JSONKind), jsonKind(me.GoType)))
}

func kindName(k jsontext.Kind) string {
	switch k {
	case '"':
		return "string"
	case '0':
		return "number"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	case '{':
		return "object"
	case '[':
		return "array"
	}
	return "value"
}

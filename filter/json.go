package filter

import (
	"bytes"
	"errors"
	"io"
	"strconv"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"github.com/go-json-experiment/json/jsontext"
)

// maxDepth bounds the nesting ParseJSON follows, so a hostile payload
// cannot exhaust the stack of the goroutine that parses it.
const maxDepth = 1000

// ParseJSON is data whose content type is JSON as a filter reads it:
// objects as maps, arrays as lists, integers that fit as int, other
// numbers as double. Data that is not one JSON value stays bytes, so an
// expression reading into it fails on that message.
func ParseJSON(raw []byte) ref.Val {
	d := jsontext.NewDecoder(bytes.NewReader(raw),
		jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	v, err := readValue(d, 0)
	if err == nil {
		if _, err = d.ReadToken(); err == io.EOF {
			return types.DefaultTypeAdapter.NativeToValue(v)
		}
	}
	return types.Bytes(raw)
}

var errTooDeep = errors.New("json nested too deep")

func readValue(d *jsontext.Decoder, depth int) (any, error) {
	if depth > maxDepth {
		return nil, errTooDeep
	}
	tok, err := d.ReadToken()
	if err != nil {
		return nil, err
	}
	switch tok.Kind() {
	case 'n':
		return nil, nil
	case 't', 'f':
		return tok.Bool(), nil
	case '"':
		return tok.String(), nil
	case '0':
		return number(tok.String()), nil
	case '[':
		list := []any{}
		for d.PeekKind() != ']' {
			v, err := readValue(d, depth+1)
			if err != nil {
				return nil, err
			}
			list = append(list, v)
		}
		_, err := d.ReadToken()
		return list, err
	case '{':
		obj := map[string]any{}
		for d.PeekKind() != '}' {
			tok, err := d.ReadToken()
			if err != nil {
				return nil, err
			}
			// Read before the value's tokens void it.
			name := tok.String()
			v, err := readValue(d, depth+1)
			if err != nil {
				return nil, err
			}
			obj[name] = v
		}
		_, err := d.ReadToken()
		return obj, err
	}
	return nil, errors.New("unexpected json token")
}

// number is a JSON number as an int64 when it is an integer that fits,
// else a float64.
func number(s string) any {
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return i
	}
	f, _ := strconv.ParseFloat(s, 64)
	return f
}

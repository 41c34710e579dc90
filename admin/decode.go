package admin

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
)

// readBody reads the whole request body, at most maxBodyBytes of it.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return nil, errorf(http.StatusRequestEntityTooLarge, codePayloadTooLarge,
			"request body exceeds %d bytes", maxBodyBytes)
	case err != nil:
		return nil, invalid("reading the request body: %v", err)
	}
	return data, nil
}

// decodeBody reads the body and decodes it strictly into v: one JSON
// object, no unknown fields, nothing after it. Strictness is what makes a
// misspelt field an error instead of a silently ignored setting.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) ([]byte, error) {
	data, err := readBody(w, r)
	if err != nil {
		return nil, err
	}
	return data, decodeStrict(data, v)
}

func decodeStrict(data []byte, v any) error {
	if len(bytes.Trim(data, jsonSpace)) == 0 {
		return invalid("request body is empty; expected a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	if len(bytes.Trim(data[dec.InputOffset():], jsonSpace)) != 0 {
		return invalid("request body has data after the JSON object")
	}
	return exactNames(data, reflect.TypeOf(v))
}

// exactNames refuses a member named like a field in another case ("URL"
// for "url"), which encoding/json would take for it. Names are exact in
// JSON and in the OpenAPI document: a body with both "url" and "URL"
// would otherwise be read one way here and another way by a proxy or a
// gateway that checked it.
func exactNames(data []byte, t reflect.Type) error {
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return nil // the strict decode has reported it
	}
	return namesOf(v, t, "")
}

var rawMessage = reflect.TypeFor[json.RawMessage]()

func namesOf(v any, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == rawMessage: // decoded strictly on its own later
	case t.Kind() == reflect.Struct:
		m, _ := v.(map[string]any)
		fields := jsonFields(t)
		for name, member := range m {
			f, ok := fields[name]
			if !ok {
				for known := range fields {
					if strings.EqualFold(known, name) {
						return invalid("unknown field %q: member names are case-sensitive; did you mean %q?", path+name, path+known)
					}
				}
				continue // an unknown name: the strict decode has refused it
			}
			if err := namesOf(member, f, path+name+"."); err != nil {
				return err
			}
		}
	case t.Kind() == reflect.Map:
		m, _ := v.(map[string]any)
		for k, member := range m {
			if err := namesOf(member, t.Elem(), path+k+"."); err != nil {
				return err
			}
		}
	case t.Kind() == reflect.Slice:
		a, _ := v.([]any)
		for i, member := range a {
			if err := namesOf(member, t.Elem(), fmt.Sprintf("%s%d.", path, i)); err != nil {
				return err
			}
		}
	}
	return nil
}

// jsonFields maps the JSON names of t's exported fields to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := make(map[string]reflect.Type, t.NumField())
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case !f.IsExported() || name == "-":
		case name == "":
			out[f.Name] = f.Type
		default:
			out[name] = f.Type
		}
	}
	return out
}

// decodeError names the field and the problem of a failed decode.
func decodeError(err error) error {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		return invalid("request body is not valid JSON: %v (at byte %d)", syntax, syntax.Offset)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return invalid("request body is truncated JSON")
	case errors.As(err, &typ):
		if typ.Field == "" {
			return invalid("request body must be a JSON object, not %s", typ.Value)
		}
		return invalid("%s must be %s, not %s", typ.Field, kindName(typ.Type), typ.Value)
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return invalid("unknown field %s", name)
	}
	return invalid("request body is not valid JSON: %v", err)
}

// kindName says what a field expects, in the words of JSON.
func kindName(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return fmt.Sprintf("a JSON value for %s", t)
}

// canonicalHash identifies a request body by its meaning rather than its
// spelling: key order and whitespace do not change it, so a client that
// re-serialises its retry still replays instead of conflicting.
func canonicalHash(data []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, decodeError(err)
	}
	canon, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("canonicalising the request body: %w", err)
	}
	sum := sha256.Sum256(canon)
	return sum[:], nil
}

// jsonSpace is the only whitespace JSON allows around a value; other
// Unicode spaces after the object are trailing data.
const jsonSpace = " \t\r\n"

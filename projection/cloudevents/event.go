package cloudevents

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/cloudevents/sdk-go/v2/binding"
	"github.com/cloudevents/sdk-go/v2/binding/format"
	"github.com/cloudevents/sdk-go/v2/event"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"github.com/go-json-experiment/json/jsontext"
)

// decodeStructured reads a record whose payload is a structured CloudEvent.
func decodeStructured(contentType string, data []byte) (*event.Event, error) {
	if mt := mediaType(contentType); mt != event.ApplicationCloudEventsJSON {
		return nil, fmt.Errorf("event format %q is not supported, want %q", mt, event.ApplicationCloudEventsJSON)
	}
	e := event.New()
	if err := format.JSON.Unmarshal(data, &e); err != nil {
		return nil, fmt.Errorf("structured event: %w", err)
	}
	return &e, nil
}

// decodeBinary reads a record that carries a binary CloudEvent: attributes in
// ce- headers, the data in the payload. NATS headers keep the publisher's
// spelling, so names are folded here; values are percent-decoded as the
// binding encodes them. The event is then decoded by the SDK's HTTP binding,
// which the NATS binding mirrors except that datacontenttype travels as
// ce-datacontenttype (a NATS Content-Type header is honoured as well).
func decodeBinary(h map[string][]string, contentType string, data []byte) (*event.Event, error) {
	hh := make(http.Header, len(h)+1)
	for k, vs := range h {
		if len(k) < 3 || !strings.EqualFold(k[:3], "ce-") {
			continue
		}
		name := strings.ToLower(k[3:])
		if !isAttributeName(name) {
			return nil, fmt.Errorf("header %q does not name a CloudEvents attribute", k)
		}
		key := "Ce-" + strings.ToUpper(name[:1]) + name[1:]
		if name == "datacontenttype" {
			key = "Content-Type"
		}
		for _, v := range vs {
			hh[key] = append(hh[key], percentDecode(v))
		}
	}
	if _, ok := hh["Content-Type"]; !ok {
		if contentType != "" {
			hh["Content-Type"] = []string{contentType}
		}
	}
	if err := checkSingleValues(hh); err != nil {
		return nil, err
	}
	if v := hh.Get("Ce-Specversion"); v != event.CloudEventsVersionV1 {
		return nil, fmt.Errorf("specversion %q is not supported, want %q", v, event.CloudEventsVersionV1)
	}
	if ct := hh.Get("Content-Type"); isEventFormat(ct) {
		return nil, fmt.Errorf("binary event has datacontenttype %q, which names a structured event", ct)
	}
	e, err := binding.ToEvent(context.Background(), cehttp.NewMessage(hh, io.NopCloser(bytes.NewReader(data))))
	if err != nil {
		return nil, fmt.Errorf("binary event: %w", err)
	}
	// The payload is bytes: structured mode carries it as data_base64
	// unless chooseDataEncoding finds it is JSON.
	e.DataBase64 = true
	return e, nil
}

// checkSingleValues refuses an attribute given twice (repeated, or spelled in
// two cases): the SDK would silently take one of them.
func checkSingleValues(h http.Header) error {
	keys := make([]string, 0, len(h))
	for k, vs := range h {
		if len(vs) != 1 {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	slices.Sort(keys)
	return fmt.Errorf("header %s has %d values, want one", keys[0], len(h[keys[0]]))
}

// isAttributeName reports whether s is a CloudEvents attribute name:
// lower-case ASCII letters and digits.
func isAttributeName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// validate checks what the SDK checks and what it lets through: only 1.0
// events are sent, and every string must be a CloudEvents String, because
// the JSON writer would emit invalid UTF-8 as is.
func validate(e *event.Event) error {
	if v := e.SpecVersion(); v != event.CloudEventsVersionV1 {
		return fmt.Errorf("specversion %q is not supported, want %q", v, event.CloudEventsVersionV1)
	}
	if err := e.Validate(); err != nil {
		return describe(err)
	}
	ec, ok := e.Context.(*event.EventContextV1)
	if !ok {
		return fmt.Errorf("specversion %q is not supported, want %q", e.SpecVersion(), event.CloudEventsVersionV1)
	}
	dataschema := ""
	if ec.DataSchema != nil {
		dataschema = ec.DataSchema.String()
	}
	for _, a := range [...]struct{ name, value string }{
		{"id", ec.ID},
		{"source", ec.Source.String()},
		{"type", ec.Type},
		{"subject", deref(ec.Subject)},
		{"dataschema", dataschema},
	} {
		if err := checkString(a.name, a.value); err != nil {
			return err
		}
	}
	if err := checkASCII("datacontenttype", deref(ec.DataContentType)); err != nil {
		return err
	}
	for name, v := range ec.Extensions {
		if s, ok := v.(string); ok {
			if err := checkString(name, s); err != nil {
				return err
			}
		}
	}
	return nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// describe turns the SDK's validation map into one stable sentence.
func describe(err error) error {
	var ve event.ValidationError
	if !errors.As(err, &ve) {
		return fmt.Errorf("invalid event: %w", err)
	}
	names := make([]string, 0, len(ve))
	for name := range ve {
		names = append(names, name)
	}
	slices.Sort(names)
	var b strings.Builder
	b.WriteString("invalid event:")
	for i, name := range names {
		if i > 0 {
			b.WriteByte(';')
		}
		fmt.Fprintf(&b, " %s %v", name, ve[name])
	}
	return errors.New(b.String())
}

// checkString refuses what a CloudEvents String must not hold: invalid
// UTF-8, control characters and noncharacters.
func checkString(name, s string) error {
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			return fmt.Errorf("attribute %s is not valid UTF-8 (byte %d)", name, i)
		case r < 0x20 || (r >= 0x7f && r <= 0x9f):
			return fmt.Errorf("attribute %s holds control character %U (byte %d)", name, r, i)
		case (r >= 0xfdd0 && r <= 0xfdef) || r&0xfffe == 0xfffe:
			return fmt.Errorf("attribute %s holds noncharacter %U (byte %d)", name, r, i)
		}
	}
	return nil
}

// checkASCII refuses non-printable ASCII in a value that becomes a plain
// HTTP header (Content-Type), where percent-encoding does not apply.
func checkASCII(name, s string) error {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 0x20 && c != '\t') || c >= 0x7f {
			return fmt.Errorf("attribute %s holds byte %#02x at %d, want printable ASCII", name, c, i)
		}
	}
	return nil
}

// chooseDataEncoding decides how structured mode carries the data. The SDK's
// writer emits data as raw JSON only for the media types in sdkJSON and its
// reader expects raw JSON for exactly those, so JSON goes raw when it is
// UTF-8 JSON of such a type; anything else that is not known text goes as
// data_base64, the one form every reader decodes to the same bytes.
// (Data of a +json type other than these also goes as data_base64: the SDK
// writes and reads it as a JSON string, which other readers take for a
// string value rather than the document.)
func chooseDataEncoding(e *event.Event) {
	if len(e.DataEncoded) == 0 {
		e.DataEncoded, e.DataBase64 = nil, false
		return
	}
	mt, _ := e.Context.GetDataMediaType()
	if sdkJSON(mt) {
		e.DataBase64 = !validJSON(e.DataEncoded)
		return
	}
	if !e.DataBase64 && !utf8.Valid(e.DataEncoded) {
		e.DataBase64 = true
	}
}

// validJSON reports whether b is one UTF-8 JSON value, optionally surrounded
// by whitespace: json.Valid(b) && utf8.Valid(b), the test raw data has always
// passed, at json/v2's speed (github.com/go-json-experiment/json), two to
// four times encoding/json's. JSON must be UTF-8, which json.Valid does not
// check. A member given twice and a lone surrogate escape are allowed, as
// json.Valid allows them and jsontext by default does not: such data stays
// raw rather than turning into data_base64. Allowing invalid escapes lets
// raw invalid UTF-8 through too, hence utf8.Valid.
func validJSON(b []byte) bool {
	return utf8.Valid(b) && jsontext.Value(b).IsValid(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
}

// sdkJSON mirrors the SDK's private list of media types whose data it
// writes and reads as a JSON value (an absent type counts as JSON).
func sdkJSON(mt string) bool {
	switch mt {
	case "", event.ApplicationJSON, event.TextJSON, event.ApplicationCloudEventsJSON, event.ApplicationCloudEventsBatchJSON:
		return true
	}
	return false
}

// isEventFormat reports whether a content type names a structured
// CloudEvent (application/cloudevents…, matched case-insensitively).
func isEventFormat(contentType string) bool {
	ct := strings.TrimSpace(contentType)
	return len(ct) >= len(format.Prefix) && strings.EqualFold(ct[:len(format.Prefix)], format.Prefix)
}

// mediaType is a content type without parameters, lower-cased.
func mediaType(contentType string) string {
	mt, _, _ := strings.Cut(contentType, ";")
	return strings.ToLower(strings.TrimSpace(mt))
}

// jsonFormat is the SDK's JSON event format written by the SDK's own
// writer, event.WriteJson, without the second pass of format.JSON: that one
// goes through json.Marshal, which re-parses and compacts the writer's
// output, doubling the cost and rewriting the payload's whitespace. Events
// reach it validated, and raw data only when it is valid JSON.
type jsonFormat struct{}

func (jsonFormat) MediaType() string { return event.ApplicationCloudEventsJSON }

func (jsonFormat) Marshal(e *event.Event) ([]byte, error) {
	var b bytes.Buffer
	b.Grow(512 + len(e.DataEncoded)*4/3)
	if err := event.WriteJson(e, &b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func (jsonFormat) Unmarshal(b []byte, e *event.Event) error { return format.JSON.Unmarshal(b, e) }

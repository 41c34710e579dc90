package a2a_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/jetstream-bridge/bridge/projection"
)

// strictReader reads a push notification body as a receiver generated
// from the specification's a2a.proto does (testdata/proto, see
// testdata/README.md): protojson with unknown fields refused, then what
// protojson lets through but the specification forbids — a field without
// its REQUIRED value (google.api.field_behavior), a member under its
// proto name rather than its JSON name, an enum given as a number, a
// timestamp with an offset other than Z (§5.6.1).
type strictReader struct {
	streamResponse protoreflect.MessageDescriptor
	// required holds the fields of a2a.proto's messages annotated
	// (google.api.field_behavior) = REQUIRED.
	required map[protoreflect.FullName]bool
}

// compiledReader compiles a2a.proto once for all the tests of a run.
var compiledReader = sync.OnceValues(compileStrictReader)

func newStrictReader(tb testing.TB) *strictReader {
	tb.Helper()
	r, err := compiledReader()
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

func compileStrictReader() (*strictReader, error) {
	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
		ImportPaths: []string{filepath.Join("testdata", "proto")},
	})}
	files, err := c.Compile(context.Background(), "a2a.proto", "google/api/field_behavior.proto")
	if err != nil {
		return nil, fmt.Errorf("compile a2a.proto: %w", err)
	}
	sr := files[0].Messages().ByName("StreamResponse")
	fb := files[1].Extensions().ByName("field_behavior")
	if sr == nil || fb == nil {
		return nil, errors.New("a2a.proto has no StreamResponse, or field_behavior.proto no field_behavior")
	}
	r := &strictReader{streamResponse: sr, required: make(map[protoreflect.FullName]bool)}
	if err := r.findRequired(files[0].Messages(), dynamicpb.NewExtensionType(fb)); err != nil {
		return nil, err
	}
	return r, nil
}

// findRequired records the REQUIRED fields of msgs and of the messages
// nested in them.
func (r *strictReader) findRequired(msgs protoreflect.MessageDescriptors, fieldBehavior protoreflect.ExtensionType) error {
	for i := range msgs.Len() {
		fields := msgs.Get(i).Fields()
		for j := range fields.Len() {
			fd := fields.Get(j)
			required, err := isRequired(fd, fieldBehavior)
			if err != nil {
				return fmt.Errorf("%s: %w", fd.FullName(), err)
			}
			r.required[fd.FullName()] = required
		}
		if err := r.findRequired(msgs.Get(i).Messages(), fieldBehavior); err != nil {
			return err
		}
	}
	return nil
}

// read returns why a strict reader refuses body, or nil.
func (r *strictReader) read(body []byte) error {
	m := dynamicpb.NewMessage(r.streamResponse)
	if err := (protojson.UnmarshalOptions{DiscardUnknown: false}).Unmarshal(body, m); err != nil {
		return fmt.Errorf("protojson: %w", err)
	}
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	var doc any
	if err := d.Decode(&doc); err != nil {
		return err
	}
	return r.check(m, doc, "")
}

// zuluTime is the only RFC 3339 form §5.6.1 allows: UTC, marked Z.
var zuluTime = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?Z$`)

// check walks the message m was read into beside the JSON it was read from.
func (r *strictReader) check(m protoreflect.Message, doc any, path string) error {
	desc := m.Descriptor()
	switch desc.FullName() {
	case "google.protobuf.Struct", "google.protobuf.Value":
		return nil
	case "google.protobuf.Timestamp":
		if s, _ := doc.(string); !zuluTime.MatchString(s) {
			return fmt.Errorf("%s: timestamp %q is not UTC with Z", path, s)
		}
		return nil
	}
	fields := desc.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if r.required[fd.FullName()] && !m.Has(fd) {
			return fmt.Errorf("%s: REQUIRED field %s is missing", path, fd.JSONName())
		}
	}
	for name, v := range doc.(map[string]any) {
		fd := fields.ByJSONName(name)
		if fd == nil || fd.JSONName() != name {
			return fmt.Errorf("%s: %q is not the JSON name of a field of %s", path, name, desc.FullName())
		}
		if err := r.checkField(m, fd, v, strings.TrimPrefix(path+"."+name, ".")); err != nil {
			return err
		}
	}
	return nil
}

func (r *strictReader) checkField(m protoreflect.Message, fd protoreflect.FieldDescriptor, v any, path string) error {
	if fd.Kind() == protoreflect.EnumKind {
		if _, ok := v.(string); !ok && !fd.IsList() {
			return fmt.Errorf("%s: enum %v is not given by name", path, v)
		}
	}
	if fd.Message() == nil || v == nil {
		return nil
	}
	if !fd.IsList() {
		return r.check(m.Get(fd).Message(), v, path)
	}
	list := m.Get(fd).List()
	for i, elem := range v.([]any) {
		if err := r.check(list.Get(i).Message(), elem, fmt.Sprintf("%s[%d]", path, i)); err != nil {
			return err
		}
	}
	return nil
}

// isRequired reports whether fd is annotated (google.api.field_behavior) = REQUIRED.
func isRequired(fd protoreflect.FieldDescriptor, fieldBehavior protoreflect.ExtensionType) (bool, error) {
	opts, _ := fd.Options().(*descriptorpb.FieldOptions)
	if opts == nil {
		return false, nil
	}
	// The options hold the extension as unknown bytes, its file not being
	// in the global registry: decode them again with its type.
	b, err := proto.Marshal(opts)
	if err != nil {
		return false, err
	}
	var typed descriptorpb.FieldOptions
	if err := (proto.UnmarshalOptions{Resolver: extensionResolver{fieldBehavior}}).Unmarshal(b, &typed); err != nil {
		return false, err
	}
	behaviors := typed.ProtoReflect().Get(fieldBehavior.TypeDescriptor()).List()
	for i := range behaviors.Len() {
		if behaviors.Get(i).Enum() == 2 { // google.api.FieldBehavior.REQUIRED
			return true, nil
		}
	}
	return false, nil
}

// conform fails t unless a strict reader accepts every message of res.
func (r *strictReader) conform(t testing.TB, res projection.Result) {
	t.Helper()
	for _, m := range res.Messages {
		if err := r.read(m.Body); err != nil {
			t.Errorf("message %s: a strict A2A 1.0 reader refuses it: %v\n%s", m.ID, err, m.Body)
		}
	}
}

type extensionResolver struct{ xt protoreflect.ExtensionType }

func (x extensionResolver) FindExtensionByName(name protoreflect.FullName) (protoreflect.ExtensionType, error) {
	if name == x.xt.TypeDescriptor().FullName() {
		return x.xt, nil
	}
	return nil, protoregistry.NotFound
}

func (x extensionResolver) FindExtensionByNumber(message protoreflect.FullName, field protoreflect.FieldNumber) (protoreflect.ExtensionType, error) {
	if d := x.xt.TypeDescriptor(); d.ContainingMessage().FullName() == message && d.Number() == field {
		return x.xt, nil
	}
	return nil, protoregistry.NotFound
}

// TestConformanceGolden reads every body of the golden files as a strict
// A2A 1.0 reader does.
func TestConformanceGolden(t *testing.T) {
	r := newStrictReader(t)
	files, err := filepath.Glob(filepath.Join("testdata", "golden", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden files: %v", err)
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(string(b)) {
			id, body, _ := strings.Cut(strings.TrimSpace(line), " ")
			if err := r.read([]byte(body)); err != nil {
				t.Errorf("%s %s: %v", filepath.Base(name), id, err)
			}
		}
	}
}

// TestStrictReaderRefuses makes sure the reader the conformance tests rely
// on refuses what a strict receiver refuses.
func TestStrictReaderRefuses(t *testing.T) {
	const status = `{"statusUpdate":{"taskId":"t","contextId":"c","status":{"state":"TASK_STATE_WORKING"%s}%s}}`
	ok := fmt.Sprintf(status, `,"timestamp":"2024-03-15T18:30:00.123456789Z"`, `,"metadata":{"a":[1,{"b":null}]}`)
	r := newStrictReader(t)
	if err := r.read([]byte(ok)); err != nil {
		t.Fatalf("refuses a valid body: %v", err)
	}
	for _, tc := range []struct{ name, body, why string }{
		{"offset", fmt.Sprintf(status, `,"timestamp":"2024-03-15T20:30:00+02:00"`, ``), "not UTC with Z"},
		{"ten digits", fmt.Sprintf(status, `,"timestamp":"2024-03-15T18:30:00.1234567890Z"`, ``), "invalid google.protobuf.Timestamp"},
		{"duplicate metadata", fmt.Sprintf(status, ``, `,"metadata":{"a":1,"a":2}`), "duplicate"},
		{"lone surrogate", fmt.Sprintf(status, ``, `,"metadata":{"a":"\ud800"}`), "protojson"},
		{"number beyond range", fmt.Sprintf(status, ``, `,"metadata":{"a":1e400}`), "invalid google.protobuf.Value"},
		{"unknown field", fmt.Sprintf(status, ``, `,"final":true`), `unknown field "final"`},
		{"proto name", `{"statusUpdate":{"task_id":"t","contextId":"c","status":{"state":"TASK_STATE_WORKING"}}}`, `"task_id" is not the JSON name`},
		{"enum number", `{"statusUpdate":{"taskId":"t","contextId":"c","status":{"state":2}}}`, "not given by name"},
		{"missing required", `{"statusUpdate":{"taskId":"t","status":{"state":"TASK_STATE_WORKING"}}}`, "statusUpdate: REQUIRED field contextId"},
		{"nested required", `{"task":{"id":"t","status":{"state":"TASK_STATE_WORKING"},"history":[{"messageId":"m","role":"ROLE_USER"}]}}`, "task.history[0]: REQUIRED field parts"},
		{"unspecified state", `{"task":{"id":"t","status":{"state":"TASK_STATE_UNSPECIFIED"}}}`, "task.status: REQUIRED field state"},
	} {
		if err := r.read([]byte(tc.body)); err == nil || !strings.Contains(err.Error(), tc.why) {
			t.Errorf("%s: %s read with error %v, want one saying %q", tc.name, tc.body, err, tc.why)
		}
	}
}

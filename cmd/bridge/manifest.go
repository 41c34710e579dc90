package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
)

// manifestEntry is one registration of an apply file: the API's create
// body, its ${VARIABLES} expanded, and where it stands in the file.
type manifestEntry struct {
	id   string
	line int
	body json.RawMessage
}

// lookupFunc reads a variable of the environment, as os.LookupEnv does.
type lookupFunc func(name string) (string, bool)

// parseManifest reads a file {"registrations": [...]} written in YAML or
// JSON (which YAML reads too). It refuses anything it cannot apply
// exactly as written: a syntax error, an unknown key, an entry without
// an id, an id listed twice, a variable that is not set. Every error
// names the line; the API checks the rest.
func parseManifest(name string, data []byte, lookup lookupFunc) ([]manifestEntry, error) {
	fields, lines, ok := jsonEntries(data)
	if !ok {
		var err error
		if fields, lines, err = yamlEntries(data); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	entries := make([]manifestEntry, 0, len(fields))
	seen := map[string]int{}
	for i, f := range fields {
		e, err := parseEntry(f, lines[i], lookup)
		if err != nil {
			return nil, fmt.Errorf("%s: line %d: %w", name, lines[i], err)
		}
		if first, ok := seen[e.id]; ok {
			return nil, fmt.Errorf("%s: line %d: registration %q is listed twice (first at line %d)", name, lines[i], e.id, first)
		}
		seen[e.id] = lines[i]
		entries = append(entries, e)
	}
	return entries, nil
}

// yamlEntries reads the registrations of a YAML file, and the line each
// begins on.
func yamlEntries(data []byte) ([]map[string]any, []int, error) {
	body, list, err := registrationsNode(data)
	if err != nil {
		return nil, nil, err
	}
	var doc struct {
		Registrations []map[string]any `yaml:"registrations"`
	}
	if err := yaml.NodeToValue(body, &doc, yaml.Strict()); err != nil {
		return nil, nil, yamlError(err)
	}
	lines := make([]int, len(list.Values))
	for i, v := range list.Values {
		lines[i] = v.GetToken().Position.Line
	}
	return doc.Registrations, lines, nil
}

// jsonEntries reads a file that is exactly {"registrations": [{...}, ...]}
// in strict JSON (no name twice in an object), the line of each entry
// beside it, several times faster than the YAML parser reads the same.
// Anything else is not ok, and left to the YAML parser, which reads JSON
// too and says what is wrong and where.
func jsonEntries(data []byte) (fields []map[string]any, lines []int, ok bool) {
	dec := jsontext.NewDecoder(bytes.NewReader(data))
	next := func(kind jsontext.Kind) bool {
		tok, err := dec.ReadToken()
		return err == nil && tok.Kind() == kind
	}
	if !next('{') {
		return nil, nil, false
	}
	if tok, err := dec.ReadToken(); err != nil || tok.String() != "registrations" || !next('[') {
		return nil, nil, false
	}
	line, at := 1, int64(0)
	for dec.PeekKind() == '{' {
		start := dec.InputOffset()
		v, err := dec.ReadValue() // valid until the next read: decoded now
		if err != nil {
			return nil, nil, false
		}
		var f map[string]any
		d := json.NewDecoder(bytes.NewReader(v))
		d.UseNumber() // numbers as written, however large
		if err := d.Decode(&f); err != nil {
			return nil, nil, false
		}
		start += int64(bytes.IndexByte(data[start:], '{'))
		line += bytes.Count(data[at:start], []byte("\n"))
		at = start
		fields, lines = append(fields, f), append(lines, line)
	}
	if !next(']') || !next('}') {
		return nil, nil, false
	}
	if _, err := dec.ReadToken(); !errors.Is(err, io.EOF) {
		return nil, nil, false
	}
	return fields, lines, true
}

// registrationsNode parses data into its one document's body and finds
// its list of registrations, whose entries carry their lines.
func registrationsNode(data []byte) (ast.Node, *ast.SequenceNode, error) {
	file, err := parser.ParseBytes(data, 0)
	switch {
	case err != nil:
		return nil, nil, yamlError(err)
	case len(file.Docs) == 0 || file.Docs[0].Body == nil:
		return nil, nil, errors.New(`the file is empty; it must hold {"registrations": [...]}`)
	case len(file.Docs) > 1:
		return nil, nil, fmt.Errorf("line %d: a second YAML document; the file holds one", file.Docs[1].GetToken().Position.Line)
	}
	body := file.Docs[0].Body
	path, err := yaml.PathString("$.registrations")
	if err != nil {
		return nil, nil, err
	}
	node, err := path.FilterNode(body)
	if err != nil || node == nil {
		return nil, nil, errors.New(`the file has no "registrations" list: it must hold {"registrations": [...]}`)
	}
	list, ok := node.(*ast.SequenceNode)
	if !ok {
		return nil, nil, fmt.Errorf("line %d: registrations must be a list", node.GetToken().Position.Line)
	}
	return body, list, nil
}

// yamlError says where the file is wrong, by line and column, without
// the source excerpt the parser would add.
func yamlError(err error) error {
	var ye yaml.Error
	if errors.As(err, &ye) && ye.GetToken() != nil {
		pos := ye.GetToken().Position
		return fmt.Errorf("line %d, column %d: %s", pos.Line, pos.Column, ye.GetMessage())
	}
	return err
}

// parseEntry reads one registration and expands its variables.
func parseEntry(fields map[string]any, line int, lookup lookupFunc) (manifestEntry, error) {
	e := manifestEntry{line: line}
	rawID, ok := fields["id"].(string)
	if v := fields["id"]; v != nil && !ok {
		return e, fmt.Errorf("id %v is not a string: quote it", v)
	}
	id, err := expand(rawID, lookup)
	switch {
	case err != nil:
		return e, fmt.Errorf("id: %w", err)
	case id == "":
		return e, errors.New(`a registration has no "id": apply needs every registration's id`)
	}
	e.id = id
	expanded, err := expandAll(fields, lookup)
	if err != nil {
		return e, fmt.Errorf("registration %q: %w", id, err)
	}
	if e.body, err = json.Marshal(expanded); err != nil {
		return e, fmt.Errorf("registration %q cannot be sent as JSON: %w", id, err)
	}
	return e, nil
}

// expandAll expands the variables of every string in v, a value decoded
// from YAML. Expanding after parsing means a secret's characters are
// never read as YAML.
func expandAll(v any, lookup lookupFunc) (any, error) {
	switch v := v.(type) {
	case string:
		return expand(v, lookup)
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) { // the first error in the order a reader checks
			y, err := expandAll(v[k], lookup)
			if err != nil {
				return nil, err
			}
			v[k] = y
		}
	case []any:
		for i, x := range v {
			y, err := expandAll(x, lookup)
			if err != nil {
				return nil, err
			}
			v[i] = y
		}
	case map[any]any:
		return nil, errors.New("every key must be a string")
	}
	return v, nil
}

// expand replaces each ${NAME} in s with the variable's value; $${ is a
// literal ${. Only the braced form is read, so a "$" in a URL or a filter
// stays as written. A variable that is not set is an error: an empty
// secret would be applied silently.
func expand(s string, lookup lookupFunc) (string, error) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		if i > 0 && s[i-1] == '$' { // $${: the escape
			b.WriteString(s[:i-1] + "${")
			s = s[i+2:]
			continue
		}
		b.WriteString(s[:i])
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return "", fmt.Errorf("%q has a ${ without its closing }", clip(s[i:], 40))
		}
		name := s[i+2 : i+end]
		if !validVariable(name) {
			return "", fmt.Errorf("${%s} is not a variable name (letters, digits and _; write $${ for a literal ${)", clip(name, 40))
		}
		value, ok := lookup(name)
		if !ok {
			return "", fmt.Errorf("${%s} is not set in the environment", name)
		}
		b.WriteString(value)
		s = s[i+end+1:]
	}
}

func validVariable(name string) bool {
	if name == "" || name[0] >= '0' && name[0] <= '9' {
		return false
	}
	for _, r := range name {
		if r != '_' && (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && (r < '0' || r > '9') {
			return false
		}
	}
	return true
}

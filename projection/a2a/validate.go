package a2a

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
)

// fieldError names a field by its JSON path and what is wrong with it. The
// path grows as the error climbs out of nested checks, and is only built
// when there is an error, so valid events cost no formatting.
type fieldError struct {
	field   string
	problem string
}

func (e *fieldError) Error() string { return e.field + " " + e.problem }

func invalid(field, problem string) error { return &fieldError{field: field, problem: problem} }

// within prefixes the path of a fieldError with its parent field.
func within(parent string, err error) error {
	if fe, ok := err.(*fieldError); ok {
		if fe.field == "" {
			fe.field = parent
		} else {
			fe.field = parent + "." + fe.field
		}
	}
	return err
}

func withinIndex(parent string, i int, err error) error {
	return within(parent+"["+strconv.Itoa(i)+"]", err)
}

// check checks that exactly one member is set and returns its name, the id
// of the task it is about ("" for a message without a taskId) and whether
// it reports a terminal state.
func (r *streamResponse) check() (kind, taskID string, terminal bool, err error) {
	n := 0
	if r.Task != nil {
		n, kind, taskID = n+1, "task", r.Task.ID
		terminal, err = r.Task.check()
	}
	if r.Message != nil {
		n, kind, taskID = n+1, "message", r.Message.TaskID
		err = r.Message.check()
	}
	if r.StatusUpdate != nil {
		n, kind, taskID = n+1, "statusUpdate", r.StatusUpdate.TaskID
		terminal, err = r.StatusUpdate.check()
	}
	if r.ArtifactUpdate != nil {
		n, kind, taskID = n+1, "artifactUpdate", r.ArtifactUpdate.TaskID
		err = r.ArtifactUpdate.check()
	}
	switch {
	case n == 0:
		return "", "", false, fmt.Errorf("sets none of task, message, statusUpdate, artifactUpdate")
	case n > 1:
		return "", "", false, fmt.Errorf("sets %d of task, message, statusUpdate, artifactUpdate; a StreamResponse holds exactly one", n)
	case err != nil:
		return "", "", false, within(kind, err)
	}
	return kind, taskID, terminal, nil
}

func (t *task) check() (terminal bool, err error) {
	if t.ID == "" {
		return false, invalid("id", "is missing")
	}
	if t.ContextID == "" {
		return false, invalid("contextId", "is missing")
	}
	if terminal, err = t.Status.check(); err != nil {
		return false, within("status", err)
	}
	for i := range t.Artifacts {
		if err := t.Artifacts[i].check(); err != nil {
			return false, withinIndex("artifacts", i, err)
		}
	}
	for i := range t.History {
		if err := t.History[i].check(); err != nil {
			return false, withinIndex("history", i, err)
		}
	}
	t.Metadata, err = object("metadata", t.Metadata)
	return terminal, err
}

func (s *taskStatus) check() (terminal bool, err error) {
	if s == nil {
		return false, invalid("", "is missing")
	}
	known, terminal := taskState(s.State)
	if !known {
		return false, invalid("state", fmt.Sprintf("%q is not a TASK_STATE_ value of A2A 1.0", s.State))
	}
	if s.Message != nil {
		if err := s.Message.check(); err != nil {
			return false, within("message", err)
		}
	}
	if s.Timestamp != "" {
		if s.Timestamp, err = utcTimestamp(s.Timestamp); err != nil {
			return false, invalid("timestamp", err.Error())
		}
	}
	return terminal, nil
}

func (m *message) check() (err error) {
	if m.MessageID == "" {
		return invalid("messageId", "is missing")
	}
	if m.Role != roleUser && m.Role != roleAgent {
		return invalid("role", fmt.Sprintf("%q is neither %s nor %s", m.Role, roleUser, roleAgent))
	}
	if err := checkParts(m.Parts); err != nil {
		return err
	}
	m.Metadata, err = object("metadata", m.Metadata)
	return err
}

func (a *artifact) check() (err error) {
	if a == nil {
		return invalid("", "is missing")
	}
	if a.ArtifactID == "" {
		return invalid("artifactId", "is missing")
	}
	if err := checkParts(a.Parts); err != nil {
		return err
	}
	a.Metadata, err = object("metadata", a.Metadata)
	return err
}

func checkParts(parts []part) error {
	if len(parts) == 0 {
		return invalid("parts", "is empty; at least one part is required")
	}
	for i := range parts {
		if err := parts[i].check(); err != nil {
			return withinIndex("parts", i, err)
		}
	}
	return nil
}

func (p *part) check() (err error) {
	n := 0
	for _, set := range [...]bool{p.Text != nil, p.Raw != nil, p.URL != nil, p.Data != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return invalid("", fmt.Sprintf("sets %d of text, raw, url, data; a part holds exactly one", n))
	}
	if p.Raw != nil && !isBase64(*p.Raw) {
		return invalid("raw", "is not base64")
	}
	p.Metadata, err = object("metadata", p.Metadata)
	return err
}

func (u *taskStatusUpdateEvent) check() (terminal bool, err error) {
	if u.TaskID == "" {
		return false, invalid("taskId", "is missing")
	}
	if u.ContextID == "" {
		return false, invalid("contextId", "is missing")
	}
	if terminal, err = u.Status.check(); err != nil {
		return false, within("status", err)
	}
	u.Metadata, err = object("metadata", u.Metadata)
	return terminal, err
}

func (u *taskArtifactUpdateEvent) check() (err error) {
	if u.TaskID == "" {
		return invalid("taskId", "is missing")
	}
	if u.ContextID == "" {
		return invalid("contextId", "is missing")
	}
	if err := u.Artifact.check(); err != nil {
		return within("artifact", err)
	}
	u.Metadata, err = object("metadata", u.Metadata)
	return err
}

// object checks a google.protobuf.Struct member: a JSON object, or null for
// absent (which is dropped rather than forwarded).
func object(field string, raw value) (value, error) {
	v := bytes.TrimSpace(raw)
	switch {
	case len(v) == 0, string(v) == "null":
		return nil, nil
	case v[0] != '{':
		return nil, invalid(field, "is not a JSON object")
	}
	return raw, nil
}

// isBase64 accepts what protojson accepts for bytes, the standard or the
// URL-safe alphabet, padded or not, choosing the encoding as it does (a
// text the one it picks refuses is refused by receivers built on it),
// but no line breaks, which Go's decoder skips and other readers refuse.
func isBase64(s string) bool {
	if strings.ContainsAny(s, "\r\n") {
		return false
	}
	enc := base64.RawStdEncoding
	switch url, padded := strings.ContainsAny(s, "-_"), len(s)%4 == 0; {
	case url && padded:
		enc = base64.URLEncoding
	case url:
		enc = base64.RawURLEncoding
	case padded:
		enc = base64.StdEncoding
	}
	_, err := enc.DecodeString(s)
	return err == nil
}

package a2a

import (
	"encoding/json"
	"strings"

	"github.com/jetstream-bridge/bridge/projection/internal/jsonscan"
)

// decodeFast decodes a record that is valid UTF-8 and starts with a
// non-space byte, the way json.Unmarshal would, in one pass without
// reflection. It declines (ok false) on anything that is not plain: invalid
// JSON, a type mismatch, null in a known field, a member given twice, a key
// with escapes or non-ASCII letters, a key that matches a field only by case
// folding, an empty array. decode then runs encoding/json, which yields the
// same events or the precise error, so this path never changes an outcome;
// it only spares valid records encoding/json's cost, which is most of a
// projection's.
func decodeFast(v []byte) (events []streamResponse, ok bool) {
	if !jsonscan.Valid(v) {
		return nil, false
	}
	d := decoder{b: v}
	if v[0] != '[' {
		events = make([]streamResponse, 1)
		return events, d.streamResponse(&events[0])
	}
	d.i++
	d.ws()
	if d.peek() == ']' {
		return nil, false
	}
	for {
		events = append(events, streamResponse{})
		if !d.streamResponse(&events[len(events)-1]) {
			return nil, false
		}
		d.ws()
		switch d.peek() {
		case ',':
			d.i++
		case ']':
			return events, true
		default:
			return nil, false
		}
	}
}

// decoder reads a document already known to be valid JSON.
type decoder struct {
	b []byte
	i int
}

func (d *decoder) ws() { d.i = jsonscan.SkipSpace(d.b, d.i) }

func (d *decoder) peek() byte {
	if d.i < len(d.b) {
		return d.b[d.i]
	}
	return 0
}

// object reads a JSON object whose known members are names, calling member
// with the index of each known member present; unknown members are skipped.
func (d *decoder) object(names []string, member func(int) bool) bool {
	d.ws()
	if d.peek() != '{' {
		return false
	}
	d.i++
	d.ws()
	if d.peek() == '}' {
		d.i++
		return true
	}
	var seen uint32
	for {
		d.ws()
		key, ok := d.key()
		if !ok {
			return false
		}
		d.ws()
		if d.peek() != ':' {
			return false
		}
		d.i++
		d.ws()
		known := -1
		for n, name := range names {
			if string(key) == name {
				known = n
				break
			}
		}
		switch {
		case known >= 0:
			if seen&(1<<known) != 0 || !member(known) {
				return false
			}
			seen |= 1 << known
		default:
			for _, name := range names {
				if strings.EqualFold(name, string(key)) {
					return false
				}
			}
			if _, ok := d.raw(); !ok {
				return false
			}
		}
		d.ws()
		switch d.peek() {
		case ',':
			d.i++
		case '}':
			d.i++
			return true
		default:
			return false
		}
	}
}

// key reads a member name made of printable ASCII without escapes, the
// only names compared here; encoding/json folds others in ways not copied.
func (d *decoder) key() ([]byte, bool) {
	if d.peek() != '"' {
		return nil, false
	}
	for j := d.i + 1; j < len(d.b); j++ {
		switch c := d.b[j]; {
		case c == '"':
			k := d.b[d.i+1 : j]
			d.i = j + 1
			return k, true
		case c == '\\' || c >= 0x80:
			return nil, false
		}
	}
	return nil, false
}

func (d *decoder) str(s *string) bool {
	if d.peek() != '"' {
		return false
	}
	start := d.i
	for j := start + 1; j < len(d.b); j++ {
		switch d.b[j] {
		case '"':
			*s = string(d.b[start+1 : j])
			d.i = j + 1
			return true
		case '\\':
			end, ok := jsonscan.SkipString(d.b, start)
			if !ok || json.Unmarshal(d.b[start:end], s) != nil {
				return false
			}
			d.i = end
			return true
		}
	}
	return false
}

func (d *decoder) strPtr(p **string) bool {
	*p = new(string)
	return d.str(*p)
}

func (d *decoder) bool(v *bool) bool {
	switch {
	case d.literal("true"):
		*v = true
	case d.literal("false"):
		*v = false
	default:
		return false
	}
	return true
}

func (d *decoder) literal(lit string) bool {
	if strings.HasPrefix(string(d.b[d.i:]), lit) {
		d.i += len(lit)
		return true
	}
	return false
}

// raw reads any value as it stands, as json.RawMessage does (null included).
// It aliases the record: events never outlive Project.
func (d *decoder) raw() (json.RawMessage, bool) {
	end, ok := jsonscan.SkipValue(d.b, d.i, 0)
	if !ok {
		return nil, false
	}
	v := json.RawMessage(d.b[d.i:end:end])
	d.i = end
	return v, true
}

func (d *decoder) rawTo(p *json.RawMessage) bool {
	v, ok := d.raw()
	*p = v
	return ok
}

// array reads a JSON array, calling elem once per element.
func (d *decoder) array(elem func() bool) bool {
	if d.peek() != '[' {
		return false
	}
	d.i++
	d.ws()
	if d.peek() == ']' {
		d.i++
		return true
	}
	for {
		d.ws()
		if !elem() {
			return false
		}
		d.ws()
		switch d.peek() {
		case ',':
			d.i++
		case ']':
			d.i++
			return true
		default:
			return false
		}
	}
}

func (d *decoder) strings(p *[]string) bool {
	*p = []string{}
	return d.array(func() bool {
		*p = append(*p, "")
		return d.str(&(*p)[len(*p)-1])
	})
}

var streamResponseNames = []string{"task", "message", "statusUpdate", "artifactUpdate"}

func (d *decoder) streamResponse(r *streamResponse) bool {
	return d.object(streamResponseNames, func(n int) bool {
		switch n {
		case 0:
			r.Task = new(task)
			return d.task(r.Task)
		case 1:
			r.Message = new(message)
			return d.message(r.Message)
		case 2:
			r.StatusUpdate = new(taskStatusUpdateEvent)
			return d.statusUpdate(r.StatusUpdate)
		default:
			r.ArtifactUpdate = new(taskArtifactUpdateEvent)
			return d.artifactUpdate(r.ArtifactUpdate)
		}
	})
}

var taskNames = []string{"id", "contextId", "status", "artifacts", "history", "metadata"}

func (d *decoder) task(t *task) bool {
	return d.object(taskNames, func(n int) bool {
		switch n {
		case 0:
			return d.str(&t.ID)
		case 1:
			return d.str(&t.ContextID)
		case 2:
			t.Status = new(taskStatus)
			return d.taskStatus(t.Status)
		case 3:
			t.Artifacts = []artifact{}
			return d.array(func() bool {
				t.Artifacts = append(t.Artifacts, artifact{})
				return d.artifact(&t.Artifacts[len(t.Artifacts)-1])
			})
		case 4:
			t.History = []message{}
			return d.array(func() bool {
				t.History = append(t.History, message{})
				return d.message(&t.History[len(t.History)-1])
			})
		default:
			return d.rawTo(&t.Metadata)
		}
	})
}

var taskStatusNames = []string{"state", "message", "timestamp"}

func (d *decoder) taskStatus(s *taskStatus) bool {
	return d.object(taskStatusNames, func(n int) bool {
		switch n {
		case 0:
			return d.str(&s.State)
		case 1:
			s.Message = new(message)
			return d.message(s.Message)
		default:
			return d.str(&s.Timestamp)
		}
	})
}

var messageNames = []string{"messageId", "contextId", "taskId", "role", "parts", "metadata", "extensions", "referenceTaskIds"}

func (d *decoder) message(m *message) bool {
	return d.object(messageNames, func(n int) bool {
		switch n {
		case 0:
			return d.str(&m.MessageID)
		case 1:
			return d.str(&m.ContextID)
		case 2:
			return d.str(&m.TaskID)
		case 3:
			return d.str(&m.Role)
		case 4:
			return d.parts(&m.Parts)
		case 5:
			return d.rawTo(&m.Metadata)
		case 6:
			return d.strings(&m.Extensions)
		default:
			return d.strings(&m.ReferenceTaskIDs)
		}
	})
}

func (d *decoder) parts(p *[]part) bool {
	*p = []part{}
	return d.array(func() bool {
		*p = append(*p, part{})
		return d.part(&(*p)[len(*p)-1])
	})
}

var partNames = []string{"text", "raw", "url", "data", "metadata", "filename", "mediaType"}

func (d *decoder) part(p *part) bool {
	return d.object(partNames, func(n int) bool {
		switch n {
		case 0:
			return d.strPtr(&p.Text)
		case 1:
			return d.strPtr(&p.Raw)
		case 2:
			return d.strPtr(&p.URL)
		case 3:
			return d.rawTo(&p.Data)
		case 4:
			return d.rawTo(&p.Metadata)
		case 5:
			return d.str(&p.Filename)
		default:
			return d.str(&p.MediaType)
		}
	})
}

var artifactNames = []string{"artifactId", "name", "description", "parts", "metadata", "extensions"}

func (d *decoder) artifact(a *artifact) bool {
	return d.object(artifactNames, func(n int) bool {
		switch n {
		case 0:
			return d.str(&a.ArtifactID)
		case 1:
			return d.str(&a.Name)
		case 2:
			return d.str(&a.Description)
		case 3:
			return d.parts(&a.Parts)
		case 4:
			return d.rawTo(&a.Metadata)
		default:
			return d.strings(&a.Extensions)
		}
	})
}

var statusUpdateNames = []string{"taskId", "contextId", "status", "metadata"}

func (d *decoder) statusUpdate(u *taskStatusUpdateEvent) bool {
	return d.object(statusUpdateNames, func(n int) bool {
		switch n {
		case 0:
			return d.str(&u.TaskID)
		case 1:
			return d.str(&u.ContextID)
		case 2:
			u.Status = new(taskStatus)
			return d.taskStatus(u.Status)
		default:
			return d.rawTo(&u.Metadata)
		}
	})
}

var artifactUpdateNames = []string{"taskId", "contextId", "artifact", "append", "lastChunk", "metadata"}

func (d *decoder) artifactUpdate(u *taskArtifactUpdateEvent) bool {
	return d.object(artifactUpdateNames, func(n int) bool {
		switch n {
		case 0:
			return d.str(&u.TaskID)
		case 1:
			return d.str(&u.ContextID)
		case 2:
			u.Artifact = new(artifact)
			return d.artifact(u.Artifact)
		case 3:
			return d.bool(&u.Append)
		case 4:
			return d.bool(&u.LastChunk)
		default:
			return d.rawTo(&u.Metadata)
		}
	})
}

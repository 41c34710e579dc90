package a2a

// The types below mirror the A2A 1.0 data model (specification/a2a.proto,
// package lf.a2a.v1) in its JSON form: camelCase names, enums by their
// SCREAMING_SNAKE names. They hold exactly the fields the specification
// defines, so unknown members of a journal event (a 0.3 "kind", a draft
// "final") are dropped on the way through rather than forwarded.
// Free-form members (metadata, data parts) stay raw JSON (value) and are
// forwarded as they are, compacted. A member under a field's proto name
// (task_id) is refused through a protoName field; those come first, where
// fields of no size add no padding.

// streamResponse is one push notification body: exactly one member is set.
type streamResponse struct {
	ProtoStatusUpdate   protoName `json:"status_update,omitzero"`
	ProtoArtifactUpdate protoName `json:"artifact_update,omitzero"`

	Task           *task                    `json:"task,omitempty"`
	Message        *message                 `json:"message,omitempty"`
	StatusUpdate   *taskStatusUpdateEvent   `json:"statusUpdate,omitempty"`
	ArtifactUpdate *taskArtifactUpdateEvent `json:"artifactUpdate,omitempty"`
}

type task struct {
	ProtoContextID protoName `json:"context_id,omitzero"`

	ID        string      `json:"id"`
	ContextID string      `json:"contextId"`
	Status    *taskStatus `json:"status"`
	Artifacts []artifact  `json:"artifacts,omitempty"`
	History   []message   `json:"history,omitempty"`
	Metadata  value       `json:"metadata,omitempty"`
}

type taskStatus struct {
	State     string   `json:"state"`
	Message   *message `json:"message,omitempty"`
	Timestamp string   `json:"timestamp,omitempty"`
}

type message struct {
	ProtoMessageID        protoName `json:"message_id,omitzero"`
	ProtoContextID        protoName `json:"context_id,omitzero"`
	ProtoTaskID           protoName `json:"task_id,omitzero"`
	ProtoReferenceTaskIDs protoName `json:"reference_task_ids,omitzero"`

	MessageID        string   `json:"messageId"`
	ContextID        string   `json:"contextId,omitempty"`
	TaskID           string   `json:"taskId,omitempty"`
	Role             string   `json:"role"`
	Parts            []part   `json:"parts"`
	Metadata         value    `json:"metadata,omitempty"`
	Extensions       []string `json:"extensions,omitempty"`
	ReferenceTaskIDs []string `json:"referenceTaskIds,omitempty"`
}

// part holds one of text, raw, url or data. Raw is kept as the base64 text
// it arrived as (ProtoJSON accepts standard and URL-safe alphabets, padded
// or not), so the bytes are never re-encoded.
type part struct {
	ProtoMediaType protoName `json:"media_type,omitzero"`

	Text      *string `json:"text,omitempty"`
	Raw       *string `json:"raw,omitempty"`
	URL       *string `json:"url,omitempty"`
	Data      value   `json:"data,omitempty"`
	Metadata  value   `json:"metadata,omitempty"`
	Filename  string  `json:"filename,omitempty"`
	MediaType string  `json:"mediaType,omitempty"`
}

type artifact struct {
	ProtoArtifactID protoName `json:"artifact_id,omitzero"`

	ArtifactID  string   `json:"artifactId"`
	Name        string   `json:"name,omitempty"`
	Description string   `json:"description,omitempty"`
	Parts       []part   `json:"parts"`
	Metadata    value    `json:"metadata,omitempty"`
	Extensions  []string `json:"extensions,omitempty"`
}

type taskStatusUpdateEvent struct {
	ProtoTaskID    protoName `json:"task_id,omitzero"`
	ProtoContextID protoName `json:"context_id,omitzero"`

	TaskID    string      `json:"taskId"`
	ContextID string      `json:"contextId"`
	Status    *taskStatus `json:"status"`
	Metadata  value       `json:"metadata,omitempty"`
}

type taskArtifactUpdateEvent struct {
	ProtoTaskID    protoName `json:"task_id,omitzero"`
	ProtoContextID protoName `json:"context_id,omitzero"`
	ProtoLastChunk protoName `json:"last_chunk,omitzero"`

	TaskID    string    `json:"taskId"`
	ContextID string    `json:"contextId"`
	Artifact  *artifact `json:"artifact"`
	Append    bool      `json:"append,omitempty"`
	LastChunk bool      `json:"lastChunk,omitempty"`
	Metadata  value     `json:"metadata,omitempty"`
}

// taskState reports whether s is a task state of A2A 1.0 and whether it is
// terminal. TASK_STATE_UNSPECIFIED is the proto's zero value and is refused:
// a status must say what state the task is in.
func taskState(s string) (known, terminal bool) {
	switch s {
	case "TASK_STATE_SUBMITTED", "TASK_STATE_WORKING", "TASK_STATE_INPUT_REQUIRED", "TASK_STATE_AUTH_REQUIRED":
		return true, false
	case "TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED":
		return true, true
	}
	return false, false
}

// Roles of A2A 1.0; ROLE_UNSPECIFIED is refused like an unset state.
const (
	roleUser  = "ROLE_USER"
	roleAgent = "ROLE_AGENT"
)

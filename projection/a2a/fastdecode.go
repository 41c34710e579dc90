package a2a

import (
	jsonv2 "github.com/go-json-experiment/json"
	jsonv1 "github.com/go-json-experiment/json/v1"
)

// decodeFast decodes a record that is valid UTF-8 and starts with a
// non-space byte, the way json.Unmarshal would, with json/v2
// (github.com/go-json-experiment/json): under half encoding/json's cost,
// which is most of a projection's, and below a hand-written decoder's on
// records of 1 KiB and more (that one fell back to encoding/json for every
// string with an escape, as a line break in an agent's text).
//
// It declines (ok false) whatever json/v2 refuses: invalid JSON, a type
// mismatch, a member given twice (also by case), a lone surrogate escape,
// an empty array. decode then runs encoding/json, which yields the same
// events or the precise error, so this path never changes an outcome.
// Names match case-insensitively as encoding/json matches them; json/v2
// would also ignore '_' and '-', and so read "task_id" as taskId where
// encoding/json drops it.
func decodeFast(v []byte) (events []streamResponse, ok bool) {
	opts := jsonv2.JoinOptions(jsonv2.MatchCaseInsensitiveNames(true), jsonv1.MatchCaseSensitiveDelimiter(true))
	if v[0] != '[' {
		events = make([]streamResponse, 1)
		return events, jsonv2.Unmarshal(v, &events[0], opts) == nil
	}
	if jsonv2.Unmarshal(v, &events, opts) != nil || len(events) == 0 {
		return nil, false
	}
	return events, true
}

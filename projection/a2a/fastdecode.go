package a2a

import (
	jsonv2 "github.com/go-json-experiment/json"
	jsonv1 "github.com/go-json-experiment/json/v1"
)

// decodeFast decodes a record that is valid UTF-8 and starts with a
// non-space byte with json/v2 (github.com/go-json-experiment/json): under
// half encoding/json's cost, which is most of a projection's.
//
// Its refusals are the ones a strict A2A 1.0 reader needs on top of what
// encoding/json checks: a member given twice at any depth (also by case,
// as names match case-insensitively), a lone surrogate escape, a number
// beyond float64 in a Struct or Value (see value), a member under its
// proto name (see protoName). What it accepts, encoding/json decodes to
// the same events (FuzzDecodeFast). Names match case-insensitively as
// encoding/json matches them; json/v2 would also ignore '_' and '-', and
// so read "task_id" as taskId where encoding/json does not.
func decodeFast(v []byte) (events []streamResponse, err error) {
	opts := jsonv2.JoinOptions(jsonv2.MatchCaseInsensitiveNames(true), jsonv1.MatchCaseSensitiveDelimiter(true))
	if v[0] != '[' {
		events = make([]streamResponse, 1)
		return events, jsonv2.Unmarshal(v, &events[0], opts)
	}
	return events, jsonv2.Unmarshal(v, &events, opts)
}

package projection_test

import (
	"testing"

	"github.com/jetstream-bridge/bridge/projection"
)

const (
	parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	state  = "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"
)

func TestTraceContextIsThePublishedOneVerbatim(t *testing.T) {
	for _, tc := range []struct {
		name          string
		header        map[string][]string
		parent, state string
	}{
		{"none", nil, "", ""},
		{"lower case", map[string][]string{"traceparent": {parent}, "tracestate": {state}}, parent, state},
		{"canonical", map[string][]string{"Traceparent": {parent}, "Tracestate": {state}}, parent, state},
		{"mixed case", map[string][]string{"TraceParent": {parent}}, parent, ""},
		{"tracestate in two values", map[string][]string{"traceparent": {parent}, "tracestate": {"a=1", "b=2"}}, parent, "a=1,b=2"},
		{"later version with more fields", map[string][]string{"traceparent": {"01" + parent[2:] + "-what-comes"}}, "01" + parent[2:] + "-what-comes", ""},
		{"tracestate without traceparent", map[string][]string{"tracestate": {state}}, "", ""},
		{"upper-case hex", map[string][]string{"traceparent": {"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"}}, "", ""},
		{"zero trace id", map[string][]string{"traceparent": {"00-00000000000000000000000000000000-00f067aa0ba902b7-01"}}, "", ""},
		{"zero parent id", map[string][]string{"traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01"}}, "", ""},
		{"version ff", map[string][]string{"traceparent": {"ff" + parent[2:]}}, "", ""},
		{"version 00 too long", map[string][]string{"traceparent": {parent + "-00"}}, "", ""},
		{"short", map[string][]string{"traceparent": {parent[:54]}}, "", ""},
		{"given twice", map[string][]string{"traceparent": {parent}, "Traceparent": {parent}}, "", ""},
		{"two values", map[string][]string{"traceparent": {parent, parent}}, "", ""},
		{"control character in tracestate", map[string][]string{"traceparent": {parent}, "tracestate": {"a=\x01"}}, parent, ""},
	} {
		r := &projection.Record{Header: tc.header}
		p, s := r.TraceContext()
		if p != tc.parent || s != tc.state {
			t.Errorf("%s: TraceContext() = %q, %q; want %q, %q", tc.name, p, s, tc.parent, tc.state)
		}
	}
}

// Package filter compiles and runs a registration's filter (CONTRACT
// §13): a CEL expression, checked and run with cel-go, over the CloudEvent
// the registration would send (`event`), its data (`data`), the NATS
// headers (`headers`) and subject (`subject`).
//
// A Program is compiled once per expression and is safe for concurrent
// use. An Input is one journal message as every filter reads it: built
// once per message and shared by every registration that filters it, its
// data parsed only when an expression reads `data`, and then once.
package filter

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common"
	"cel.dev/cel-go/common/cost"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/interpreter"

	"github.com/jetstream-bridge/bridge/projection"
)

const (
	// CostLimit bounds one evaluation, in CEL's cost units (about one
	// per operation, per element or per ten bytes of a string): past it
	// the evaluation fails, as an expression failing on that message does.
	CostLimit = 1_000_000
	// EstimatedCostLimit bounds an expression's estimated worst case over
	// every message of at most MaxMessageBytes: past it the expression is
	// refused at create and PUT.
	EstimatedCostLimit = 10_000_000
	// MaxMessageBytes is the size the estimate gives every string, bytes,
	// list and map a message holds: the NATS default max_payload.
	MaxMessageBytes = 1 << 20
	// MaxExpressionBytes bounds an expression's text.
	MaxExpressionBytes = 4096
)

// The variables an expression reads.
const (
	varEvent   = "event"
	varData    = "data"
	varHeaders = "headers"
	varSubject = "subject"
)

var (
	envOnce sync.Once
	env     *cel.Env
	envErr  error
)

// environment is the one CEL environment every filter is checked in.
func environment() (*cel.Env, error) {
	envOnce.Do(func() {
		env, envErr = cel.NewEnv(
			cel.Variable(varEvent, cel.MapType(cel.StringType, cel.DynType)),
			cel.Variable(varData, cel.DynType),
			cel.Variable(varHeaders, cel.MapType(cel.StringType, cel.StringType)),
			cel.Variable(varSubject, cel.StringType),
			cel.CrossTypeNumericComparisons(true),
			cel.DefaultUTCTimeZone(true),
		)
	})
	return env, envErr
}

// Program is a compiled filter.
type Program struct {
	expr string
	prg  cel.Program
}

// Expr is the expression p was compiled from.
func (p *Program) Expr() string { return p.expr }

// Compile checks expr and compiles it. Its error is meant for the caller
// who wrote expr: CEL's message with the line and column, or why the
// expression is refused.
func Compile(expr string) (*Program, error) {
	if strings.TrimSpace(expr) == "" {
		return nil, errors.New("filter must not be empty")
	}
	if len(expr) > MaxExpressionBytes {
		return nil, fmt.Errorf("filter is %d bytes, at most %d", len(expr), MaxExpressionBytes)
	}
	e, err := environment()
	if err != nil {
		return nil, fmt.Errorf("filter environment: %w", err)
	}
	ast, iss := e.CompileSource(common.NewStringSource(expr, "filter"))
	if iss.Err() != nil {
		return nil, fmt.Errorf("filter does not compile: %s", iss.Err())
	}
	if t := ast.OutputType(); !t.IsExactType(types.BoolType) && !t.IsExactType(types.DynType) {
		return nil, fmt.Errorf("filter must yield a bool, not %s", t)
	}
	est, err := e.EstimateCost(ast, sizes{})
	if err != nil {
		return nil, fmt.Errorf("filter cost cannot be estimated: %w", err)
	}
	if est.Max > EstimatedCostLimit {
		return nil, fmt.Errorf("filter may cost up to %s on a message of %d bytes, over the bound of %d: avoid nested comprehensions over data",
			costString(est.Max), MaxMessageBytes, EstimatedCostLimit)
	}
	prg, err := e.Program(ast, cel.CostLimit(CostLimit), cel.EvalOptions(cel.OptOptimize))
	if err != nil {
		return nil, fmt.Errorf("filter does not compile: %w", err)
	}
	return &Program{expr: expr, prg: prg}, nil
}

func costString(n uint64) string {
	if n == ^uint64(0) {
		return "an unbounded cost"
	}
	return fmt.Sprint(n)
}

// sizes is the cost estimate's bound on what a message holds: every
// string, bytes, list and map reachable from a variable has at most
// MaxMessageBytes elements or bytes.
type sizes struct{}

func (sizes) EstimateSize(n cost.AstNode) *cost.SizeEstimate {
	if len(n.Path()) == 0 {
		return nil
	}
	return &cost.SizeEstimate{Min: 0, Max: MaxMessageBytes}
}

func (sizes) EstimateCallCost(string, string, *cost.AstNode, []cost.AstNode) *cost.CallEstimate {
	return nil
}

// Match runs p on in: true delivers, false passes the message over. An
// error means p failed on this message (a missing key, a type mismatch,
// the cost limit, a result that is not a bool).
func (p *Program) Match(in *Input) (bool, error) {
	out, _, err := p.prg.Eval(in)
	if err != nil {
		return false, err
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, fmt.Errorf("filter yielded %s, not a bool", out.Type().(ref.Type).TypeName())
	}
	return bool(b), nil
}

// Input is one journal message as a filter reads it; it implements CEL's
// activation. Safe for concurrent use: its data is parsed at most once,
// by the first evaluation that reads it.
type Input struct {
	event, headers, subject ref.Val

	once    sync.Once
	rawData []byte
	json    bool
	parse   func(raw []byte) ref.Val
	data    ref.Val
}

var _ interpreter.Activation = (*Input)(nil)

// NewInput is ev, the event of rec, as filters read it. parse, when not
// nil, returns the JSON data of rec parsed (see ParseJSON); a caller
// shares one parse between the Inputs of one record through it.
func NewInput(ev projection.Event, rec *projection.Record, parse func(raw []byte) ref.Val) *Input {
	if parse == nil {
		parse = ParseJSON
	}
	in := &Input{
		event:   types.DefaultTypeAdapter.NativeToValue(ev.Attributes),
		headers: types.NewStringStringMap(types.DefaultTypeAdapter, Headers(rec.Header)),
		subject: types.String(rec.Subject),
		rawData: ev.Data,
		json:    IsJSON(ev.DataContentType),
		parse:   parse,
	}
	return in
}

// ResolveName returns a variable's value.
func (in *Input) ResolveName(name string) (any, bool) {
	switch name {
	case varEvent:
		return in.event, true
	case varHeaders:
		return in.headers, true
	case varSubject:
		return in.subject, true
	case varData:
		in.once.Do(func() {
			if in.json {
				in.data = in.parse(in.rawData)
			} else {
				in.data = types.Bytes(in.rawData)
			}
		})
		return in.data, true
	}
	return nil, false
}

// Parent is nil: an Input holds every variable.
func (*Input) Parent() interpreter.Activation { return nil }

// Headers are NATS headers as filters read them: the lower-case name to
// its first value.
func Headers(h map[string][]string) map[string]string {
	out := make(map[string]string, len(h))
	for k, vs := range h {
		if len(vs) == 0 {
			continue
		}
		lk := strings.ToLower(k)
		if _, dup := out[lk]; dup && lk != k {
			// Spelt twice in two cases: the lower-case spelling wins,
			// whatever order the map gave.
			continue
		}
		out[lk] = vs[0]
	}
	return out
}

// IsJSON reports whether a data content type is JSON: application/json
// or any +json type, parameters ignored, case folded.
func IsJSON(contentType string) bool {
	mt, _, _ := strings.Cut(contentType, ";")
	mt = strings.ToLower(strings.TrimSpace(mt))
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

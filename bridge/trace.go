package bridge

import (
	"context"
	"encoding/hex"
	"net/http"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/jetstream-bridge/bridge/cursor"
	"github.com/jetstream-bridge/bridge/projection"
	"github.com/jetstream-bridge/bridge/webhook"
)

// TracerName is the instrumentation scope of the bridge's spans.
const TracerName = "github.com/jetstream-bridge/bridge"

// The attributes of a POST's span beside OpenTelemetry's HTTP ones: they
// find the attempt in the attempt log and the message in the stream.
const (
	AttrRegistration = attribute.Key("bridge.registration.id")
	AttrSequence     = attribute.Key("bridge.stream.sequence")
	AttrAttempt      = attribute.Key("bridge.attempt")
	AttrNamespace    = attribute.Key("bridge.namespace")
	AttrWebhookID    = attribute.Key("bridge.webhook.id")
	attrMethod       = attribute.Key("http.request.method")
	attrStatus       = attribute.Key("http.response.status_code")
	attrErrorType    = attribute.Key("error.type")
)

// WithTracer traces every POST the worker makes with a span from tp: a
// client span, the child of the trace the message was published in when
// it carries a traceparent, whose context the receiver gets in place of
// the published one. Without it (or with a nil tp) no span is made and
// the published context goes on verbatim.
func WithTracer(tp trace.TracerProvider) Option {
	return func(w *Worker) error {
		if tp != nil {
			w.tracer = newTracing(tp, w.proj)
		}
		return nil
	}
}

// tracing is a worker's tracer and the options every span starts with,
// made once: options built per POST cost allocations on a path that
// makes tens of thousands of POSTs a second.
type tracing struct {
	tracer trace.Tracer
	// child starts a span under the published trace, root one of its own.
	child, root []trace.SpanStartOption
	// retracer, when the projection's bodies carry a trace context, puts
	// the span's in them.
	retracer projection.Retracer
}

func newTracing(tp trace.TracerProvider, p projection.Projection) *tracing {
	kind := trace.WithSpanKind(trace.SpanKindClient)
	r, _ := p.(projection.Retracer)
	return &tracing{
		tracer:   tp.Tracer(TracerName),
		retracer: r,
		child:    []trace.SpanStartOption{kind},
		// No published trace: the POST starts one, whatever span the
		// caller's context (an admin request's, say) may hold.
		root: []trace.SpanStartOption{kind, trace.WithNewRoot()},
	}
}

// send makes one POST, traced when the worker has a tracer. Without one
// it is the sender's Send and nothing else: the untraced path, which
// carries every POST of a bridge that exports no spans, allocates nothing
// for tracing.
func (w *Worker) send(ctx context.Context, reg *cursor.Registration, seq uint64, attempt uint32, req webhook.Request) webhook.Outcome {
	if w.tracer == nil {
		return w.sender.Send(ctx, req)
	}
	return w.tracer.send(ctx, w.sender, reg, seq, attempt, req)
}

func (t *tracing) send(ctx context.Context, s Sender, reg *cursor.Registration, seq uint64, attempt uint32, req webhook.Request) webhook.Outcome {
	opts := t.root
	if parent, ok := published(req.Message.Header); ok {
		ctx, opts = trace.ContextWithRemoteSpanContext(ctx, parent), t.child
	}
	ctx, span := t.tracer.Start(ctx, "POST", opts...)
	sc := span.SpanContext()
	req.TraceParent, req.TraceState = traceparent(sc), sc.TraceState().String()
	if t.retracer != nil && req.TraceParent != "" {
		if m, ok := t.retracer.Retrace(req.Message, req.TraceParent, req.TraceState); ok {
			req.Message = m
		}
	}
	out := s.Send(ctx, req)
	endSpan(span, reg, seq, attempt, &req, &out)
	return out
}

// published is the trace context the projection put in the message's
// headers, under their canonical names, when the message carried a valid
// one. Read here rather than by a propagator, which canonicalises both
// names again and puts the result in a context, on every POST.
func published(h http.Header) (trace.SpanContext, bool) {
	tp := h[projection.TraceparentHeader]
	if len(tp) != 1 || len(tp[0]) < 55 {
		return trace.SpanContext{}, false
	}
	var cfg trace.SpanContextConfig
	var flags [1]byte
	v := tp[0]
	if _, err := hex.Decode(cfg.TraceID[:], []byte(v[3:35])); err != nil {
		return trace.SpanContext{}, false
	}
	if _, err := hex.Decode(cfg.SpanID[:], []byte(v[36:52])); err != nil {
		return trace.SpanContext{}, false
	}
	if _, err := hex.Decode(flags[:], []byte(v[53:55])); err != nil {
		return trace.SpanContext{}, false
	}
	cfg.TraceFlags, cfg.Remote = trace.TraceFlags(flags[0])&trace.FlagsSampled, true
	if ts := h[projection.TracestateHeader]; len(ts) == 1 {
		// A tracestate the SDK cannot read is dropped, as a propagator
		// drops it; the traceparent still holds.
		cfg.TraceState, _ = trace.ParseTraceState(ts[0])
	}
	sc := trace.NewSpanContext(cfg)
	return sc, sc.IsValid()
}

// endSpan records what the POST was and how it ended, in one call: the
// span grows its attributes once. Outcome.Error never holds a secret, a
// token or the URL's path, so it may leave the process.
func endSpan(span trace.Span, reg *cursor.Registration, seq uint64, attempt uint32, req *webhook.Request, out *webhook.Outcome) {
	var kv [8]attribute.KeyValue
	attrs := append(kv[:0],
		AttrRegistration.String(reg.ID),
		AttrSequence.Int64(int64(seq)),
		AttrAttempt.Int64(int64(attempt)),
		AttrNamespace.String(reg.Namespace),
		AttrWebhookID.String(req.Message.ID),
		attrMethod.String("POST"),
	)
	if out.Status != 0 {
		attrs = append(attrs, attrStatus.Int(out.Status))
	}
	if !out.OK() {
		kind := outcomeOf(out)
		if out.Status != 0 {
			kind = strconv.Itoa(out.Status)
		}
		attrs = append(attrs, attrErrorType.String(kind))
		span.SetStatus(codes.Error, out.Error())
	}
	span.SetAttributes(attrs...)
	span.End()
}

// traceparent is sc as a version 00 W3C traceparent, or "" for none (a
// tracer that makes no spans).
func traceparent(sc trace.SpanContext) string {
	if !sc.IsValid() {
		return ""
	}
	var b [55]byte
	tid, sid := sc.TraceID(), sc.SpanID()
	b[0], b[1], b[2] = '0', '0', '-'
	hex.Encode(b[3:35], tid[:])
	b[35] = '-'
	hex.Encode(b[36:52], sid[:])
	b[52] = '-'
	hex.Encode(b[53:55], []byte{byte(sc.TraceFlags())})
	return string(b[:])
}

// number is the attempt number a POST's span reports: the worker's when
// it knows it, else one past the row's consecutive failures, which is
// what the attempt log numbers a retry of them. A replay, or a POST
// repeated after a crash, which only the log remembers, may count lower
// in its span than in the log.
func (p post) number(reg *cursor.Registration) uint32 {
	if p.attempt != 0 {
		return p.attempt
	}
	return reg.Attempts + 1
}

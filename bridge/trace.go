package bridge

import (
	"context"
	"encoding/hex"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/jetstream-bridge/bridge/cursor"
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
			w.tracer = tp.Tracer(TracerName)
		}
		return nil
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
	return w.sendTraced(ctx, reg, seq, attempt, req)
}

func (w *Worker) sendTraced(ctx context.Context, reg *cursor.Registration, seq uint64, attempt uint32, req webhook.Request) webhook.Outcome {
	// The projection put the published context, if valid, in the
	// message's headers under their canonical names.
	parent := propagation.TraceContext{}.Extract(ctx, propagation.HeaderCarrier(req.Message.Header))
	opts := []trace.SpanStartOption{
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(
			AttrRegistration.String(reg.ID),
			AttrSequence.Int64(int64(seq)),
			AttrAttempt.Int64(int64(attempt)),
			AttrNamespace.String(reg.Namespace),
			AttrWebhookID.String(req.Message.ID),
			attrMethod.String("POST"),
		),
	}
	if !trace.SpanContextFromContext(parent).IsRemote() {
		// No published trace: the POST starts one, whatever span the
		// caller's context (an admin request's, say) may hold.
		opts = append(opts, trace.WithNewRoot())
	}
	ctx, span := w.tracer.Start(parent, "POST", opts...)
	sc := span.SpanContext()
	req.TraceParent, req.TraceState = traceparent(sc), sc.TraceState().String()
	out := w.sender.Send(ctx, req)
	endSpan(span, &out)
	return out
}

// endSpan records how the POST ended. Outcome.Error never holds a
// secret, a token or the URL's path, so it may leave the process.
func endSpan(span trace.Span, out *webhook.Outcome) {
	if out.Status != 0 {
		span.SetAttributes(attrStatus.Int(out.Status))
	}
	if !out.OK() {
		kind := outcomeOf(out)
		if out.Status != 0 {
			kind = strconv.Itoa(out.Status)
		}
		span.SetAttributes(attrErrorType.String(kind))
		span.SetStatus(codes.Error, out.Error())
	}
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

package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/jetstream-bridge/bridge/bridge"
	"github.com/jetstream-bridge/bridge/internal/spanbatch"
)

// The OpenTelemetry variables the bridge reads itself, to decide whether
// to export spans at all; the exporter and the SDK read the others
// (headers, timeout, compression, certificates, the sampler, the batch
// processor's limits) as the specification says.
const (
	envOTLPEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	envOTLPTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	envOTLPProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	envOTLPTracesProtocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	envTracesExporter     = "OTEL_TRACES_EXPORTER"
	envSDKDisabled        = "OTEL_SDK_DISABLED"

	// defaultServiceName is service.name unless OTEL_SERVICE_NAME or
	// OTEL_RESOURCE_ATTRIBUTES says otherwise.
	defaultServiceName = "jetstream-bridge"
	// protocolHTTPProtobuf is the one OTLP protocol the bridge speaks.
	protocolHTTPProtobuf = "http/protobuf"
	// tracingShutdown bounds the last export at a clean stop.
	tracingShutdown = 5 * time.Second
)

// startTracing returns the tracer provider that exports a span per POST
// over OTLP/HTTP when the environment names an OTLP endpoint, through a
// batching span processor (internal/spanbatch), so a POST hands its span
// over and never waits for the collector. Without an endpoint it returns
// nil and starts nothing: the delivery path then makes no span at all.
func startTracing(ctx context.Context, getenv func(string) string, version string, log *slog.Logger) (*sdktrace.TracerProvider, error) {
	endpoint, err := otlpEndpoint(getenv)
	if err != nil || endpoint == "" {
		return nil, err
	}
	batching, err := spanbatch.ConfigFromEnv(getenv)
	if err != nil {
		return nil, err
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", defaultServiceName), attribute.String("service.version", version)),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
		resource.WithTelemetrySDK(),
	)
	if err != nil {
		return nil, fmt.Errorf("OpenTelemetry resource from OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	// Export failures are the SDK's to report; they reach the bridge's
	// log, not the standard library's.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("exporting spans failed; deliveries go on", "error", err)
	}))
	log.Info("exporting a span per POST over OTLP/HTTP", "endpoint", redactURLs(endpoint))
	return sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spanbatch.New(exp, batching)), sdktrace.WithResource(res)), nil
}

// otlpEndpoint is the endpoint spans go to, or "" when none are exported:
// no endpoint set, OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none.
// A protocol or an exporter the bridge does not have is refused rather
// than ignored, so an operator never waits for spans that cannot come.
func otlpEndpoint(getenv func(string) string) (string, error) {
	if strings.EqualFold(strings.TrimSpace(getenv(envSDKDisabled)), "true") {
		return "", nil
	}
	switch exp := strings.TrimSpace(getenv(envTracesExporter)); exp {
	case "", "otlp":
	case "none":
		return "", nil
	default:
		return "", fmt.Errorf("%s=%q: the bridge exports spans with otlp or none", envTracesExporter, exp)
	}
	endpoint := firstSet(getenv, envOTLPTracesEndpoint, envOTLPEndpoint)
	if endpoint == "" {
		return "", nil
	}
	for _, name := range []string{envOTLPTracesProtocol, envOTLPProtocol} {
		if p := strings.TrimSpace(getenv(name)); p != "" {
			if p != protocolHTTPProtobuf {
				return "", fmt.Errorf("%s=%q: the bridge exports OTLP over HTTP as %s", name, p, protocolHTTPProtobuf)
			}
			break
		}
	}
	return endpoint, nil
}

func firstSet(getenv func(string) string, names ...string) string {
	for _, n := range names {
		if v := strings.TrimSpace(getenv(n)); v != "" {
			return v
		}
	}
	return ""
}

// tracing is the worker option of tp; none without a provider.
func tracing(tp trace.TracerProvider) []bridge.Option {
	if tp == nil {
		return nil
	}
	return []bridge.Option{bridge.WithTracer(tp)}
}

// tracerProvider is Config.TracerProvider, else the one the OTEL_*
// variables ask for (nil when they ask for none), with what stops it.
func tracerProvider(ctx context.Context, c *Config, getenv func(string) string) (trace.TracerProvider, func(), error) {
	if c.TracerProvider != nil {
		return c.TracerProvider, func() {}, nil
	}
	tp, err := startTracing(ctx, getenv, c.Version, c.Logger)
	if err != nil || tp == nil {
		return nil, func() {}, err // a nil *TracerProvider in the interface would not be nil
	}
	return tp, func() { stopTracing(tp, c.Logger) }, nil
}

// stopTracing exports the spans still queued and stops the provider.
func stopTracing(tp *sdktrace.TracerProvider, log *slog.Logger) {
	if tp == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), tracingShutdown)
	defer cancel()
	if err := tp.Shutdown(ctx); err != nil {
		log.Warn("exporting the last spans at stop", "error", err)
	}
}

package daemon

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jetstream-bridge/bridge/internal/testutil"
)

func env(vars map[string]string) func(string) string {
	return func(name string) string { return vars[name] }
}

func TestSpansAreExportedOnlyWhenAnOTLPEndpointIsSet(t *testing.T) {
	for _, tc := range []struct {
		vars     map[string]string
		endpoint string
		err      string
	}{
		{nil, "", ""},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, "http://collector:4318", ""},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://other:4318"}, "http://collector:4318/v1/traces", ""},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, "http://c:4318", ""},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"}, "", ""},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none"}, "", ""},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "zipkin"}, "", `OTEL_TRACES_EXPORTER="zipkin"`},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "", `OTEL_EXPORTER_OTLP_PROTOCOL="grpc": the bridge exports OTLP over HTTP as http/protobuf`},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}, "http://c:4318", ""},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"}, "", `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL="http/json"`},
	} {
		got, err := otlpEndpoint(env(tc.vars))
		if got != tc.endpoint || (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%v: endpoint %q, error %v; want %q, %q", tc.vars, got, err, tc.endpoint, tc.err)
		}
	}
}

// The exporter reads the OTEL_* variables itself; the bridge names its
// service unless OTEL_SERVICE_NAME does, and a clean stop exports what is
// queued.
func TestTheProviderExportsToTheEnvironmentsCollector(t *testing.T) {
	for _, service := range []string{"", "billing-bridge"} {
		sink := testutil.NewOTLPSink(t)
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", sink.URL)
		t.Setenv("OTEL_SERVICE_NAME", service)
		var logs bytes.Buffer
		log := slog.New(slog.NewTextHandler(&logs, nil))
		tp, err := startTracing(context.Background(), env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": sink.URL}), "dev", log)
		if err != nil || tp == nil {
			t.Fatalf("startTracing: %v, %v", tp, err)
		}
		_, span := tp.Tracer("test").Start(context.Background(), "POST")
		span.End()
		stopTracing(tp, log)
		got := sink.WaitSpans(t, 1, 5*time.Second)[0]
		want := service
		if want == "" {
			want = defaultServiceName
		}
		if got.Service != want || got.Name != "POST" {
			t.Errorf("OTEL_SERVICE_NAME=%q: span %+v, want service %q", service, got, want)
		}
		if !strings.Contains(logs.String(), "exporting a span per POST over OTLP/HTTP") {
			t.Errorf("the start is not logged: %s", logs.String())
		}
	}
	c := &Config{Logger: slog.New(slog.DiscardHandler)}
	tp, stop, err := tracerProvider(context.Background(), c, env(nil))
	defer stop()
	if tp != nil || err != nil || len(tracing(tp)) != 0 {
		t.Errorf("without an endpoint: provider %v, error %v, %d worker options; want none", tp, err, len(tracing(tp)))
	}
}

// The OTEL_BSP_* variables shape the bridge's own batching processor as
// they shape the SDK's; one it cannot read stops the start, named.
func TestABatchVariableThatIsNotANumberIsRefusedByName(t *testing.T) {
	vars := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_BSP_SCHEDULE_DELAY": "5s"}
	tp, err := startTracing(context.Background(), env(vars), "dev", slog.New(slog.DiscardHandler))
	if tp != nil || err == nil || !strings.Contains(err.Error(), `OTEL_BSP_SCHEDULE_DELAY="5s"`) {
		t.Fatalf("provider %v, error %v; want an error naming OTEL_BSP_SCHEDULE_DELAY", tp, err)
	}
}

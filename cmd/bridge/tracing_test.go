package main

import "testing"

func TestRunRefusesAnOTLPProtocolItCannotSpeak(t *testing.T) {
	cleanEnv(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	wantRunRefused(t, 1, `OTEL_EXPORTER_OTLP_PROTOCOL="grpc"`)
}

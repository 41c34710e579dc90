package testutil

import (
	"compress/gzip"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	collector "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	common "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"
)

// Span is one span as an OTLP collector received it, ids in hex.
type Span struct {
	Service              string
	Name                 string
	TraceID, SpanID      string
	ParentSpanID         string
	Attributes           map[string]any // string, int64, float64 or bool
	StatusError          bool
	StatusMessage        string
	InstrumentationScope string
}

// OTLPSink is an OTLP/HTTP trace collector on loopback: it decodes each
// protobuf ExportTraceServiceRequest POSTed to /v1/traces and keeps its
// spans. Its URL is what OTEL_EXPORTER_OTLP_ENDPOINT takes.
type OTLPSink struct {
	*httptest.Server
	mu    sync.Mutex
	spans []Span
}

// NewOTLPSink starts a collector, closed when the test ends.
func NewOTLPSink(t testing.TB) *OTLPSink {
	s := &OTLPSink{}
	s.Server = httptest.NewServer(http.HandlerFunc(s.export))
	t.Cleanup(s.Close)
	return s
}

func (s *OTLPSink) export(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "want a protobuf POST to /v1/traces", http.StatusNotFound)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	raw, err := io.ReadAll(body)
	var req collector.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(raw, &req)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.add(&req)
	out, _ := proto.Marshal(&collector.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (s *OTLPSink) add(req *collector.ExportTraceServiceRequest) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		service, _ := attributes(rs.GetResource().GetAttributes())["service.name"].(string)
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				s.spans = append(s.spans, Span{
					Service:              service,
					Name:                 sp.GetName(),
					TraceID:              hex.EncodeToString(sp.GetTraceId()),
					SpanID:               hex.EncodeToString(sp.GetSpanId()),
					ParentSpanID:         hex.EncodeToString(sp.GetParentSpanId()),
					Attributes:           attributes(sp.GetAttributes()),
					StatusError:          sp.GetStatus().GetCode() == 2, // STATUS_CODE_ERROR
					StatusMessage:        sp.GetStatus().GetMessage(),
					InstrumentationScope: ss.GetScope().GetName(),
				})
			}
		}
	}
}

func attributes(kvs []*common.KeyValue) map[string]any {
	out := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		v := kv.GetValue()
		switch v.GetValue().(type) {
		case *common.AnyValue_StringValue:
			out[kv.GetKey()] = v.GetStringValue()
		case *common.AnyValue_IntValue:
			out[kv.GetKey()] = v.GetIntValue()
		case *common.AnyValue_DoubleValue:
			out[kv.GetKey()] = v.GetDoubleValue()
		case *common.AnyValue_BoolValue:
			out[kv.GetKey()] = v.GetBoolValue()
		}
	}
	return out
}

// Spans returns every span received so far, in arrival order.
func (s *OTLPSink) Spans() []Span {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Span(nil), s.spans...)
}

// WaitSpans waits until at least n spans arrived and returns them all.
func (s *OTLPSink) WaitSpans(t testing.TB, n int, timeout time.Duration) []Span {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		got := s.Spans()
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("the OTLP collector got %d spans within %v, want %d: %+v", len(got), timeout, n, got)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

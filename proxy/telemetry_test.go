package proxy

import (
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricpb "go.opentelemetry.io/proto/otlp/metrics/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is an OTLP/HTTP collector endpoint in the test process: it
// decodes what the proxy's exporters post with the OTLP protobuf types.
type otlpReceiver struct {
	srv *httptest.Server

	mu      sync.Mutex
	spans   []*tracepb.Span
	metrics []*metricpb.Metric // of the latest export
	paths   map[string]int
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	rc := &otlpReceiver{paths: map[string]int{}}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), 400)
				return
			}
			body = zr
		}
		data, err := io.ReadAll(body)
		if err != nil || r.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "want a protobuf body", 400)
			return
		}
		rc.mu.Lock()
		defer rc.mu.Unlock()
		rc.paths[r.URL.Path]++
		switch r.URL.Path {
		case "/v1/traces":
			var req coltracepb.ExportTraceServiceRequest
			if err := proto.Unmarshal(data, &req); err != nil {
				http.Error(w, err.Error(), 400)
				return
			}
			for _, rs := range req.ResourceSpans {
				for _, ss := range rs.ScopeSpans {
					rc.spans = append(rc.spans, ss.Spans...)
				}
			}
			out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
			w.Header().Set("Content-Type", "application/x-protobuf")
			_, _ = w.Write(out)
		case "/v1/metrics":
			var req colmetricpb.ExportMetricsServiceRequest
			if err := proto.Unmarshal(data, &req); err != nil {
				http.Error(w, err.Error(), 400)
				return
			}
			rc.metrics = nil
			for _, rm := range req.ResourceMetrics {
				for _, sm := range rm.ScopeMetrics {
					rc.metrics = append(rc.metrics, sm.Metrics...)
				}
			}
			out, _ := proto.Marshal(&colmetricpb.ExportMetricsServiceResponse{})
			w.Header().Set("Content-Type", "application/x-protobuf")
			_, _ = w.Write(out)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func attrs(kvs []*commonpb.KeyValue) map[string]*commonpb.AnyValue {
	m := map[string]*commonpb.AnyValue{}
	for _, kv := range kvs {
		m[kv.Key] = kv.Value
	}
	return m
}

// A sum or gauge data point of the latest metrics export whose labels
// include want, or nil.
func (rc *otlpReceiver) point(name string, want map[string]string) *metricpb.NumberDataPoint {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, m := range rc.metrics {
		if m.Name != name {
			continue
		}
		var pts []*metricpb.NumberDataPoint
		switch d := m.Data.(type) {
		case *metricpb.Metric_Sum:
			pts = d.Sum.DataPoints
		case *metricpb.Metric_Gauge:
			pts = d.Gauge.DataPoints
		}
	points:
		for _, p := range pts {
			a := attrs(p.Attributes)
			for k, v := range want {
				if a[k].GetStringValue() != v {
					continue points
				}
			}
			return p
		}
	}
	return nil
}

// With telemetry.otlp, the proxy sends each request's server span, child
// of the client's traceparent, with the admission decision as attributes
// and a sluice.shed event on a rejection, passes its own trace context to
// the backend, and exports the Prometheus series under their names and
// labels — all received and decoded by an in-process OTLP/HTTP endpoint.
func TestOTLPExport(t *testing.T) {
	rc := newOTLPReceiver(t)
	var seen sync.Map // traceparent the backend got
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {
		seen.Store(r.URL.Path, r.Header.Get("Traceparent"))
		_, _ = io.WriteString(w, "ok")
	})
	p := startProxy(t, baseConfig(be.URL, `stages:
  - name: api
    match: {path_prefix: /}
    controller: static-rate
    params: {rate: 0.01, period: 100ms}
    burst: 1
telemetry:
  otlp:
    endpoint: `+rc.srv.URL+`
    traces: true
    metrics: true
    interval: 1s
    headers: {X-Api-Key: secret}
`))
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	parent := "00-" + traceID + "-00f067aa0ba902b7-01"
	if code, _, _ := get(t, p.url+"/first", map[string]string{"Traceparent": parent}); code != 200 {
		t.Fatalf("first request: %d", code)
	}
	if code, _, _ := get(t, p.url+"/second", nil); code != 503 {
		t.Fatalf("second request: %d, want 503", code)
	}
	// The backend's traceparent: the client's trace, the proxy's span.
	v, _ := seen.Load("/first")
	tp, _ := v.(string)
	if !strings.HasPrefix(tp, "00-"+traceID+"-") || tp == parent {
		t.Errorf("backend got traceparent %q, want trace %s with the proxy's span", tp, traceID)
	}
	// Metrics: the stage's counters, by stage, class and outcome.
	eventually(t, "sluice_requests_total{outcome=rejected} = 1 in an export", func() bool {
		pt := rc.point("sluice_requests_total", map[string]string{"stage": "api", "class": "default", "outcome": "rejected"})
		return pt != nil && pt.GetAsDouble() == 1
	})
	if rc.point("proxy_pool_rejected_total", map[string]string{"cause": "queue_full"}) == nil {
		t.Error("proxy_pool_rejected_total{cause=queue_full} not exported")
	}
	// Stopping the proxy flushes the spans.
	p.cancel()
	select {
	case err := <-p.done:
		p.done <- err // for the cleanup's wait
	case <-time.After(testTimeout):
		t.Fatal("Serve did not return")
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	byPath := map[string]*tracepb.Span{}
	for _, s := range rc.spans {
		a := attrs(s.Attributes)
		byPath[a["url.path"].GetStringValue()] = s
	}
	first, second := byPath["/first"], byPath["/second"]
	if first == nil || second == nil {
		t.Fatalf("spans received: %d (%v), want /first and /second", len(rc.spans), byPath)
	}
	if first.Kind != tracepb.Span_SPAN_KIND_SERVER || !strings.EqualFold(hexOf(first.TraceId), traceID) || hexOf(first.ParentSpanId) != "00f067aa0ba902b7" {
		t.Errorf("first span: kind %v trace %x parent %x", first.Kind, first.TraceId, first.ParentSpanId)
	}
	for _, tc := range []struct {
		span     *tracepb.Span
		decision string
		reason   string
		status   int64
	}{{first, "admit", "", 200}, {second, "reject", "shed", 503}} {
		a := attrs(tc.span.Attributes)
		for k, want := range map[string]string{"sluice.stage": "api", "sluice.class": "default", "sluice.controller": "static-rate",
			"sluice.decision": tc.decision, "sluice.reason": tc.reason, "sluice.priority": ""} {
			if got := a[k].GetStringValue(); got != want || a[k] == nil {
				t.Errorf("%s: %s = %q, want %q", a["url.path"].GetStringValue(), k, got, want)
			}
		}
		if w, ok := a["sluice.queue_wait"]; !ok || w.GetDoubleValue() < 0 || w.GetDoubleValue() > 1 {
			t.Errorf("%s: sluice.queue_wait %v", a["url.path"].GetStringValue(), w)
		}
		if got := a["http.response.status_code"].GetIntValue(); got != tc.status {
			t.Errorf("%s: status %d, want %d", a["url.path"].GetStringValue(), got, tc.status)
		}
		var shed *tracepb.Span_Event
		for _, e := range tc.span.Events {
			if e.Name == "sluice.shed" {
				shed = e
			}
		}
		if (shed != nil) != (tc.decision == "reject") {
			t.Errorf("%s: sluice.shed event %v, want one only on the rejection", a["url.path"].GetStringValue(), shed)
		} else if shed != nil && attrs(shed.Attributes)["sluice.reason"].GetStringValue() != "shed" {
			t.Errorf("sluice.shed event attributes %v", shed.Attributes)
		}
	}
}

func hexOf(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 2*len(b))
	for i, c := range b {
		out[2*i], out[2*i+1] = digits[c>>4], digits[c&15]
	}
	return string(out)
}

// Bad telemetry settings fail validation with file:line and the field.
func TestTelemetryConfigErrors(t *testing.T) {
	head := baseConfig("http://127.0.0.1:1", "")
	// head has 7 lines: telemetry: is on line 8, otlp: on 9, its fields from 10 (a flow mapping on 9).
	for _, tc := range []struct{ name, cfg, want string }{
		{"no endpoint", "  otlp: {traces: true}\n", "p.yaml:9: telemetry.otlp.endpoint: is required"},
		{"bad scheme", "  otlp:\n    endpoint: grpc://127.0.0.1:4317\n    traces: true\n", "p.yaml:10: telemetry.otlp.endpoint: \"grpc://127.0.0.1:4317\" is invalid"},
		{"nothing on", "  otlp:\n    endpoint: http://127.0.0.1:4318\n", "telemetry.otlp.traces: neither traces nor metrics"},
		{"short interval", "  otlp:\n    endpoint: http://127.0.0.1:4318\n    metrics: true\n    interval: 10ms\n", "p.yaml:12: telemetry.otlp.interval: 10ms is invalid"},
		{"ratio", "  otlp:\n    endpoint: http://127.0.0.1:4318\n    traces: true\n    sample_ratio: 1.5\n", "p.yaml:12: telemetry.otlp.sample_ratio: 1.5 is invalid"},
		{"header name", "  otlp:\n    endpoint: http://127.0.0.1:4318\n    traces: true\n    headers: {\"bad key\": x}\n", "telemetry.otlp.headers: \"bad key\" is not a header name"},
		{"unknown key", "  otlp:\n    endpoint: http://127.0.0.1:4318\n    trace: true\n", "p.yaml:11: telemetry.otlp.trace: unknown field"},
	} {
		_, err := Parse("p.yaml", []byte(head+"telemetry:\n"+tc.cfg))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v\nwant %q", tc.name, err, tc.want)
		}
	}
	// Off by default: no section, no exporter.
	cfg, err := Parse("p.yaml", []byte(head))
	if err != nil || cfg.Telemetry.OTLP != nil {
		t.Fatalf("default: %v %+v", err, cfg.Telemetry)
	}
	s, err := New(cfg, Options{Logger: testLogger(t)})
	if err != nil || s.h.tel != nil || s.h.tel.Tracing() {
		t.Fatalf("default: %v, telemetry %v", err, s.h.tel)
	}
}

// Telemetry cannot change on reload: the running exporters stay, and the
// reload says a restart is needed.
func TestTelemetryChangeNeedsRestart(t *testing.T) {
	rc := newOTLPReceiver(t)
	be := backend(t, echoHeaders)
	p := startProxy(t, baseConfig(be.URL, "telemetry:\n  otlp: {endpoint: "+rc.srv.URL+", traces: true}\n"))
	next, err := Parse("p.yaml", []byte(baseConfig(be.URL, "")))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.srv.Apply(next); err == nil || !strings.Contains(err.Error(), "telemetry.otlp: changing it needs a restart") {
		t.Fatalf("Apply without telemetry: %v, want a restart-needed error", err)
	}
	if !p.srv.h.tel.Tracing() {
		t.Error("the running exporters were dropped")
	}
}

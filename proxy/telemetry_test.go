// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"bytes"
	"compress/gzip"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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

	mu        sync.Mutex
	spans     []*tracepb.Span
	metrics   []*metricpb.Metric // of the latest export
	paths     map[string]int
	resources []map[string]string // every export's resource attributes
	headers   []http.Header       // every export's headers
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
		rc.headers = append(rc.headers, r.Header.Clone())
		var req, resp proto.Message
		switch r.URL.Path {
		case "/v1/traces":
			req, resp = &coltracepb.ExportTraceServiceRequest{}, &coltracepb.ExportTraceServiceResponse{}
		case "/v1/metrics":
			req, resp = &colmetricpb.ExportMetricsServiceRequest{}, &colmetricpb.ExportMetricsServiceResponse{}
		default:
			http.NotFound(w, r)
			return
		}
		if err := proto.Unmarshal(data, req); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		switch req := req.(type) {
		case *coltracepb.ExportTraceServiceRequest:
			for _, rs := range req.ResourceSpans {
				rc.resources = append(rc.resources, stringAttrs(rs.GetResource().GetAttributes()))
				for _, ss := range rs.ScopeSpans {
					rc.spans = append(rc.spans, ss.Spans...)
				}
			}
		case *colmetricpb.ExportMetricsServiceRequest:
			rc.metrics = nil
			for _, rm := range req.ResourceMetrics {
				rc.resources = append(rc.resources, stringAttrs(rm.GetResource().GetAttributes()))
				for _, sm := range rm.ScopeMetrics {
					rc.metrics = append(rc.metrics, sm.Metrics...)
				}
			}
		}
		out, _ := proto.Marshal(resp)
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func stringAttrs(kvs []*commonpb.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		m[kv.Key] = kv.Value.GetStringValue()
	}
	return m
}

// histogram returns the data points of the histogram name in the latest
// metrics export, and the metric.
func (rc *otlpReceiver) histogram(name string) (*metricpb.Metric, []*metricpb.HistogramDataPoint) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, m := range rc.metrics {
		if h, ok := m.Data.(*metricpb.Metric_Histogram); ok && m.Name == name {
			return m, h.Histogram.DataPoints
		}
	}
	return nil, nil
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
// of the client's traceparent, with the stable HTTP server conventions'
// attributes and the admission decision (a sluice.shed event on a
// rejection), and a client span per upstream attempt, its child, whose
// trace context the backend gets; it records http.server.request.duration
// and exports the Prometheus series under their names and labels — all
// received and decoded by an in-process OTLP/HTTP endpoint.
func TestOTLPExport(t *testing.T) {
	rc := newOTLPReceiver(t)
	var seen sync.Map // traceparent the backend got, by path
	var retried atomic.Bool
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {
		seen.Store(r.URL.Path, r.Header.Get("Traceparent"))
		if r.URL.Path == "/retry" && !retried.Swap(true) {
			w.WriteHeader(http.StatusServiceUnavailable) // retried once (backends.client.retry)
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
	p := startProxy(t, baseConfig(be.URL, `  client:
    retry: {max_attempts: 2, backoff: 1ms, max_backoff: 2ms}
stages:
  - name: free
    match: {path_prefix: /retry}
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
	if code, _, _ := get(t, p.url+"/retry", nil); code != 200 {
		t.Fatalf("retried request: %d, want 200", code)
	}
	// Metrics: the stage's counters, by stage, class and outcome, and
	// http.server.request.duration.
	eventually(t, "sluice_requests_total{outcome=rejected} = 1 in an export", func() bool {
		pt := rc.point("sluice_requests_total", map[string]string{"stage": "api", "class": "default", "outcome": "rejected"})
		return pt != nil && pt.GetAsDouble() == 1
	})
	if rc.point("proxy_pool_rejected_total", map[string]string{"cause": "queue_full"}) == nil {
		t.Error("proxy_pool_rejected_total{cause=queue_full} not exported")
	}
	checkServerDuration(t, rc)
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
	for _, h := range rc.headers {
		if h.Get("X-Api-Key") != "secret" {
			t.Errorf("an export without the configured header: %v", h)
		}
	}
	servers, clients := map[string]*tracepb.Span{}, map[string][]*tracepb.Span{}
	byID := map[string]*tracepb.Span{}
	for _, s := range rc.spans {
		byID[hexOf(s.SpanId)] = s
	}
	for _, s := range rc.spans {
		switch s.Kind {
		case tracepb.Span_SPAN_KIND_SERVER:
			servers[attrs(s.Attributes)["url.path"].GetStringValue()] = s
		case tracepb.Span_SPAN_KIND_CLIENT:
			srv := byID[hexOf(s.ParentSpanId)]
			if srv == nil || srv.Kind != tracepb.Span_SPAN_KIND_SERVER || !bytes.Equal(srv.TraceId, s.TraceId) {
				t.Errorf("client span %q: its parent %x is not a server span of its trace", s.Name, s.ParentSpanId)
				continue
			}
			path := attrs(srv.Attributes)["url.path"].GetStringValue()
			clients[path] = append(clients[path], s)
		}
	}
	first, second := servers["/first"], servers["/second"]
	if first == nil || second == nil || servers["/retry"] == nil {
		t.Fatalf("spans received: %d (%v), want the server spans of /first, /second and /retry", len(rc.spans), servers)
	}
	if !strings.EqualFold(hexOf(first.TraceId), traceID) || hexOf(first.ParentSpanId) != "00f067aa0ba902b7" || first.Name != "GET" {
		t.Errorf("first span %q: trace %x parent %x", first.Name, first.TraceId, first.ParentSpanId)
	}
	proxyHost, proxyPort, _ := net.SplitHostPort(p.addr)
	beHost, bePort, _ := net.SplitHostPort(strings.TrimPrefix(be.URL, "http://"))
	for _, tc := range []struct {
		span     *tracepb.Span
		decision string
		reason   string
		status   int64
	}{{first, "admit", "", 200}, {second, "reject", "shed", 503}} {
		a := attrs(tc.span.Attributes)
		path := a["url.path"].GetStringValue()
		for k, want := range map[string]string{"sluice.stage": "api", "sluice.class": "default", "sluice.controller": "static-rate",
			"sluice.decision": tc.decision, "sluice.reason": tc.reason, "sluice.priority": "",
			"http.request.method": "GET", "url.scheme": "http", "server.address": proxyHost,
			"network.protocol.version": "1.1", "client.address": "127.0.0.1", "network.peer.address": "127.0.0.1",
			"user_agent.original": "Go-http-client/1.1"} {
			if got := a[k].GetStringValue(); got != want || a[k] == nil {
				t.Errorf("%s: %s = %q, want %q", path, k, got, want)
			}
		}
		if got := a["server.port"].GetIntValue(); strconv.FormatInt(got, 10) != proxyPort {
			t.Errorf("%s: server.port %d, want %s", path, got, proxyPort)
		}
		if w, ok := a["sluice.queue_wait"]; !ok || w.GetDoubleValue() < 0 || w.GetDoubleValue() > 1 {
			t.Errorf("%s: sluice.queue_wait %v", path, w)
		}
		if got := a["http.response.status_code"].GetIntValue(); got != tc.status {
			t.Errorf("%s: status %d, want %d", path, got, tc.status)
		}
		if et, failed := a["error.type"].GetStringValue(), tc.status >= 500; (et != "") != failed || failed && et != "503" ||
			(tc.span.Status.GetCode() == tracepb.Status_STATUS_CODE_ERROR) != failed {
			t.Errorf("%s: error.type %q, status %v", path, et, tc.span.Status)
		}
		var shed *tracepb.Span_Event
		for _, e := range tc.span.Events {
			if e.Name == "sluice.shed" {
				shed = e
			}
		}
		if (shed != nil) != (tc.decision == "reject") {
			t.Errorf("%s: sluice.shed event %v, want one only on the rejection", path, shed)
		} else if shed != nil && attrs(shed.Attributes)["sluice.reason"].GetStringValue() != "shed" {
			t.Errorf("sluice.shed event attributes %v", shed.Attributes)
		}
	}
	// One client span per upstream attempt: none for the rejection, two
	// for the retried request; the backend got each attempt's own span.
	if n := len(clients["/second"]); n != 0 {
		t.Errorf("the rejected request has %d client spans", n)
	}
	if n := len(clients["/first"]); n != 1 {
		t.Fatalf("/first: %d client spans, want 1", n)
	}
	c := clients["/first"][0]
	ca := attrs(c.Attributes)
	for k, want := range map[string]string{"http.request.method": "GET", "server.address": beHost, "url.full": be.URL + "/first",
		"network.protocol.version": "1.1"} {
		if got := ca[k].GetStringValue(); got != want {
			t.Errorf("client span: %s = %q, want %q", k, got, want)
		}
	}
	if got := ca["server.port"].GetIntValue(); strconv.FormatInt(got, 10) != bePort || ca["http.response.status_code"].GetIntValue() != 200 {
		t.Errorf("client span: server.port %d (want %s), status %d", got, bePort, ca["http.response.status_code"].GetIntValue())
	}
	if _, ok := ca["http.request.resend_count"]; ok || c.Name != "GET" {
		t.Errorf("a first attempt %q has http.request.resend_count", c.Name)
	}
	v, _ := seen.Load("/first")
	if tp, _ := v.(string); tp != "00-"+traceID+"-"+hexOf(c.SpanId)+"-01" {
		t.Errorf("backend got traceparent %q, want the client span's (%x)", tp, c.SpanId)
	}
	retry := clients["/retry"]
	if len(retry) != 2 {
		t.Fatalf("/retry: %d client spans, want 2", len(retry))
	}
	sort.Slice(retry, func(i, j int) bool { return retry[i].StartTimeUnixNano < retry[j].StartTimeUnixNano })
	a0, a1 := attrs(retry[0].Attributes), attrs(retry[1].Attributes)
	if a0["http.response.status_code"].GetIntValue() != 503 || a0["error.type"].GetStringValue() != "503" || retry[0].Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR {
		t.Errorf("first attempt: %v", retry[0].Attributes)
	}
	if a1["http.request.resend_count"].GetIntValue() != 1 || a1["http.response.status_code"].GetIntValue() != 200 {
		t.Errorf("retry: %v", retry[1].Attributes)
	}
}

// checkServerDuration waits for http.server.request.duration in an
// export: seconds, the conventions' buckets, by method, scheme and status.
func checkServerDuration(t *testing.T, rc *otlpReceiver) {
	t.Helper()
	var m *metricpb.Metric
	var pts []*metricpb.HistogramDataPoint
	count := func(status int64) (n uint64, p *metricpb.HistogramDataPoint) {
		for _, pt := range pts {
			a := attrs(pt.Attributes)
			if a["http.response.status_code"].GetIntValue() == status && a["http.request.method"].GetStringValue() == "GET" &&
				a["url.scheme"].GetStringValue() == "http" && a["network.protocol.version"].GetStringValue() == "1.1" {
				n += pt.GetCount()
				p = pt
			}
		}
		return n, p
	}
	eventually(t, "http.server.request.duration of the three requests in an export", func() bool {
		m, pts = rc.histogram("http.server.request.duration")
		ok, _ := count(200)
		failed, _ := count(503)
		return ok == 2 && failed == 1
	})
	if m.Unit != "s" {
		t.Errorf("unit %q, want s", m.Unit)
	}
	_, p := count(503)
	if want := []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}; !slices.Equal(p.ExplicitBounds, want) {
		t.Errorf("buckets %v, want %v", p.ExplicitBounds, want)
	}
	if et := attrs(p.Attributes)["error.type"].GetStringValue(); et != "503" {
		t.Errorf("the 503's error.type %q", et)
	}
	if ex := p.GetExemplars(); len(ex) == 0 || len(ex[0].TraceId) != 16 {
		t.Errorf("the 503's point has no exemplar of its trace: %v", ex)
	}
	// The native histograms arrive as exponential ones, with their labels.
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, m := range rc.metrics {
		if m.Name != "sluice_request_duration_seconds" {
			continue
		}
		e, ok := m.Data.(*metricpb.Metric_ExponentialHistogram)
		if !ok {
			t.Fatalf("sluice_request_duration_seconds exported as %T", m.Data)
		}
		for _, pt := range e.ExponentialHistogram.DataPoints {
			a := attrs(pt.Attributes)
			if a["stage"].GetStringValue() == "api" && a["outcome"].GetStringValue() == "rejected" && pt.Count == 1 && pt.Scale == 3 {
				return
			}
		}
	}
	t.Error("no exponential sluice_request_duration_seconds{stage=api,outcome=rejected} of scale 3 with the rejection")
}

// A backend that cannot be reached: the attempt's client span fails
// with error.type connect, the server span answers 502.
func TestOTLPClientSpanFailure(t *testing.T) {
	rc := newOTLPReceiver(t)
	p := startProxy(t, baseConfig("http://127.0.0.1:1", "telemetry:\n  otlp: {endpoint: "+rc.srv.URL+", traces: true}\n"))
	if code, _, _ := get(t, p.url+"/x", nil); code != http.StatusBadGateway {
		t.Fatalf("unreachable backend: %d", code)
	}
	p.cancel()
	p.done <- <-p.done
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var client, server *tracepb.Span
	for _, s := range rc.spans {
		switch s.Kind {
		case tracepb.Span_SPAN_KIND_CLIENT:
			client = s
		case tracepb.Span_SPAN_KIND_SERVER:
			server = s
		}
	}
	if client == nil || server == nil {
		t.Fatalf("spans %v", rc.spans)
	}
	if et := attrs(client.Attributes)["error.type"].GetStringValue(); et != "connect" || client.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR {
		t.Errorf("client span: error.type %q, status %v", et, client.Status)
	}
	if a := attrs(server.Attributes); a["http.response.status_code"].GetIntValue() != 502 || a["error.type"].GetStringValue() != "502" {
		t.Errorf("server span: %v", server.Attributes)
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
	// The base has 7 lines: telemetry: is on line 8, otlp: on 9, its fields from 10 (a flow mapping on 9).
	parseFails(t, []badConfig{
		{"telemetry:\n  otlp:\n    endpoint: grpc://127.0.0.1:4317\n    traces: true\n", "p.yaml:10: telemetry.otlp.endpoint: \"grpc://127.0.0.1:4317\" is invalid"},
		{"telemetry:\n  otlp:\n    endpoint: http://127.0.0.1:4318\n", "telemetry.otlp.traces: neither traces nor metrics"},
		{"telemetry:\n  otlp:\n    endpoint: http://127.0.0.1:4318\n    metrics: true\n    interval: 10ms\n", "p.yaml:12: telemetry.otlp.interval: 10ms is invalid"},
		{"telemetry:\n  otlp:\n    endpoint: http://127.0.0.1:4318\n    traces: true\n    sample_ratio: 1.5\n", "p.yaml:12: telemetry.otlp.sample_ratio: 1.5 is invalid"},
		{"telemetry:\n  otlp:\n    endpoint: http://127.0.0.1:4318\n    traces: true\n    headers: {\"bad key\": x}\n", "telemetry.otlp.headers: \"bad key\" is not a header name"},
		{"telemetry:\n  otlp:\n    endpoint: http://127.0.0.1:4318\n    trace: true\n", "p.yaml:11: telemetry.otlp.trace: unknown field"},
	})
	// Off by default: no section, no exporter.
	cfg, err := Parse("p.yaml", []byte(baseConfig("http://127.0.0.1:1", "")))
	if err != nil || cfg.Telemetry.OTLP != nil {
		t.Fatalf("default: %v %+v", err, cfg.Telemetry)
	}
	s, err := New(cfg, Options{Logger: testLogger(t)})
	if err != nil || s.h.tel != nil || s.h.tel.Tracing() {
		t.Fatalf("default: %v, telemetry %v", err, s.h.tel)
	}
}

// Without an endpoint and headers in the file, the exporters take them
// from the standard environment variables, a signal's own endpoint over
// the general one; the resource takes OTEL_SERVICE_NAME over
// OTEL_RESOURCE_ATTRIBUTES' service.name, the environment's other
// attributes, and the binary's service.version over the environment's.
func TestOTLPEnvironment(t *testing.T) {
	general, traces := newOTLPReceiver(t), newOTLPReceiver(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", general.srv.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", traces.srv.URL+"/v1/traces")
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20env-token,x-tenant=t1")
	t.Setenv("OTEL_SERVICE_NAME", "edge")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment.name=staging,service.name=ignored,service.version=bogus")
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {})
	p := startProxy(t, baseConfig(be.URL, "telemetry:\n  otlp: {traces: true, metrics: true, interval: 1s}\n"))
	if code, _, _ := get(t, p.url+"/x", nil); code != 200 {
		t.Fatalf("request: %d", code)
	}
	eventually(t, "a metrics export to the general endpoint", func() bool {
		_, pts := general.histogram("http.server.request.duration")
		return len(pts) > 0
	})
	p.cancel()
	p.done <- <-p.done
	for _, rc := range []*otlpReceiver{general, traces} {
		rc.mu.Lock()
		defer rc.mu.Unlock()
		for _, h := range rc.headers {
			if h.Get("Authorization") != "Bearer env-token" || h.Get("X-Tenant") != "t1" {
				t.Errorf("an export without the environment's headers: %v", h)
			}
		}
		for _, res := range rc.resources {
			if res["service.name"] != "edge" || res["deployment.environment.name"] != "staging" || res["service.version"] != "(unknown)" {
				t.Errorf("resource %v: want service.name edge, the environment's attribute, the binary's version", res)
			}
		}
	}
	if len(traces.spans) == 0 || traces.paths["/v1/metrics"] != 0 {
		t.Errorf("the traces endpoint got %d spans and %d metrics exports, want spans only", len(traces.spans), traces.paths["/v1/metrics"])
	}
	if len(general.spans) != 0 || general.paths["/v1/metrics"] == 0 {
		t.Errorf("the general endpoint got %d spans and %d metrics exports, want metrics only", len(general.spans), general.paths["/v1/metrics"])
	}
}

// What the file sets wins over the environment, as an SDK option wins over
// its variable: the endpoint, the headers (all of them: the environment's
// are not merged in) and service_name.
func TestOTLPFileOverEnvironment(t *testing.T) {
	env, file := newOTLPReceiver(t), newOTLPReceiver(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", env.srv.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-from=env,x-env-only=1")
	t.Setenv("OTEL_SERVICE_NAME", "from-env")
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {})
	p := startProxy(t, baseConfig(be.URL, "telemetry:\n  otlp: {endpoint: "+file.srv.URL+
		", traces: true, headers: {X-From: file}, service_name: from-file}\n"))
	get(t, p.url+"/x", nil)
	p.cancel()
	p.done <- <-p.done
	file.mu.Lock()
	defer file.mu.Unlock()
	env.mu.Lock()
	defer env.mu.Unlock()
	if len(file.spans) == 0 || len(env.spans) != 0 || len(env.headers) != 0 {
		t.Fatalf("spans: %d to the file's endpoint, %d to the environment's", len(file.spans), len(env.spans))
	}
	for _, h := range file.headers {
		if h.Get("X-From") != "file" || h.Get("X-Env-Only") != "" {
			t.Errorf("export headers %v: want the file's only", h)
		}
	}
	if got := file.resources[0]["service.name"]; got != "from-file" {
		t.Errorf("service.name %q, want from-file", got)
	}
}

// OTEL_SDK_DISABLED=true switches export off, as it does in the SDKs.
func TestOTLPDisabledByEnvironment(t *testing.T) {
	t.Setenv("OTEL_SDK_DISABLED", "true")
	cfg, err := Parse("p.yaml", []byte(baseConfig("http://127.0.0.1:1", "telemetry:\n  otlp: {traces: true}\n")))
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(cfg, testOptions(t))
	if err != nil || s.h.tel != nil {
		t.Fatalf("with OTEL_SDK_DISABLED: %v, telemetry %v", err, s.h.tel)
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

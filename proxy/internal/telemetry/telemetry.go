// SPDX-License-Identifier: Apache-2.0

// Package telemetry exports the proxy's traces and metrics over OTLP/HTTP
// (protobuf) beside its Prometheus endpoint: a server span per request
// carrying the admission decision and a client span per upstream attempt,
// both with the stable HTTP semantic conventions' attributes; the
// http.server.request.duration histogram; and the Prometheus registry's
// series, under the same names and labels, through the OpenTelemetry
// Prometheus bridge (a metric producer read by a periodic reader). It
// lives under proxy/internal so that a service importing only sluice's
// middleware does not link OpenTelemetry.
//
// The exporters read the OTEL_EXPORTER_OTLP_* environment variables as
// OpenTelemetry-Go defines them (endpoint, per-signal endpoint, headers,
// timeout, TLS, compression); an Options value that is set wins over its
// variable, as the SDK's options do. The resource reads OTEL_SERVICE_NAME
// and OTEL_RESOURCE_ATTRIBUTES.
//
// The proxy holds a *Telemetry only when a telemetry.otlp section is
// configured; a nil *Telemetry is the off state, and the request path
// then only compares a pointer with nil.
package telemetry

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promBridge "go.opentelemetry.io/contrib/bridges/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/semconv/v1.43.0/httpconv"
	"go.opentelemetry.io/otel/trace"
)

// Options configure the exporters.
type Options struct {
	// Endpoint is the collector's OTLP/HTTP base URL, such as
	// http://127.0.0.1:4318; traces are posted to <Endpoint>/v1/traces and
	// metrics to <Endpoint>/v1/metrics (the OTLP/HTTP convention). Empty:
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT and _METRICS_ENDPOINT (used as
	// they are), else OTEL_EXPORTER_OTLP_ENDPOINT (with the signal's
	// path), else http://localhost:4318.
	Endpoint string
	// Headers, when set, is called before every export (and every retry)
	// for the header fields to send with it (an API key, a tenant), so
	// that rotated credentials apply to the next export without a
	// restart. The exporters then use their own HTTP client (Go's default
	// transport settings, ExportTimeout per export), in place of the
	// OTEL_EXPORTER_OTLP_CERTIFICATE and _TIMEOUT variables. Nil: the
	// exporters read OTEL_EXPORTER_OTLP_HEADERS and the per-signal
	// _TRACES_HEADERS and _METRICS_HEADERS themselves, so their values
	// never pass through sluice.
	Headers func() map[string]string
	// Traces and Metrics switch each signal on.
	Traces, Metrics bool
	// Interval is the metrics export period.
	Interval time.Duration
	// SampleRatio is the fraction of new traces sampled, in [0, 1]; a
	// request whose traceparent carries a sampling decision follows it
	// (parent-based sampling).
	SampleRatio float64
	// ServiceName is the resource's service.name; empty:
	// OTEL_SERVICE_NAME, else service.name in OTEL_RESOURCE_ATTRIBUTES,
	// else DefaultServiceName. ServiceVersion is service.version, over
	// any the environment gives: the binary's own.
	ServiceName, ServiceVersion string
	// Gatherer is read at every metrics export (the proxy's registry).
	Gatherer prometheus.Gatherer
	// Logger receives the exporters' errors (a collector that cannot be
	// reached, a refused export) as warnings; nil leaves OpenTelemetry's
	// default, which prints them with the standard log package. The
	// handler is process-wide (otel.SetErrorHandler).
	Logger *slog.Logger
}

// DefaultServiceName is service.name when neither Options nor the
// environment name the service.
const DefaultServiceName = "sluice"

// Telemetry is the running export pipeline. Its methods are safe for
// concurrent use; a nil *Telemetry is off.
type Telemetry struct {
	tp       *sdktrace.TracerProvider // nil without traces
	mp       *sdkmetric.MeterProvider // nil without metrics
	tracer   trace.Tracer
	prop     propagation.TextMapPropagator
	duration httpconv.ServerRequestDuration // http.server.request.duration; set with mp
}

// New starts the exporters of o. It does not contact the collector: an
// unreachable collector shows up as export errors later (the exporters
// retry with back-off and drop what they cannot send).
func New(ctx context.Context, o Options) (*Telemetry, error) {
	if !o.Traces && !o.Metrics {
		return nil, errors.New("telemetry: neither traces nor metrics enabled")
	}
	if o.Logger != nil {
		l := o.Logger
		endpoint := Endpoint(o.Endpoint, o.Traces, o.Metrics)
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
			l.Warn("opentelemetry export failed", "endpoint", endpoint, "err", err)
		}))
	}
	base := strings.TrimSuffix(o.Endpoint, "/")
	res, err := newResource(ctx, o)
	if err != nil {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	t := &Telemetry{prop: propagation.TraceContext{}}
	var traceOpts []otlptracehttp.Option
	var metricOpts []otlpmetrichttp.Option
	if base != "" { // else the environment's endpoints, or the default
		traceOpts = append(traceOpts, otlptracehttp.WithEndpointURL(base+"/v1/traces"))
		metricOpts = append(metricOpts, otlpmetrichttp.WithEndpointURL(base+"/v1/metrics"))
	}
	if o.Headers != nil {
		// The file's headers replace the environment's: an empty set
		// keeps the exporters from adding OTEL_EXPORTER_OTLP_HEADERS to
		// those headerTransport sets.
		c := headerClient(o.Headers)
		none := map[string]string{}
		traceOpts = append(traceOpts, otlptracehttp.WithHTTPClient(c), otlptracehttp.WithHeaders(none))
		metricOpts = append(metricOpts, otlpmetrichttp.WithHTTPClient(c), otlpmetrichttp.WithHeaders(none))
	}
	if o.Traces {
		exp, err := otlptracehttp.New(ctx, traceOpts...)
		if err != nil {
			return nil, fmt.Errorf("telemetry: trace exporter: %w", err)
		}
		t.tp = sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res),
			sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(o.SampleRatio))))
		t.tracer = t.tp.Tracer(scope)
	}
	if o.Metrics {
		exp, err := otlpmetrichttp.New(ctx, metricOpts...)
		if err != nil {
			return nil, fmt.Errorf("telemetry: metric exporter: %w", err)
		}
		reader := sdkmetric.NewPeriodicReader(exp, sdkmetric.WithInterval(o.Interval),
			sdkmetric.WithProducer(promBridge.NewMetricProducer(promBridge.WithGatherer(o.Gatherer))))
		t.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader), sdkmetric.WithResource(res))
		if t.duration, err = httpconv.NewServerRequestDuration(t.mp.Meter(scope)); err != nil {
			return nil, fmt.Errorf("telemetry: %s: %w", t.duration.Name(), err)
		}
	}
	return t, nil
}

// ExportTimeout bounds one export request (the exporters' own default).
const ExportTimeout = 10 * time.Second

// headerClient returns the exporters' HTTP client: each request gets the
// header fields headers returns at that moment.
func headerClient(headers func() map[string]string) *http.Client {
	base := http.DefaultTransport.(*http.Transport).Clone()
	return &http.Client{Timeout: ExportTimeout, Transport: headerTransport{base: base, headers: headers}}
}

// headerTransport sets the current header fields on every request.
type headerTransport struct {
	base    http.RoundTripper
	headers func() map[string]string
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	h := t.headers()
	if len(h) == 0 {
		return t.base.RoundTrip(r)
	}
	r = r.Clone(r.Context()) // a RoundTripper must not change the caller's request
	for k, v := range h {
		r.Header.Set(k, v)
	}
	return t.base.RoundTrip(r)
}

// scope is the instrumentation scope of sluice's spans and metrics.
const scope = "github.com/sluicehq/sluice/proxy"

// newResource is the resource of o's exports: service.name from o, else
// from the environment (OTEL_SERVICE_NAME over OTEL_RESOURCE_ATTRIBUTES,
// as resource.WithFromEnv reads them), else DefaultServiceName; the
// environment's other attributes; and service.version, the binary's.
func newResource(ctx context.Context, o Options) (*resource.Resource, error) {
	opts := []resource.Option{resource.WithAttributes(semconv.ServiceName(DefaultServiceName)), resource.WithFromEnv()}
	if o.ServiceName != "" {
		opts = append(opts, resource.WithAttributes(semconv.ServiceName(o.ServiceName)))
	}
	opts = append(opts, resource.WithAttributes(semconv.ServiceVersion(o.ServiceVersion)))
	return resource.New(ctx, opts...)
}

// Endpoint returns where the exporters send, for messages: endpoint when
// it is set, else the environment's OTLP endpoints or the default, as
// the exporters resolve them; without the user information a URL may
// carry.
func Endpoint(endpoint string, traces, metrics bool) string {
	if endpoint != "" {
		return withoutUser(endpoint)
	}
	base := os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
	base = cmp.Or(base, "http://localhost:4318")
	var out []string
	for _, s := range []struct {
		on        bool
		env, path string
	}{{traces, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "/v1/traces"}, {metrics, "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "/v1/metrics"}} {
		if !s.on {
			continue
		}
		if v := os.Getenv(s.env); v != "" {
			out = append(out, withoutUser(v))
		} else {
			out = append(out, withoutUser(strings.TrimSuffix(base, "/")+s.path))
		}
	}
	return strings.Join(out, " ")
}

// withoutUser returns u without its user information, if it parses.
func withoutUser(u string) string {
	p, err := url.Parse(u)
	if err != nil || p.User == nil {
		return u
	}
	p.User = nil
	return p.String()
}

// Shutdown flushes what is buffered (the last spans, one last metrics
// export) and stops the exporters, within ctx.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	var errs []error
	if t.tp != nil {
		errs = append(errs, t.tp.Shutdown(ctx))
	}
	if t.mp != nil {
		errs = append(errs, t.mp.Shutdown(ctx))
	}
	return errors.Join(errs...)
}

// Tracing reports whether spans are made.
func (t *Telemetry) Tracing() bool { return t != nil && t.tp != nil }

// Measuring reports whether http.server.request.duration is recorded.
func (t *Telemetry) Measuring() bool { return t != nil && t.mp != nil }

// StartServer starts the server span of r, the child of the trace its
// traceparent names (W3C Trace Context) if it has one, and returns r with
// the span in its context. The span has the stable HTTP server
// conventions' attributes that the request gives: http.request.method
// (_OTHER and http.request.method_original for a method the conventions
// do not know), url.scheme, url.path, server.address and server.port
// (from Host), network.protocol.version, client.address (client, the
// address sluice believes, when known), network.peer.address and
// network.peer.port, user_agent.original. The caller ends it with
// EndServer.
func (t *Telemetry) StartServer(r *http.Request, client string) (*http.Request, trace.Span) {
	ctx := t.prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	m, known := Method(r.Method)
	name := m
	if !known {
		name = "HTTP"
	}
	scheme := Scheme(r)
	attrs := make([]attribute.KeyValue, 0, 12)
	attrs = append(attrs, semconv.HTTPRequestMethodKey.String(m), semconv.URLScheme(scheme), semconv.URLPath(r.URL.Path))
	if !known {
		attrs = append(attrs, semconv.HTTPRequestMethodOriginal(r.Method))
	}
	if host, port := hostPort(r.Host, scheme); host != "" {
		attrs = append(attrs, semconv.ServerAddress(host), semconv.ServerPort(port))
	}
	attrs = append(attrs, semconv.NetworkProtocolVersion(ProtocolVersion(r.ProtoMajor, r.ProtoMinor)))
	if client != "" {
		attrs = append(attrs, semconv.ClientAddress(client))
	}
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		attrs = append(attrs, semconv.NetworkPeerAddress(ap.Addr().Unmap().String()), semconv.NetworkPeerPort(int(ap.Port())))
	}
	if ua := r.Header.Get("User-Agent"); ua != "" {
		attrs = append(attrs, semconv.UserAgentOriginal(ua))
	}
	ctx, span := t.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
	return r.WithContext(ctx), span
}

// EndServer ends a server span with the status sent (0: none, the client
// left first): http.response.status_code, and for a 5xx error.type (the
// status) and the span status Error, as the HTTP server conventions say.
func EndServer(span trace.Span, status int) {
	if status > 0 {
		span.SetAttributes(semconv.HTTPResponseStatusCode(status))
	}
	if status >= 500 {
		span.SetAttributes(semconv.ErrorTypeKey.String(strconv.Itoa(status)))
		span.SetStatus(codes.Error, http.StatusText(status))
	}
	span.End()
}

// RecordServer records r's duration d in http.server.request.duration
// (seconds, the conventions' buckets) with http.request.method,
// url.scheme, network.protocol.version, http.response.status_code (when a
// status was sent) and, for a 5xx, error.type.
func (t *Telemetry) RecordServer(ctx context.Context, r *http.Request, status int, d time.Duration) {
	m, _ := Method(r.Method)
	attrs := make([]attribute.KeyValue, 0, 3)
	attrs = append(attrs, semconv.NetworkProtocolVersion(ProtocolVersion(r.ProtoMajor, r.ProtoMinor)))
	if status > 0 {
		attrs = append(attrs, semconv.HTTPResponseStatusCode(status))
	}
	if status >= 500 {
		attrs = append(attrs, semconv.ErrorTypeKey.String(strconv.Itoa(status)))
	}
	t.duration.Record(ctx, d.Seconds(), httpconv.RequestMethodAttr(m), Scheme(r), attrs...)
}

// StartClient starts the client span of one attempt to send req upstream
// (attempt 0 is the first, later ones are retries), the child of ctx's
// span, and writes its trace context into req's traceparent, so that the
// backend's spans are its children. The span has the stable HTTP client
// conventions' attributes that the request gives: http.request.method,
// server.address, server.port, url.full (without user information or
// query) and, for a retry, http.request.resend_count. The caller ends it
// (ClientAnswered, ClientFailed).
func (t *Telemetry) StartClient(ctx context.Context, req *http.Request, attempt int) trace.Span {
	m, known := Method(req.Method)
	name := m
	if !known {
		name = "HTTP"
	}
	u := req.URL
	host, port := hostPort(u.Host, u.Scheme)
	attrs := make([]attribute.KeyValue, 0, 6)
	attrs = append(attrs, semconv.HTTPRequestMethodKey.String(m), semconv.ServerAddress(host), semconv.ServerPort(port),
		semconv.URLFull((&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}).String()))
	if !known {
		attrs = append(attrs, semconv.HTTPRequestMethodOriginal(req.Method))
	}
	if attempt > 0 {
		attrs = append(attrs, semconv.HTTPRequestResendCount(attempt))
	}
	ctx, span := t.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	t.prop.Inject(ctx, propagation.HeaderCarrier(req.Header))
	return span
}

// ClientAnswered records res, the answer of a client span's attempt:
// http.response.status_code, network.protocol.version, and for a 4xx or
// 5xx error.type (the status) and the span status Error, as the HTTP
// client conventions say. It does not end the span: the exchange lasts
// until the body is read.
func ClientAnswered(span trace.Span, res *http.Response) {
	span.SetAttributes(semconv.HTTPResponseStatusCode(res.StatusCode),
		semconv.NetworkProtocolVersion(ProtocolVersion(res.ProtoMajor, res.ProtoMinor)))
	if res.StatusCode >= 400 {
		span.SetAttributes(semconv.ErrorTypeKey.String(strconv.Itoa(res.StatusCode)))
		span.SetStatus(codes.Error, http.StatusText(res.StatusCode))
	}
}

// ClientFailed ends a client span whose attempt got no answer: errType is
// the low-cardinality cause (connect, response_header_timeout, ...), err
// the transport's error.
func ClientFailed(span trace.Span, errType string, err error) {
	span.SetAttributes(semconv.ErrorTypeKey.String(errType))
	span.SetStatus(codes.Error, err.Error())
	span.End()
}

// knownMethods are the methods of the HTTP conventions' list (RFC 9110
// and PATCH, RFC 5789); others are recorded as _OTHER, which bounds the
// metric's cardinality.
var knownMethods = map[string]bool{http.MethodGet: true, http.MethodHead: true, http.MethodPost: true, http.MethodPut: true,
	http.MethodDelete: true, http.MethodConnect: true, http.MethodOptions: true, http.MethodTrace: true, http.MethodPatch: true}

// Method returns m as the conventions record it: m itself if it is a
// known method, else _OTHER.
func Method(m string) (string, bool) {
	if knownMethods[m] {
		return m, true
	}
	return "_OTHER", false
}

// Scheme returns the scheme r came with to sluice: https over TLS, else
// http.
func Scheme(r *http.Request) string {
	if r.TLS != nil {
		return "https"
	}
	return "http"
}

// ProtocolVersion returns network.protocol.version for an HTTP version:
// "1.0", "1.1", "2", "3".
func ProtocolVersion(major, minor int) string {
	switch {
	case major == 1 && minor == 1:
		return "1.1"
	case major == 1 && minor == 0:
		return "1.0"
	case major >= 2:
		return strconv.Itoa(major)
	}
	return strconv.Itoa(major) + "." + strconv.Itoa(minor)
}

// hostPort splits a Host header (or a URL's host) into server.address
// and server.port, the scheme's default port when it names none.
func hostPort(hostport, scheme string) (string, int) {
	host, p, err := net.SplitHostPort(hostport)
	if err != nil {
		host, p = strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]"), ""
	}
	port, err := strconv.Atoi(p)
	if err != nil || port <= 0 || port > 65535 {
		port = 80
		if scheme == "https" {
			port = 443
		}
	}
	return host, port
}

// The admission attributes on the server span.
const (
	AttrStage      = "sluice.stage"
	AttrClass      = "sluice.class"
	AttrPriority   = "sluice.priority"
	AttrController = "sluice.controller"
	AttrDecision   = "sluice.decision"
	AttrReason     = "sluice.reason"
	AttrQueueWait  = "sluice.queue_wait"
	// EventShed is the span event of a request sluice refused.
	EventShed = "sluice.shed"
)

// Decision is one request's admission decision.
type Decision struct {
	Stage, Class, Priority, Controller string
	// Admitted is the decision; Reason says why a request was refused
	// ("shed", "deadline", "queue_timeout", "pool_queue_full", ...).
	Admitted bool
	Reason   string
	// QueueWait is the time the request waited in the stage's queue.
	QueueWait time.Duration
}

// Record puts d on span: the attributes, and for a refusal the
// sluice.shed event with the reason.
func Record(span trace.Span, d Decision) {
	decision := "admit"
	if !d.Admitted {
		decision = "reject"
	}
	attrs := []attribute.KeyValue{
		attribute.String(AttrStage, d.Stage),
		attribute.String(AttrClass, d.Class),
		attribute.String(AttrPriority, d.Priority),
		attribute.String(AttrController, d.Controller),
		attribute.String(AttrDecision, decision),
		attribute.String(AttrReason, d.Reason),
		attribute.Float64(AttrQueueWait, d.QueueWait.Seconds()),
	}
	span.SetAttributes(attrs...)
	if !d.Admitted {
		Shed(span, d.Reason)
	}
}

// Shed adds the sluice.shed event to span: a request refused (by its
// stage, the backend pool or a client share) for reason.
func Shed(span trace.Span, reason string) {
	span.AddEvent(EventShed, trace.WithAttributes(attribute.String(AttrReason, reason)))
}

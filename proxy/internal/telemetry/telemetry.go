// Package telemetry exports the proxy's traces and metrics over OTLP/HTTP
// (protobuf) beside its Prometheus endpoint: a server span per request
// carrying the admission decision, and the Prometheus registry's series,
// under the same names and labels, through the OpenTelemetry Prometheus
// bridge (a metric producer read by a periodic reader). It lives under
// proxy/internal so that a service importing only sluice's middleware
// does not link OpenTelemetry.
//
// The proxy holds a *Telemetry only when a telemetry.otlp section is
// configured; a nil *Telemetry is the off state, and the request path
// then only compares a pointer with nil.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
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
	"go.opentelemetry.io/otel/trace"
)

// Options configure the exporters.
type Options struct {
	// Endpoint is the collector's OTLP/HTTP base URL, such as
	// http://127.0.0.1:4318; traces are posted to <Endpoint>/v1/traces and
	// metrics to <Endpoint>/v1/metrics (the OTLP/HTTP convention).
	Endpoint string
	// Headers, when set, is called before every export (and every retry)
	// for the header fields to send with it (an API key, a tenant), so
	// that rotated credentials apply to the next export without a
	// restart. The exporters then use their own HTTP client (Go's default
	// transport settings, ExportTimeout per export), in place of the
	// OTEL_EXPORTER_OTLP_CERTIFICATE and _TIMEOUT variables.
	Headers func() map[string]string
	// Traces and Metrics switch each signal on.
	Traces, Metrics bool
	// Interval is the metrics export period.
	Interval time.Duration
	// SampleRatio is the fraction of new traces sampled, in [0, 1]; a
	// request whose traceparent carries a sampling decision follows it
	// (parent-based sampling).
	SampleRatio float64
	// ServiceName and ServiceVersion are the resource's service.name and
	// service.version.
	ServiceName, ServiceVersion string
	// Gatherer is read at every metrics export (the proxy's registry).
	Gatherer prometheus.Gatherer
	// Logger receives the exporters' errors (a collector that cannot be
	// reached, a refused export) as warnings; nil leaves OpenTelemetry's
	// default, which prints them with the standard log package. The
	// handler is process-wide (otel.SetErrorHandler).
	Logger *slog.Logger
}

// Telemetry is the running export pipeline. Its methods are safe for
// concurrent use; a nil *Telemetry is off.
type Telemetry struct {
	tp     *sdktrace.TracerProvider // nil without traces
	mp     *sdkmetric.MeterProvider // nil without metrics
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
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
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
			l.Warn("opentelemetry export failed", "endpoint", o.Endpoint, "err", err)
		}))
	}
	base := strings.TrimSuffix(o.Endpoint, "/")
	res, err := resource.New(ctx, resource.WithAttributes(
		attribute.String("service.name", o.ServiceName),
		attribute.String("service.version", o.ServiceVersion)))
	if err != nil {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	t := &Telemetry{prop: propagation.TraceContext{}}
	traceOpts := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(base + "/v1/traces")}
	metricOpts := []otlpmetrichttp.Option{otlpmetrichttp.WithEndpointURL(base + "/v1/metrics")}
	if o.Headers != nil {
		c := headerClient(o.Headers)
		traceOpts = append(traceOpts, otlptracehttp.WithHTTPClient(c))
		metricOpts = append(metricOpts, otlpmetrichttp.WithHTTPClient(c))
	}
	if o.Traces {
		exp, err := otlptracehttp.New(ctx, traceOpts...)
		if err != nil {
			return nil, fmt.Errorf("telemetry: trace exporter: %w", err)
		}
		t.tp = sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res),
			sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(o.SampleRatio))))
		t.tracer = t.tp.Tracer("github.com/sluicehq/sluice/proxy")
	}
	if o.Metrics {
		exp, err := otlpmetrichttp.New(ctx, metricOpts...)
		if err != nil {
			return nil, fmt.Errorf("telemetry: metric exporter: %w", err)
		}
		reader := sdkmetric.NewPeriodicReader(exp, sdkmetric.WithInterval(o.Interval),
			sdkmetric.WithProducer(promBridge.NewMetricProducer(promBridge.WithGatherer(o.Gatherer))))
		t.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader), sdkmetric.WithResource(res))
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

// StartServer starts the server span of r, the child of the trace its
// traceparent names (W3C Trace Context) if it has one, and returns r with
// the span in its context. The caller ends the span.
func (t *Telemetry) StartServer(r *http.Request) (*http.Request, trace.Span) {
	ctx := t.prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	ctx, span := t.tracer.Start(ctx, r.Method, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(
			attribute.String("http.request.method", r.Method),
			attribute.String("url.path", r.URL.Path),
			attribute.String("server.address", r.Host)))
	return r.WithContext(ctx), span
}

// Inject writes the trace context of ctx's span into h (traceparent), so
// that the backend's spans are children of the proxy's.
func (t *Telemetry) Inject(ctx context.Context, h http.Header) {
	t.prop.Inject(ctx, propagation.HeaderCarrier(h))
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

// Status sets the span's http.response.status_code, and an error status
// for a 5xx answer (OpenTelemetry's HTTP server convention).
func Status(span trace.Span, code int) {
	span.SetAttributes(attribute.Int("http.response.status_code", code))
	if code >= 500 {
		span.SetStatus(codes.Error, http.StatusText(code))
	}
}

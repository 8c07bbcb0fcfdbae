package proxy

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/httpx"
	"github.com/sluicehq/sluice/policy"
	"github.com/sluicehq/sluice/proxy/internal/telemetry"
	"github.com/sluicehq/sluice/stage"
)

// TelemetryConfig is the telemetry section: OpenTelemetry export beside
// the Prometheus endpoint. Without an otlp section nothing is exported
// and the request path does no tracing work.
type TelemetryConfig struct {
	// OTLP exports over OTLP/HTTP (protobuf); nil (the default) is off.
	OTLP *OTLPConfig `yaml:"otlp,omitempty"`
}

// OTLPConfig is the OTLP/HTTP exporter (docs/opentelemetry.md).
type OTLPConfig struct {
	// Endpoint is the collector's OTLP/HTTP base URL, e.g.
	// http://127.0.0.1:4318 (required); spans go to <endpoint>/v1/traces,
	// metrics to <endpoint>/v1/metrics.
	Endpoint string `yaml:"endpoint"`
	// Traces exports a server span per request with its admission
	// decision (default false).
	Traces bool `yaml:"traces"`
	// Metrics exports the Prometheus registry's series under the same
	// names and labels (default false).
	Metrics bool `yaml:"metrics"`
	// Interval is the metrics export period (default 10s, at least 1s).
	Interval time.Duration `yaml:"interval"`
	// Headers are sent with every export, e.g. an API key (default none).
	Headers map[string]string `yaml:"headers,omitempty"`
	// SampleRatio is the fraction of new traces sampled, in [0, 1]
	// (default 1); a traceparent's sampled flag is followed.
	SampleRatio *float64 `yaml:"sample_ratio,omitempty"`
	// ServiceName is the resource's service.name (default sluice).
	ServiceName string `yaml:"service_name"`
}

// Telemetry defaults.
const (
	DefaultOTLPInterval    = 10 * time.Second
	DefaultOTLPSampleRatio = 1.0
	DefaultOTLPServiceName = "sluice"
)

func (t *TelemetryConfig) setDefaults() {
	o := t.OTLP
	if o == nil {
		return
	}
	if o.Interval == 0 {
		o.Interval = DefaultOTLPInterval
	}
	if o.SampleRatio == nil {
		r := DefaultOTLPSampleRatio
		o.SampleRatio = &r
	}
	if o.ServiceName == "" {
		o.ServiceName = DefaultOTLPServiceName
	}
}

func (t *TelemetryConfig) validate() error {
	o := t.OTLP
	if o == nil {
		return nil
	}
	const p = "telemetry.otlp."
	u, err := url.Parse(o.Endpoint)
	if o.Endpoint == "" {
		return fieldErr(p+"endpoint", "is required: the collector's OTLP/HTTP URL, e.g. http://127.0.0.1:4318")
	}
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return fieldErr(p+"endpoint", "%q is invalid: must be an http:// or https:// URL with a host and no query, e.g. http://127.0.0.1:4318", o.Endpoint)
	}
	if !o.Traces && !o.Metrics {
		return fieldErr(p+"traces", "neither traces nor metrics is true: enable one, or remove telemetry.otlp")
	}
	if o.Interval < time.Second {
		return fieldErr(p+"interval", "%v is invalid: must be at least 1s", o.Interval)
	}
	if r := *o.SampleRatio; !(r >= 0 && r <= 1) {
		return fieldErr(p+"sample_ratio", "%v is invalid: must be within [0, 1]", r)
	}
	for k, v := range o.Headers {
		if !httpx.IsToken(k) {
			return fieldErr(p+"headers", "%q is not a header name", k)
		}
		if strings.ContainsAny(v, "\r\n\x00") {
			return fieldErr(p+"headers."+k, "the value contains a line break or NUL")
		}
	}
	if strings.TrimSpace(o.ServiceName) == "" {
		return fieldErr(p+"service_name", "%q is invalid: must not be blank", o.ServiceName)
	}
	return nil
}

// newTelemetry starts the exporters of cfg, or returns nil when it has no
// otlp section.
func newTelemetry(cfg *TelemetryConfig, s *Server, version string) (*telemetry.Telemetry, error) {
	o := cfg.OTLP
	if o == nil {
		return nil, nil
	}
	t, err := telemetry.New(context.Background(), telemetry.Options{
		Endpoint: o.Endpoint, Headers: o.Headers, Traces: o.Traces, Metrics: o.Metrics, Interval: o.Interval,
		SampleRatio: *o.SampleRatio, ServiceName: o.ServiceName, ServiceVersion: version, Gatherer: s.reg, Logger: s.log})
	if err != nil {
		return nil, fmt.Errorf("proxy: telemetry: %w", err)
	}
	return t, nil
}

// traceDecision records the stage's admission decision on the request's
// server span: t is the ticket of an admitted request, err the error of a
// refused one.
func (h *Handler) traceDecision(span trace.Span, g *generation, cr policy.Request, t stage.Ticket, err error) {
	d := telemetry.Decision{Stage: cr.Stage.Name(), Class: g.pol.ClassName(cr.Class), Priority: cr.Hop.Priority,
		Controller: g.controllerOf(cr.Stage.Name()), Admitted: err == nil}
	switch {
	case err == nil:
		d.QueueWait = t.Start().Sub(t.Arrival())
	case errors.Is(err, stage.ErrDeadline):
		d.Reason = "deadline"
	case errors.Is(err, stage.ErrQueueTimeout):
		d.Reason = "queue_timeout"
	case errors.Is(err, sluice.ErrRejected):
		d.Reason = "shed"
	default:
		d.Reason = "client_gone"
	}
	telemetry.Record(span, d)
	if err != nil && errors.Is(err, sluice.ErrRejected) {
		telemetry.Status(span, g.cfg.Reject.Status)
	}
}

// controllerOf returns the controller of the stage named name ("none" for
// the implicit stage).
func (g *generation) controllerOf(name string) string {
	for i := range g.cfg.Stages {
		if g.cfg.Stages[i].Name == name {
			return g.cfg.Stages[i].Controller
		}
	}
	return policy.DefaultController
}

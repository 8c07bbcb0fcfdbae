// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/sluicehq/sluice/internal/httpx"
	"github.com/sluicehq/sluice/internal/secret"
	"github.com/sluicehq/sluice/proxy/internal/telemetry"
)

// TelemetryConfig is the telemetry section: OpenTelemetry export beside
// the Prometheus endpoint. Without an otlp section nothing is exported
// and the request path does no tracing work.
type TelemetryConfig struct {
	// OTLP exports over OTLP/HTTP (protobuf); nil (the default) is off.
	OTLP *OTLPConfig `yaml:"otlp,omitempty"`
}

// OTLPConfig is the OTLP/HTTP exporter (docs/opentelemetry.md). A field
// left unset takes the standard OTEL_* environment variable's value, as
// OpenTelemetry's SDKs do; a field that is set wins over it.
type OTLPConfig struct {
	// Endpoint is the collector's OTLP/HTTP base URL, e.g.
	// http://127.0.0.1:4318; spans go to <endpoint>/v1/traces, metrics to
	// <endpoint>/v1/metrics. Unset (the default):
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT and _METRICS_ENDPOINT as they
	// are, else OTEL_EXPORTER_OTLP_ENDPOINT with those paths, else
	// http://localhost:4318.
	Endpoint string `yaml:"endpoint"`
	// Traces exports a server span per request with its admission
	// decision (default false).
	Traces bool `yaml:"traces"`
	// Metrics exports the Prometheus registry's series under the same
	// names and labels (default false).
	Metrics bool `yaml:"metrics"`
	// Interval is the metrics export period (default 10s, at least 1s).
	Interval time.Duration `yaml:"interval"`
	// Headers are header fields sent with every export, e.g. an API key
	// (default none). Their values are secrets, shown as <redacted>
	// everywhere. A reload applies changes: every export reads them from
	// the running configuration. Unset (and no HeadersFile):
	// OTEL_EXPORTER_OTLP_HEADERS and its per-signal forms, which the
	// exporters read themselves; switching between the two needs a
	// restart.
	Headers map[string]secret.String `yaml:"headers,omitempty"`
	// HeadersFile names a file of "name=value" lines (blank lines and
	// lines starting with # skipped), read at start and on every reload
	// into Headers (a mounted Kubernetes Secret rotates without a
	// restart); exclusive with Headers (default none).
	HeadersFile string `yaml:"headers_file,omitempty"`
	// SampleRatio is the fraction of new traces sampled, in [0, 1]
	// (default 1); a traceparent's sampled flag is followed.
	SampleRatio *float64 `yaml:"sample_ratio,omitempty"`
	// ServiceName is the resource's service.name. Unset (the default):
	// OTEL_SERVICE_NAME, else service.name in OTEL_RESOURCE_ATTRIBUTES,
	// else sluice.
	ServiceName string `yaml:"service_name"`
}

// Telemetry defaults.
const (
	DefaultOTLPInterval    = 10 * time.Second
	DefaultOTLPSampleRatio = 1.0
	// DefaultOTLPServiceName is service.name when neither service_name
	// nor the environment names the service.
	DefaultOTLPServiceName = telemetry.DefaultServiceName
)

func (t *TelemetryConfig) setDefaults() {
	o := t.OTLP
	if o == nil {
		return
	}
	o.Interval = cmp.Or(o.Interval, DefaultOTLPInterval)
	setPtrDefault(&o.SampleRatio, DefaultOTLPSampleRatio)
}

func (t *TelemetryConfig) validate() error {
	o := t.OTLP
	if o == nil {
		return nil
	}
	const p = "telemetry.otlp."
	if u, err := url.Parse(o.Endpoint); o.Endpoint != "" &&
		(err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil) {
		return fieldErr(p+"endpoint", "%q is invalid: must be an http:// or https:// URL with a host and no query or user info "+
			"(credentials go in otlp.headers_file), e.g. http://127.0.0.1:4318", redactURL(o.Endpoint))
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
	if err := validateOTLPHeaders(o); err != nil {
		return err
	}
	if o.ServiceName != "" && strings.TrimSpace(o.ServiceName) == "" {
		return fieldErr(p+"service_name", "%q is invalid: must not be blank", o.ServiceName)
	}
	return nil
}

// redactURL returns s with the password of its user info replaced
// (url.URL.Redacted), for the error that refuses it.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	return u.Redacted()
}

// validateOTLPHeaders checks the header names and values of otlp.headers
// (or its file), in name order, without showing a value.
func validateOTLPHeaders(o *OTLPConfig) error {
	p := "telemetry.otlp.headers"
	if o.HeadersFile != "" {
		p = "telemetry.otlp.headers_file"
	}
	for _, k := range slices.Sorted(maps.Keys(o.Headers)) {
		if !httpx.IsToken(k) {
			return fieldErr(p, "%q is not a header name", k)
		}
		if strings.ContainsAny(o.Headers[k].Reveal(), "\r\n\x00") {
			return fieldErr(p, "the value of %s contains a line break or NUL", k)
		}
	}
	return nil
}

// otlpHeaders returns the running configuration's otlp.headers, the
// values revealed: the exporters call it before every export, so that a
// reload that rotates them applies to the next export.
func (s *Server) otlpHeaders() map[string]string {
	o := s.h.gen.Load().cfg.Telemetry.OTLP
	if o == nil || len(o.Headers) == 0 {
		return nil
	}
	out := make(map[string]string, len(o.Headers))
	for k, v := range o.Headers {
		out[k] = v.Reveal()
	}
	return out
}

// newTelemetry starts the exporters of cfg, or returns nil when it has no
// otlp section or OTEL_SDK_DISABLED is true (the SDKs' switch).
func newTelemetry(cfg *TelemetryConfig, s *Server, version string) (*telemetry.Telemetry, error) {
	o := cfg.OTLP
	if o == nil {
		return nil, nil
	}
	if off, _ := strconv.ParseBool(os.Getenv("OTEL_SDK_DISABLED")); off {
		s.log.Info("telemetry: OTEL_SDK_DISABLED is true: nothing is exported")
		return nil, nil
	}
	// Headers the file gives (or its headers_file) are read from the
	// running configuration at every export, so a reload rotates them;
	// without them the exporters read the environment's themselves.
	var headers func() map[string]string
	if len(o.Headers) > 0 || o.HeadersFile != "" {
		headers = s.otlpHeaders
	}
	t, err := telemetry.New(context.Background(), telemetry.Options{
		Endpoint: o.Endpoint, Headers: headers, Traces: o.Traces, Metrics: o.Metrics, Interval: o.Interval,
		SampleRatio: *o.SampleRatio, ServiceName: o.ServiceName, ServiceVersion: version, Gatherer: s.gath, Logger: s.log})
	if err != nil {
		return nil, fmt.Errorf("proxy: telemetry: %w", err)
	}
	return t, nil
}

// controllerOf returns the controller of the stage named name (for the
// implicit stage, what policy.Config.ImplicitController says).
func (g *generation) controllerOf(name string) string {
	for i := range g.cfg.Stages {
		if g.cfg.Stages[i].Name == name {
			return g.cfg.Stages[i].Controller
		}
	}
	return g.cfg.Config.ImplicitController()
}

// tracedRoundTrip is roundTrip within a client span, the child of the
// request's server span: one per attempt (sluice's client side may retry,
// backends.client), each carrying its own traceparent to the backend.
// The span ends when the response body has been read or closed, or at
// once for a protocol switch (whose body is the upgraded connection) and
// a failure (error.type is the cause proxy_upstream_errors_total names).
func (rs *reqState) tracedRoundTrip(req *http.Request) (*http.Response, error) {
	span := rs.h.tel.StartClient(rs, req, int(rs.attempts.Add(1))-1)
	res, err := rs.roundTrip(req)
	if err != nil {
		_, cause, _ := upstreamError(err, rs, req)
		telemetry.ClientFailed(span, cause, err)
		return nil, err
	}
	telemetry.ClientAnswered(span, res)
	if res.StatusCode == http.StatusSwitchingProtocols || res.Body == nil || res.Body == http.NoBody {
		span.End()
		return res, nil
	}
	res.Body = &spanBody{ReadCloser: res.Body, span: span}
	return res, nil
}

// spanBody ends a client span when its response body ends.
type spanBody struct {
	io.ReadCloser
	span trace.Span
	once sync.Once
}

func (b *spanBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.once.Do(func() { b.span.End() })
	}
	return n, err
}

func (b *spanBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(func() { b.span.End() })
	return err
}

// SPDX-License-Identifier: Apache-2.0

package policy

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/metrictest"
)

const latencyPolicy = `
classes: {order: [gold, bronze]}
stages:
  - name: conc
    match: {path_prefix: /conc/}
    controller: static-concurrency
    params: {limit: 4}
  - name: api
    controller: static-rate
    params: {rate: 0.001}
    burst: 2
`

// Behind the middleware every request is observed once: an answer
// below 500 as ok, a 500 as error, a refusal as rejected, each in its
// stage and class, and in a stage with a concurrency limit its wait for
// admission; there is no upstream histogram (the handler is the
// service). The histograms are native (schema 3) with the classic
// buckets beside, and every stage, class and outcome exists at 0 before
// its first request.
func TestLatencyHistograms(t *testing.T) {
	p := build(t, latencyPolicy, Options{})
	reg := prometheus.NewRegistry()
	reg.MustRegister(p.Collector())
	for _, stage := range []string{"conc", "api", ImplicitStage} {
		for _, class := range []string{"gold", "bronze"} {
			for _, o := range []string{"ok", "error", "rejected"} {
				h := metrictest.Histogram(t, reg, "sluice_request_duration_seconds", map[string]string{"stage": stage, "class": class, "outcome": o})
				if h == nil || h.GetSampleCount() != 0 {
					t.Fatalf("%s/%s/%s before any request: %v", stage, class, o, h)
				}
			}
		}
	}
	const work = 20 * time.Millisecond
	mw := sluice.Middleware(p)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(work)
		if r.URL.Path == "/fail" {
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	for _, path := range []string{"/ok", "/fail", "/refused", "/conc/a", "/conc/b"} {
		rec := httptest.NewRecorder()
		mw.ServeHTTP(rec, request("GET", path, "192.0.2.1:1"))
		if path == "/refused" && rec.Code != http.StatusServiceUnavailable {
			t.Fatalf("third request: %d, want 503", rec.Code)
		}
	}
	api := map[string]string{"stage": "api", "class": "bronze"}
	with := func(o string) map[string]string {
		m := map[string]string{"outcome": o}
		for k, v := range api {
			m[k] = v
		}
		return m
	}
	for o, want := range map[string]uint64{"ok": 1, "error": 1, "rejected": 1} {
		h := metrictest.Histogram(t, reg, "sluice_request_duration_seconds", with(o))
		if h.GetSampleCount() != want {
			t.Errorf("outcome %s: %d observations, want %d", o, h.GetSampleCount(), want)
		}
		if o != "rejected" && h.GetSampleSum() < work.Seconds() {
			t.Errorf("outcome %s: %vs, less than the handler's %v", o, h.GetSampleSum(), work)
		}
	}
	if up := metrictest.Histogram(t, reg, "sluice_upstream_duration_seconds", nil); up != nil {
		t.Errorf("behind the middleware, sluice_upstream_duration_seconds has a series: %v", up)
	}
	if qw := metrictest.Histogram(t, reg, "sluice_queue_wait_seconds", map[string]string{"stage": "api"}); qw != nil {
		t.Errorf("a rate-gated stage has queue-wait series: %v", qw)
	}
	qw := metrictest.Histogram(t, reg, "sluice_queue_wait_seconds", map[string]string{"stage": "conc", "class": "bronze"})
	if qw.GetSampleCount() != 2 || qw.GetSampleSum() >= work.Seconds() {
		t.Errorf("queue wait: %d observations summing %vs, want 2 with no wait", qw.GetSampleCount(), qw.GetSampleSum())
	}
	if h := metrictest.Histogram(t, reg, "sluice_request_duration_seconds", map[string]string{"stage": "conc", "class": "bronze", "outcome": "ok"}); h.GetSampleCount() != 2 {
		t.Errorf("stage conc: %d observations, want 2", h.GetSampleCount())
	}
	if gold := metrictest.Histogram(t, reg, "sluice_request_duration_seconds", map[string]string{"stage": "api", "class": "gold", "outcome": "ok"}); gold.GetSampleCount() != 0 {
		t.Errorf("class gold observed %d requests of class bronze", gold.GetSampleCount())
	}
	h := metrictest.Histogram(t, reg, "sluice_request_duration_seconds", with("ok"))
	if h.GetSchema() != 3 || len(h.GetPositiveSpan()) == 0 {
		t.Errorf("not a native histogram of schema 3: schema %d, spans %v", h.GetSchema(), h.GetPositiveSpan())
	}
	var bounds []float64
	for _, b := range h.GetBucket() {
		bounds = append(bounds, b.GetUpperBound())
	}
	if !slices.Equal(bounds, LatencyBuckets) {
		t.Errorf("classic buckets %v, want %v", bounds, LatencyBuckets)
	}
}

// A response that becomes a stream before the stage's long_lived (an
// event stream here) is not observed: its length is not a latency.
func TestLatencySkipsEventStreams(t *testing.T) {
	p := build(t, latencyPolicy, Options{})
	reg := prometheus.NewRegistry()
	reg.MustRegister(p.Collector())
	mw := sluice.Middleware(p)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("data: x\n\n"))
	}))
	rec := httptest.NewRecorder()
	mw.ServeHTTP(rec, request("GET", "/events", "192.0.2.1:1"))
	if rec.Body.String() != "data: x\n\n" {
		t.Fatalf("the stream was not served: %d %q", rec.Code, rec.Body)
	}
	if h := metrictest.Histogram(t, reg, "sluice_request_duration_seconds", map[string]string{"stage": "api", "class": "bronze", "outcome": "ok"}); h.GetSampleCount() != 0 {
		t.Errorf("an event stream was observed: %d", h.GetSampleCount())
	}
	if h := metrictest.Histogram(t, reg, "sluice_request_duration_seconds", map[string]string{"stage": "api", "class": "bronze", "outcome": "error"}); h.GetSampleCount() != 0 {
		t.Errorf("an event stream was observed as an error: %d", h.GetSampleCount())
	}
}

// A policy that replaces another (a reload) keeps the histograms' counts
// and drops the series of the stages and classes it no longer has. With
// RecordsUpstream (the proxy's), the upstream histogram has series and
// Request.Latency records into them.
func TestLatencyAcrossReload(t *testing.T) {
	p := build(t, latencyPolicy, Options{RecordsUpstream: true})
	reg := prometheus.NewRegistry()
	reg.MustRegister(CollectorFor(func() *Policy { return p }))
	a, err := p.Admit(request("GET", "/", "192.0.2.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	a.Done(sluice.Success)
	p.ClassifyRequest(request("GET", "/", "192.0.2.1:1"), time.Now()).Latency.Upstream(time.Second)
	if h := metrictest.Histogram(t, reg, "sluice_upstream_duration_seconds", map[string]string{"stage": "api", "class": "bronze"}); h.GetSampleCount() != 1 || h.GetSampleSum() != 1 {
		t.Errorf("upstream: %d observations summing %v, want the one of 1s", h.GetSampleCount(), h.GetSampleSum())
	}
	next := build(t, `
classes: {order: [gold, bronze]}
stages:
  - name: api
    controller: static-rate
    params: {rate: 0.001}
    burst: 2
  - name: web
    match: {path_prefix: /web/}
`, Options{Previous: p, RecordsUpstream: true})
	p = next
	if h := metrictest.Histogram(t, reg, "sluice_request_duration_seconds", map[string]string{"stage": "api", "class": "bronze", "outcome": "ok"}); h.GetSampleCount() != 1 {
		t.Errorf("after the reload: %d observations, want the 1 before it", h.GetSampleCount())
	}
	if h := metrictest.Histogram(t, reg, "sluice_queue_wait_seconds", map[string]string{"stage": "web", "class": "gold"}); h == nil {
		t.Error("the new stage has no series")
	}
	p = build(t, `classes: {order: [bronze]}`, Options{Previous: next, RecordsUpstream: true})
	for _, gone := range []map[string]string{{"stage": "api"}, {"stage": "web"}, {"class": "gold"}} {
		if h := metrictest.Histogram(t, reg, "sluice_upstream_duration_seconds", gone); h != nil {
			t.Errorf("series of %v kept after the reload that removed it", gone)
		}
	}
	if h := metrictest.Histogram(t, reg, "sluice_upstream_duration_seconds", map[string]string{"stage": ImplicitStage, "class": "bronze"}); h == nil {
		t.Error("the implicit stage's series were dropped")
	}
}

// BenchmarkLatency is what recording adds to an admitted request that
// did not wait (the common case), through the observers its Request
// carries (resolved when the policy was built), on every core at once:
// the proxy's three observations, the middleware's two in a stage with a
// concurrency limit (one in any other).
func BenchmarkLatency(b *testing.B) {
	p := build(b, latencyPolicy, Options{RecordsUpstream: true})
	lat := p.ClassifyRequest(request("GET", "/", "192.0.2.1:1"), time.Now()).Latency
	for _, c := range []struct {
		name     string
		upstream bool
	}{{"proxy", true}, {"middleware", false}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				d := 3 * time.Millisecond
				for pb.Next() {
					lat.QueueWait(0)
					if c.upstream {
						lat.Upstream(d)
					}
					lat.Request(LatencyOK, d+d/8)
					d += 37 * time.Microsecond // spread over the buckets
					if d > time.Second {
						d = 3 * time.Millisecond
					}
				}
			})
		})
	}
}

// The three outcomes of Admission.Done: a success is observed as ok, a
// failure as error, and an ignored request (sluice.Ignore) in neither
// histogram nor as a stage error, though it completed.
func TestLatencyOutcomes(t *testing.T) {
	p := build(t, latencyPolicy, Options{})
	reg := prometheus.NewRegistry()
	reg.MustRegister(p.Collector())
	for _, o := range []sluice.Outcome{sluice.Success, sluice.Failure, sluice.Ignore, sluice.Ignore} {
		a, err := p.Admit(request("GET", "/conc/", "192.0.2.1:1"))
		if err != nil {
			t.Fatal(err)
		}
		a.Done(o)
	}
	for outcome, want := range map[string]uint64{"ok": 1, "error": 1} {
		if h := metrictest.Histogram(t, reg, "sluice_request_duration_seconds", map[string]string{"stage": "conc", "class": "bronze", "outcome": outcome}); h.GetSampleCount() != want {
			t.Errorf("outcome %s: %d observations, want %d", outcome, h.GetSampleCount(), want)
		}
	}
	st := p.Stage("conc")
	st.Step(time.Now().Add(time.Minute))
	if tot := st.Totals(1); tot.Completed != 4 || tot.Errors != 1 {
		t.Errorf("completed %d errors %d, want 4 1", tot.Completed, tot.Errors)
	}
}

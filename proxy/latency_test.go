// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/sluicehq/sluice/internal/metrictest"
)

// Every request through the proxy is observed once in
// sluice_request_duration_seconds with its stage, class and outcome: a
// backend's answer below 500 is ok, its 500 and sluice's 502 are errors,
// the stage's and the pool's 503s are rejections; an admitted request's
// upstream exchange and its wait before it have histograms of their own,
// and an event stream is not observed.
func TestLatencyHistogramsProxy(t *testing.T) {
	const work = 30 * time.Millisecond
	held, release := make(chan struct{}), make(chan struct{})
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/slow":
			time.Sleep(work)
		case "/api/fail":
			w.WriteHeader(http.StatusInternalServerError)
		case "/api/events":
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "data: x\n\n")
		case "/hold/":
			close(held)
			<-release
		}
	})
	p := startProxy(t, baseConfig(be.URL, `      max_concurrency: 1
  queue: {max: 0}
stages:
  - name: api
    match: {path_prefix: /api/}
    controller: static-rate
    params: {rate: 0.001}
    burst: 3
  - name: hold
    match: {path_prefix: /hold/}
`))
	reg := p.srv.Gatherer()
	// The pool's only slot held: the next request is refused by the pool.
	var wg sync.WaitGroup
	wg.Go(func() { get(t, p.url+"/hold/", nil) })
	<-held
	if code, _, _ := get(t, p.url+"/other", nil); code != http.StatusServiceUnavailable {
		t.Fatalf("with the pool full: %d, want 503", code)
	}
	close(release)
	wg.Wait()
	for path, want := range map[string]int{"/api/slow": 200, "/api/fail": 500, "/api/events": 200} {
		if code, _, _ := get(t, p.url+path, nil); code != want {
			t.Fatalf("%s: %d, want %d", path, code, want)
		}
	}
	if code, _, _ := get(t, p.url+"/api/slow", nil); code != http.StatusServiceUnavailable {
		t.Fatalf("past the stage's burst: %d, want 503", code)
	}
	api := func(outcome string) map[string]string {
		return map[string]string{"stage": "api", "class": "default", "outcome": outcome}
	}
	eventually(t, "the last request observed", func() bool {
		return countOf(metrictest.Histogram(t, reg, "sluice_request_duration_seconds", api("rejected"))) == 1
	})
	for _, c := range []struct {
		labels map[string]string
		count  uint64
	}{
		{api("ok"), 1}, {api("error"), 1}, {api("rejected"), 1},
		{map[string]string{"stage": "default", "outcome": "rejected"}, 1},
		{map[string]string{"stage": "hold", "outcome": "ok"}, 1},
		{map[string]string{"stage": "hold", "outcome": "error"}, 0},
	} {
		if got := countOf(metrictest.Histogram(t, reg, "sluice_request_duration_seconds", c.labels)); got != c.count {
			t.Errorf("sluice_request_duration_seconds%v: %d observations, want %d", c.labels, got, c.count)
		}
	}
	ok := metrictest.Histogram(t, reg, "sluice_request_duration_seconds", api("ok"))
	up := metrictest.Histogram(t, reg, "sluice_upstream_duration_seconds", map[string]string{"stage": "api"})
	wait := metrictest.Histogram(t, reg, "sluice_queue_wait_seconds", map[string]string{"stage": "api"})
	// Two exchanges (the event stream is not observed): the slow one's
	// time is in both the request's and the upstream's, none of it waits.
	if countOf(up) != 2 || countOf(wait) != 2 {
		t.Errorf("upstream and queue-wait observations: %d and %d, want 2 each", countOf(up), countOf(wait))
	}
	if ok.GetSampleSum() < work.Seconds() || up.GetSampleSum() < work.Seconds() || up.GetSampleSum() > ok.GetSampleSum()+0.01 {
		t.Errorf("request %vs, upstream %vs: want both at least %v, the upstream's within the request's", ok.GetSampleSum(), up.GetSampleSum(), work)
	}
	if wait.GetSampleSum() >= work.Seconds() {
		t.Errorf("queue wait %vs for requests that did not wait", wait.GetSampleSum())
	}
	if b := ok.GetBucket(); len(b) != 11 || b[0].GetUpperBound() != 0.005 || b[10].GetUpperBound() != 10 {
		t.Errorf("classic buckets %v", b)
	}
}

// A backend that cannot be reached is sluice's 502: an error.
func TestLatencyHistogramGatewayError(t *testing.T) {
	p := startProxy(t, baseConfig("http://127.0.0.1:1", ""))
	if code, _, _ := get(t, p.url+"/", nil); code != http.StatusBadGateway {
		t.Fatalf("unreachable backend: %d, want 502", code)
	}
	h := metrictest.Histogram(t, p.srv.Gatherer(), "sluice_request_duration_seconds", map[string]string{"outcome": "error"})
	if countOf(h) != 1 {
		t.Errorf("502: %d error observations, want 1", countOf(h))
	}
}

// sluice_build_info carries the version the server was given, and the
// running Go version when it was given none.
func TestBuildInfo(t *testing.T) {
	cfg, err := Parse("p.yaml", []byte(baseConfig("http://127.0.0.1:1", "")))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		build BuildInfo
		want  string
	}{
		{BuildInfo{Version: "v1.2.3", Revision: "abc123", GoVersion: "go1.99"}, `sluice_build_info{goversion="go1.99",revision="abc123",version="v1.2.3"} 1`},
		{BuildInfo{}, `sluice_build_info{goversion="` + runtime.Version() + `",revision="",version="(unknown)"} 1`},
	} {
		reg := prometheus.NewRegistry()
		if _, err := New(cfg, Options{Registerer: reg, Build: c.build, Logger: testLogger(t)}); err != nil {
			t.Fatal(err)
		}
		if err := testutil.GatherAndCompare(reg, strings.NewReader(`# HELP sluice_build_info 1, labelled with the running binary's version (as `+"`sluice version`"+` prints it), VCS revision and Go version.
# TYPE sluice_build_info gauge
`+c.want+"\n"), "sluice_build_info"); err != nil {
			t.Error(err)
		}
	}
}

func countOf(h *dto.Histogram) uint64 {
	if h == nil {
		return 0
	}
	return h.GetSampleCount()
}

// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// rejectAll is a stage that admits the first request and refuses the
// rest for the test's life: a token bucket of one token refilled every
// ~3 hours.
const rejectAll = `stages:
  - name: api
    match: {path_prefix: /}
    controller: static-rate
    burst: 1
    params: {rate: 0.0001}
`

func TestHealthzAndReadyz(t *testing.T) {
	be := backend(t, func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("be")) })
	cfg := strings.Replace(baseConfig(be.URL, "health:\n  check_interval: 20ms\n"),
		"  addr: 127.0.0.1:0\nbackends", "  addr: 127.0.0.1:0\n  token: 0123456789abcdef0123\nbackends", 1)
	r := startProxy(t, cfg)
	if r.srv.Config().Admin.Token == "" {
		t.Fatal("the test's config has no admin token")
	}
	// The admin token guards changes, not the probes: kubelet sends none.
	code, hd, body := get(t, r.admin+"/healthz", nil)
	if code != 200 || body != "ok\n" || hd.Get("Cache-Control") != "no-store" {
		t.Fatalf("/healthz: %d %q %v", code, body, hd)
	}
	eventually(t, "/readyz ready", func() bool {
		code, _, body := get(t, r.admin+"/readyz", nil)
		return code == 200 && body == "ready\n"
	})
	if m := r.metricsText(t); !strings.Contains(m, "\nproxy_ready 1\n") {
		t.Fatalf("proxy_ready is not 1:\n%s", grepLines(m, "proxy_ready"))
	}
	// The only backend goes away: not ready, and /healthz still alive.
	be.Close()
	eventually(t, "/readyz not ready", func() bool {
		code, _, body := get(t, r.admin+"/readyz", nil)
		return code == 503 && strings.Contains(body, "no backend server reachable (0 of 1")
	})
	if code, _, _ := get(t, r.admin+"/healthz", nil); code != 200 {
		t.Fatalf("/healthz %d without a backend", code)
	}
	if m := r.metricsText(t); !strings.Contains(m, "\nproxy_ready 0\n") {
		t.Fatalf("proxy_ready is not 0:\n%s", grepLines(m, "proxy_ready"))
	}
}

func TestReadyzDrains(t *testing.T) {
	url, release, arrived := blockingBackend(t)
	r := startProxy(t, baseConfig(url, "health:\n  check_interval: 20ms\n"))
	eventually(t, "ready", func() bool { c, _, _ := get(t, r.admin+"/readyz", nil); return c == 200 })
	done := goGet(r.url + "/slow")
	eventually(t, "the request at the backend", func() bool { return arrived.Load() == 1 })
	r.cancel() // SIGTERM: drain the request in flight
	eventually(t, "/readyz draining", func() bool {
		code, _, body := get(t, r.admin+"/readyz", nil)
		return code == 503 && strings.Contains(body, "draining")
	})
	release()
	if a := <-done; a.code != 200 {
		t.Fatalf("the request in flight during the drain got %d (%v)", a.code, a.err)
	}
}

func TestBackendProbePathsPassUnshed(t *testing.T) {
	var seen atomic.Int64
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/livez" {
			seen.Add(1)
		}
		_, _ = w.Write([]byte("backend " + r.URL.Path))
	})
	r := startProxy(t, baseConfig(be.URL, rejectAll))
	get(t, r.url+"/spend-the-token", nil)
	if code, _, _ := get(t, r.url+"/api", nil); code != 503 {
		t.Fatalf("the stage admitted /api (%d): the test needs one that refuses", code)
	}
	for range 20 {
		for _, p := range []string{"/healthz", "/readyz", "/livez?verbose=1"} {
			code, _, body := get(t, r.url+p, nil)
			if want := "backend " + strings.Split(p, "?")[0]; code != 200 || body != want {
				t.Fatalf("GET %s: %d %q, want 200 %q (forwarded, never shed)", p, code, body, want)
			}
		}
	}
	if n := seen.Load(); n != 20 {
		t.Fatalf("the backend saw /livez %d times, want 20", n)
	}
	m := r.metricsText(t)
	if !strings.Contains(m, "\nproxy_probe_requests_total 60\n") {
		t.Errorf("proxy_probe_requests_total is not 60:\n%s", grepLines(m, "proxy_probe_requests_total"))
	}
	// Probes are not offered to admission control: only the two requests
	// above.
	if n := r.srv.h.offered.Load(); n != 2 {
		t.Errorf("%d requests were offered to admission control, want 2 (probes bypass it)", n)
	}
	// A path that merely starts like a probe path is an ordinary request.
	if code, _, _ := get(t, r.url+"/healthz/deep", nil); code != 503 {
		t.Errorf("/healthz/deep: %d, want 503 (only exact paths pass)", code)
	}
}

func TestBackendProbePathsOff(t *testing.T) {
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {})
	r := startProxy(t, baseConfig(be.URL, rejectAll+"health:\n  backend_paths: []\n"))
	get(t, r.url+"/spend-the-token", nil)
	if code, _, _ := get(t, r.url+"/healthz", nil); code != 503 {
		t.Fatalf("with backend_paths: [], /healthz got %d, want the stage's 503", code)
	}
}

func TestListenerPrefixServesProbes(t *testing.T) {
	var hits atomic.Int64
	be := backend(t, func(w http.ResponseWriter, r *http.Request) { hits.Add(1) })
	r := startProxy(t, baseConfig(be.URL, rejectAll+"health:\n  listener_prefix: /-/sluice\n  check_interval: 20ms\n"))
	get(t, r.url+"/spend-the-token", nil)
	code, _, body := get(t, r.url+"/-/sluice/healthz", nil)
	if code != 200 || body != "ok\n" {
		t.Fatalf("/-/sluice/healthz on the client listener: %d %q", code, body)
	}
	eventually(t, "ready on the client listener", func() bool {
		code, _, body := get(t, r.url+"/-/sluice/readyz", nil)
		return code == 200 && body == "ready\n"
	})
	if n := hits.Load(); n != 1 {
		t.Fatalf("the backend saw %d requests, want 1: sluice's own probes are not forwarded", n)
	}
	if code, _, _ := get(t, r.url+"/-/sluice/other", nil); code != 503 {
		t.Fatalf("/-/sluice/other: %d, want the stage's 503", code)
	}
}

// TestShedWatch follows the hysteresis step by step: above 0.5 for 3s to
// become unready, below 0.2 for 5s to become ready.
func TestShedWatch(t *testing.T) {
	w := ShedWatch{Config: ReadyShedConfig{Above: 0.5, For: 3 * time.Second, Below: 0.2, ClearFor: 5 * time.Second}}
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	steps := []struct {
		s       float64
		unready bool
	}{
		{0.9, false}, // [0,1]: run starts at 0
		{0.9, false}, // [1,2]
		{0.4, false}, // [2,3]: run broken
		{0.6, false}, // [3,4]: run starts at 3
		{0.6, false}, // [4,5]
		{0.6, true},  // [5,6]: 3s above
		{0.3, true},  // [6,7]: between the thresholds: stays unready
		{0.1, true},  // [7,8]: run below starts at 7
		{0.1, true},  // [8,9]
		{0.3, true},  // [9,10]: run broken
		{0.1, true},  // [10,11]
		{0.1, true},
		{0.1, true},
		{0.1, true},
		{0.0, false}, // [14,15]: 5s below since 10
		{0.45, false},
	}
	for i, st := range steps {
		if got := w.Observe(at(i), at(i+1), st.s); got != st.unready {
			t.Fatalf("step %d (s=%v over [%d,%d]s): unready %v, want %v", i, st.s, i, i+1, got, st.unready)
		}
	}
}

func TestReadyzShedding(t *testing.T) {
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {})
	r := startProxy(t, baseConfig(be.URL, rejectAll+`health:
  check_interval: 20ms
  ready_shed: {above: 0.5, for: 100ms, below: 0.1, clear_for: 150ms}
`))
	eventually(t, "ready", func() bool { c, _, _ := get(t, r.admin+"/readyz", nil); return c == 200 })
	ctx, cancel := context.WithCancel(context.Background())
	loadDone := make(chan struct{})
	go func() {
		defer close(loadDone)
		for ctx.Err() == nil {
			if resp, err := client.Get(r.url + "/x"); err == nil {
				resp.Body.Close()
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	eventually(t, "/readyz unready while shedding", func() bool {
		code, _, body := get(t, r.admin+"/readyz", nil)
		return code == 503 && strings.Contains(body, "shedding")
	})
	cancel()
	<-loadDone
	eventually(t, "/readyz ready again", func() bool { c, _, _ := get(t, r.admin+"/readyz", nil); return c == 200 })
}

// TestDemandRatioMetric: a rate stage of 5 req/s offered 40 requests in a
// control period of 2 s (20 req/s) exports sluice_demand_ratio 4.
func TestDemandRatioMetric(t *testing.T) {
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {})
	r := startManual(t, baseConfig(be.URL, `stages:
  - name: api
    match: {path_prefix: /}
    controller: static-rate
    burst: 1000
    params: {rate: 5, period: 2s}
`))
	t0 := time.Now().Add(time.Hour)
	r.stepPolicy(t0)
	if m := r.metricsText(t); !strings.Contains(m, `sluice_demand_ratio{stage="api"} 0`+"\n") {
		t.Fatalf("sluice_demand_ratio is not 0 after an idle period:\n%s", grepLines(m, "sluice_demand_ratio"))
	}
	for range 40 {
		get(t, r.url+"/x", nil)
	}
	r.stepPolicy(t0.Add(2 * time.Second))
	if m := r.metricsText(t); !strings.Contains(m, `sluice_demand_ratio{stage="api"} 4`+"\n") {
		t.Fatalf("sluice_demand_ratio is not 4:\n%s", grepLines(m, "sluice_demand_ratio"))
	}
}

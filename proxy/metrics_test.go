// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Beside /state's numbers, /metrics carries what the Grafana dashboard
// and the alert rules compare against: each stage's target with the
// statistic it holds, the most restrictive setting its controller can
// reach, and the pool's wait.
func TestTargetAndFloorMetrics(t *testing.T) {
	be := backend(t, func(w http.ResponseWriter, _ *http.Request) {})
	r := startManual(t, baseConfig(be.URL, `stages:
  - {name: web, match: {path_prefix: /web}, controller: seda, params: {target: 100ms, rate_min: 0.05}}
  - {name: api, match: {path_prefix: /api}, controller: yaksha, params: {tref: 250ms, max_drop: 0.9}}
  - {name: site, match: {path_prefix: /}, controller: auto, params: {slo: 500ms}}
  - {name: fixed, match: {path_prefix: /fixed}, controller: static-rate, params: {rate: 10}}
`))
	text := r.metricsText(t)
	for _, want := range []string{
		`proxy_stage_target_seconds{objective="p90",stage="web"} 0.1`,
		`proxy_stage_target_seconds{objective="mean",stage="api"} 0.25`,
		`proxy_stage_target_seconds{objective="target",stage="site"} 0.5`,
		`proxy_stage_setting_floor{kind="rate",stage="web"} 0.05`,
		`proxy_stage_setting_floor{kind="drop_probability",stage="api"} 0.9`,
		`proxy_stage_setting_floor{kind="concurrency",stage="site"} 1`,
		"proxy_queue_wait_seconds_total 0",
		"proxy_queue_waits_total 0",
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("/metrics lacks %s:\n%s", want, grepLines(text, "proxy_stage_"))
		}
	}
	// No floor for a limit that never moves (a static rate).
	for _, stage := range []string{"fixed"} {
		if strings.Contains(text, `proxy_stage_setting_floor{kind=`) && strings.Contains(grepLines(text, "proxy_stage_setting_floor{"), `stage="`+stage+`"`) {
			t.Errorf("/metrics has a setting floor for stage %s", stage)
		}
	}
}

// Options.Registerer takes the proxy's metrics and Options.Gatherer is
// what /metrics serves: a wrapped Registerer (its label on every metric)
// is served from the registry under it; without a Gatherer it is refused;
// with neither, a registry of the proxy's own with the Go collector.
func TestOptionsRegistererAndGatherer(t *testing.T) {
	cfg := baseConfig("http://127.0.0.1:1", "")
	reg := prometheus.NewRegistry()
	wrapped := prometheus.WrapRegistererWith(prometheus.Labels{"app": "shop"}, reg)
	r := startProxyWith(t, cfg, Options{Logger: testLogger(t), Registerer: wrapped, Gatherer: reg})
	if _, _, body := get(t, r.admin+"/metrics", nil); !strings.Contains(body, `sluice_build_info{app="shop"`) {
		t.Errorf("/metrics of a wrapped Registerer lacks its label:\n%.2000s", body)
	}
	c, err := Parse("p.yaml", []byte(cfg))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(c, Options{Logger: testLogger(t), Registerer: wrapped}); err == nil || !strings.Contains(err.Error(), "Gatherer") {
		t.Errorf("a Registerer that is not a Gatherer, without Gatherer: %v", err)
	}
	r = startProxyWith(t, cfg, Options{Logger: testLogger(t)})
	if _, _, body := get(t, r.admin+"/metrics", nil); !strings.Contains(body, "go_goroutines") || !strings.Contains(body, "sluice_build_info{") {
		t.Errorf("/metrics without Registerer lacks the Go collector or the proxy's metrics:\n%.2000s", body)
	}
}

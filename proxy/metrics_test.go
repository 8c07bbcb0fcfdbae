// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"net/http"
	"strings"
	"testing"
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

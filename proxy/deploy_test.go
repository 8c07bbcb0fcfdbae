// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// The Grafana dashboard and the alert rules in deploy/ against the real
// /metrics: promtool accepts the rules, and every metric that a panel or
// a rule uses is served by a proxy with every feature on.

const (
	alertsFile  = "../deploy/prometheus/alerts.yml"
	grafanaFile = "../deploy/grafana/sluice.json"
)

// TestAlertRulesPromtool runs `promtool check rules` (Debian's prometheus
// package; make test installs it, and sets SLUICE_REQUIRE_PROMTOOL).
func TestAlertRulesPromtool(t *testing.T) {
	p, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("SLUICE_REQUIRE_PROMTOOL") != "" {
			t.Fatal("promtool is required here (SLUICE_REQUIRE_PROMTOOL) but missing: run scripts/test-deps.sh as root")
		}
		t.Skip("promtool not found: 'make test' installs it (Debian's prometheus package)")
	}
	out, err := exec.Command(p, "check", "rules", alertsFile).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "SUCCESS") {
		t.Fatalf("promtool check rules %s: %v\n%s", alertsFile, err, out)
	}
	t.Logf("%s", strings.TrimSpace(string(out)))
}

var metricName = regexp.MustCompile(`\b(?:sluice|proxy)_[a-z0-9_]*[a-z0-9]\b`)

// deployExprs returns every PromQL expression of the alert rules and the
// Grafana dashboard (panel targets and template queries), by where it is.
func deployExprs(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	b, err := os.ReadFile(alertsFile)
	must(t, err)
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	must(t, yaml.Unmarshal(b, &rules))
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			out["alert "+r.Alert] = r.Expr
		}
	}
	b, err = os.ReadFile(grafanaFile)
	must(t, err)
	var dash struct {
		Panels []struct {
			Type    string `json:"type"`
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	must(t, json.Unmarshal(b, &dash))
	panels := 0
	for _, p := range dash.Panels {
		if p.Type == "row" {
			continue
		}
		panels++
		if len(p.Targets) == 0 {
			t.Errorf("grafana panel %q has no query", p.Title)
		}
		for i, tg := range p.Targets {
			out["panel "+p.Title+" #"+string(rune('A'+i))] = tg.Expr
		}
	}
	for _, v := range dash.Templating.List {
		if v.Definition != "" {
			out["variable "+v.Name] = v.Definition
		}
	}
	if len(rules.Groups) == 0 || panels < 10 {
		t.Fatalf("found %d rule groups and %d panels: are the files there?", len(rules.Groups), panels)
	}
	return out
}

// TestDeployMetricsExist serves a proxy with auto, seda, yaksha, a
// concurrency stage, a cpu resource rule with its sensor, the policer,
// client shares and cluster mode (its Redis unreachable: the fallback),
// in front of one working server and one that refuses connections, and
// checks that /metrics has every metric the Grafana panels and the alert
// rules use.
func TestDeployMetricsExist(t *testing.T) {
	used := map[string][]string{}
	for where, expr := range deployExprs(t) {
		for _, m := range metricName.FindAllString(expr, -1) {
			used[m] = append(used[m], where)
		}
	}
	be := backend(t, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	deadURL := "http://" + dead.Addr().String()
	dead.Close() // connections to it are refused: upstream errors
	r := startProxy(t, baseConfig(be.URL, `    - url: `+deadURL+`
stages:
  - {name: web, match: {path_prefix: /web}, controller: seda, params: {target: 100ms}}
  - {name: api, match: {path_prefix: /api}, controller: yaksha, params: {tref: 100ms}}
  - {name: cgi, match: {path_prefix: /cgi}, controller: voigt-cpu}
  - {name: lim, match: {path_prefix: /lim}, controller: static-concurrency, params: {limit: 4}}
  - {name: all, match: {path_prefix: /}, controller: auto, params: {slo: 500ms}}
resources:
  - {stage: cgi, resource: cpu, sensor: {source: pool-busy}}
policer: {rate: 10000, burst: 1000, control: {q_ref: 100}}
shares:
  total_bandwidth: 1MB
  clients: [{name: a, share: 50, cidrs: [127.0.0.1]}]
cluster: {addrs: [`+dead.Addr().String()+`], instance: a, prefix: deploytest, period: 100ms}
`))
	for i := range 8 {
		for _, p := range []string{"/web", "/api", "/cgi", "/lim", "/"} {
			code, _, _ := get(t, r.url+p+"/x", nil)
			if code != 200 && code != 502 && code != 503 { // 502: the dead server; 503: a gate
				t.Fatalf("GET %s (%d): %d", p, i, code)
			}
		}
	}
	var missing []string
	check := func() bool {
		body := r.metricsText(t)
		have := map[string]bool{}
		for _, line := range strings.Split(body, "\n") {
			if line == "" || line[0] == '#' {
				continue
			}
			name, _, _ := strings.Cut(line, "{")
			name, _, _ = strings.Cut(name, " ")
			have[name] = true
		}
		missing = missing[:0]
		for m := range used {
			if !have[m] {
				missing = append(missing, m)
			}
		}
		return len(missing) == 0
	}
	// The policer's inputs and the rules' rates appear after their first
	// control period.
	deadline := time.Now().Add(testTimeout)
	for !check() && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf("%s, used by %v, is not in /metrics", m, used[m])
	}
	t.Logf("%d metrics used by deploy/, all served", len(used))
}

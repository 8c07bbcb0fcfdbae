// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// The promtool unit tests of the alert rules, beside the rules.
var alertTests = []string{"deploy/prometheus/alerts_test.yml", "deploy/prometheus/alerts_days_test.yml"}

func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("SLUICE_REQUIRE_PROMTOOL") != "" {
			t.Fatal("promtool is required here (SLUICE_REQUIRE_PROMTOOL) but missing: run scripts/test-deps.sh as root")
		}
		t.Skip("promtool not found: 'make test' installs it (Debian's prometheus package)")
	}
	return p
}

// promtoolRuns are the promtool commands TestAlertRules runs in the
// repository's root, as docs/operations.md writes them: `check rules` on
// the rule file, `test rules` on its unit tests, whose synthetic series
// make each alert fire and not fire.
var promtoolRuns = [][]string{
	{"check", "rules", AlertsFile},
	append([]string{"test", "rules"}, alertTests...),
}

// TestAlertRules runs promtoolRuns.
func TestAlertRules(t *testing.T) {
	p := promtool(t)
	for _, args := range promtoolRuns {
		c := exec.Command(p, args...)
		c.Dir = root
		out, err := c.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "SUCCESS") {
			t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestEveryAlertTested: each alert of the rule file has a unit test in
// which it fires and one in which it does not.
func TestEveryAlertTested(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, AlertsFile))
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `json:"alert"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(b, &rules); err != nil {
		t.Fatal(err)
	}
	fires, quiet := map[string]int{}, map[string]int{}
	for _, f := range alertTests {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		var tf struct {
			Tests []struct {
				AlertRuleTest []struct {
					Alertname string `json:"alertname"`
					ExpAlerts []any  `json:"exp_alerts"`
				} `json:"alert_rule_test"`
			} `json:"tests"`
		}
		if err := yaml.Unmarshal(b, &tf); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, tc := range tf.Tests {
			for _, a := range tc.AlertRuleTest {
				if len(a.ExpAlerts) > 0 {
					fires[a.Alertname]++
				} else {
					quiet[a.Alertname]++
				}
			}
		}
	}
	var names []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				names = append(names, r.Alert)
			}
		}
	}
	sort.Strings(names)
	for _, n := range names {
		if fires[n] == 0 || quiet[n] == 0 {
			t.Errorf("alert %s: %d tests where it fires, %d where it does not; want both", n, fires[n], quiet[n])
		}
	}
	if len(names) < 10 {
		t.Fatalf("%d alerts found in %s", len(names), AlertsFile)
	}
}

// TestDashboardQueries: every query of the Grafana dashboard parses as
// PromQL (promtool checks them as recording rules, with the dashboard's
// $stage variable given a value).
func TestDashboardQueries(t *testing.T) {
	p := promtool(t)
	b, err := os.ReadFile(filepath.Join(root, DashboardSource))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			ID      int    `json:"id"`
			Type    string `json:"type"`
			Targets []struct {
				Expr  string `json:"expr"`
				RefID string `json:"refId"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := yaml.Unmarshal(b, &dash); err != nil {
		t.Fatal(err)
	}
	var rules []map[string]string
	heatmaps := 0
	for _, pn := range dash.Panels {
		if pn.Type == "heatmap" {
			heatmaps++
		}
		for _, tg := range pn.Targets {
			rules = append(rules, map[string]string{
				"record": "dashboard:panel" + strconv.Itoa(pn.ID) + "_" + tg.RefID,
				"expr":   strings.ReplaceAll(tg.Expr, "$stage", ".+"),
			})
		}
	}
	if heatmaps == 0 || len(rules) < 20 {
		t.Fatalf("%d queries, %d heatmaps in the dashboard", len(rules), heatmaps)
	}
	out, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "dashboard-rules.yml")
	if err := os.WriteFile(f, out, 0o644); err != nil {
		t.Fatal(err)
	}
	if res, err := exec.Command(p, "check", "rules", f).CombinedOutput(); err != nil {
		t.Fatalf("a dashboard query does not parse: %v\n%s", err, res)
	}
}

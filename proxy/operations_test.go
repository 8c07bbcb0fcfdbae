// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	rePromQLBlock = regexp.MustCompile("(?s)```promql\n(.*?)```")
	reSeries      = regexp.MustCompile(`\b((?:sluice|proxy)_[a-z0-9_]+)\b(\{[^}]*\})?`)
	reMatcher     = regexp.MustCompile(`(\w+)\s*(?:=~|!=|!~|=)\s*"([^"]*)"`)
	reBy          = regexp.MustCompile(`\b(?:by|on)\s*\(([^)]*)\)`)
	reSample      = regexp.MustCompile(`^([a-z0-9_]+)(?:\{([^}]*)\})? `)
	reLabel       = regexp.MustCompile(`(\w+)="([^"]*)"`)
)

// checkPromQLSyntax has promtool parse every query, as the expression of
// a recording rule, where promtool is installed (make test's
// dependencies install it).
func checkPromQLSyntax(t *testing.T, blocks [][]string) {
	t.Helper()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Log("promtool is not installed: the queries' syntax is not checked")
		return
	}
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: operations\n    rules:\n")
	for i, b := range blocks {
		fmt.Fprintf(&rules, "      - record: operations:query%d\n        expr: |\n", i)
		for _, line := range strings.Split(strings.TrimSpace(b[1]), "\n") {
			rules.WriteString("          " + line + "\n")
		}
	}
	file := filepath.Join(t.TempDir(), "rules.yml")
	if err := os.WriteFile(file, []byte(rules.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "rules", file).CombinedOutput(); err != nil {
		t.Errorf("promtool check rules: %v\n%s", err, out)
	}
}

// TestOperationsPromQL holds the queries of docs/operations.md to what a
// running proxy serves: every series they name (a histogram by its name,
// _bucket, _sum or _count), every label they match or group by, and every
// label value they match exactly.
func TestOperationsPromQL(t *testing.T) {
	doc, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := rePromQLBlock.FindAllStringSubmatch(string(doc), -1)
	if len(blocks) < 5 {
		t.Fatalf("%d promql blocks in docs/operations.md", len(blocks))
	}
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {})
	p := startProxy(t, baseConfig(be.URL, `stages:
  - name: api
    match: {path_prefix: /}
    controller: auto
    params: {slo: 250ms}
`))
	get(t, p.url+"/", nil)
	// Every series served, with its label names and values.
	labels := map[string]map[string]map[string]bool{}
	for _, line := range strings.Split(p.metricsText(t), "\n") {
		m := reSample.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		ls := labels[m[1]]
		if ls == nil {
			ls = map[string]map[string]bool{}
			labels[m[1]] = ls
		}
		for _, l := range reLabel.FindAllStringSubmatch(m[2], -1) {
			if ls[l[1]] == nil {
				ls[l[1]] = map[string]bool{}
			}
			ls[l[1]][l[2]] = true
		}
	}
	checkPromQLSyntax(t, blocks)
	for _, b := range blocks {
		query := b[1]
		known := map[string]bool{}
		for _, s := range reSeries.FindAllStringSubmatch(query, -1) {
			name := s[1]
			ls := labels[name]
			if ls == nil {
				ls = labels[name+"_bucket"] // a native histogram's name
			}
			if ls == nil {
				t.Errorf("%s (in %q) is not served", name, strings.TrimSpace(query))
				continue
			}
			for l := range ls {
				known[l] = true
			}
			for _, m := range reMatcher.FindAllStringSubmatch(s[2], -1) {
				switch {
				case ls[m[1]] == nil:
					t.Errorf("%s has no label %s (in %q)", name, m[1], strings.TrimSpace(query))
				case strings.Contains(s[2], m[1]+"=\""+m[2]) && !ls[m[1]][m[2]]:
					t.Errorf("%s{%s=%q} is not served (in %q)", name, m[1], m[2], strings.TrimSpace(query))
				}
			}
		}
		for _, by := range reBy.FindAllStringSubmatch(query, -1) {
			for l := range strings.SplitSeq(by[1], ",") {
				if l = strings.TrimSpace(l); l != "" && !known[l] {
					t.Errorf("label %s, grouped on in %q, is on none of its series", l, strings.TrimSpace(query))
				}
			}
		}
	}
}

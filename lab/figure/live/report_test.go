// SPDX-License-Identifier: Apache-2.0

package live

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/lab/figure"
	"github.com/sluicehq/sluice/lab/report"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// goldenResult is a small deterministic result: two metrics, one passed
// and one failed check, a table and a tiny figure.
func goldenResult() (Experiment, *figure.Result) {
	s := report.NewSummary("golden", string(figure.Live), 7)
	s.Set("p90_ms_spike", 312.5)
	s.Set("p90_ms_spike_uncontrolled", 5123)
	s.Set("target_ms", 250)
	res := &figure.Result{Bundle: report.NewBundle(s)}
	t := report.NewTable("time_s", "p90_ms")
	_ = t.Append(0.0, 10.0)
	_ = t.Append(1.0, 400.0)
	res.AddTable("timeseries.csv", t)
	res.AddFigure("tiny.png", &report.Figure{Width: 2.5, PanelHeight: 1.4, DPI: 40, Panels: []report.Panel{{
		XLabel: "time (s)", YLabel: "p90 (ms)",
		Series: []report.Series{{Label: "p90", X: []float64{0, 1, 2}, Y: []float64{10, 400, 200}}},
		HLines: []report.RefLine{{Value: 250, Label: "target"}},
	}}})
	res.Checks = []figure.Check{
		figure.AtMost(s, "controlled p90 ≤ 1.5 × target <&> escaped", "p90_ms_spike", 375),
		figure.AtMost(s, "uncontrolled p90 ≤ target", "p90_ms_spike_uncontrolled", 250),
	}
	res.Setup = []string{"A setup sentence.", "Another one with <html> that must be escaped."}
	res.Key = []string{"p90_ms_spike"}
	return Experiment{Name: "golden", Paper: "A paper, Fig. 1", Description: "A deterministic report."}, res
}

func TestRenderHTMLGolden(t *testing.T) {
	e, res := goldenResult()
	doc, err := NewDoc(e, res, DocInfo{Date: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC), Machine: "linux/amd64, 2 CPUs, go1.26",
		Quick: true, Elapsed: 61234 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := RenderHTML(&buf, doc); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "report.golden.html")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -run TestRenderHTMLGolden -update to create it)", err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("report.html differs from %s (run with -update if the change is intended)", golden)
	}
	// The same input renders the same bytes.
	var again bytes.Buffer
	doc2, _ := NewDoc(e, res, DocInfo{Date: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC), Machine: "linux/amd64, 2 CPUs, go1.26",
		Quick: true, Elapsed: 61234 * time.Millisecond})
	if err := RenderHTML(&again, doc2); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), again.Bytes()) {
		t.Error("rendering is not deterministic")
	}
}

func TestReportIsSelfContained(t *testing.T) {
	e, res := goldenResult()
	doc, err := NewDoc(e, res, DocInfo{Date: time.Unix(0, 0), Machine: "m"})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := RenderHTML(&buf, doc); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	for _, want := range []string{
		`src="data:image/png;base64,iVBORw0KGgo`, // PNG signature, embedded
		"1 of 2 expectations met",
		`class="pass">met<`, `class="fail">NOT met<`,
		"p90_ms_spike = 312.5 (must be ≤ 375)",
		"&lt;&amp;&gt; escaped", "&lt;html&gt;",
		"timeseries.csv",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("report.html lacks %q", want)
		}
	}
	for _, bad := range []string{"<link", "<script", "http://", "https://", "ZgotmplZ"} {
		if strings.Contains(page, bad) {
			t.Errorf("report.html contains %q: it must not load anything", bad)
		}
	}
}

func TestWriteReport(t *testing.T) {
	e, res := goldenResult()
	doc, err := NewDoc(e, res, DocInfo{Date: time.Unix(0, 0), Machine: "m"})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files, err := WriteReport(dir, res, doc)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"summary.json", "timeseries.csv", "tiny.png", "expectations.csv", "report.html"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("%s not written: %v (files %v)", name, err, files)
		}
	}
	s, err := report.ReadSummary(filepath.Join(dir, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	if s.Mode != string(figure.Live) || s.Metric("p90_ms_spike") != 312.5 {
		t.Errorf("summary: mode %q p90 %v", s.Mode, s.Metric("p90_ms_spike"))
	}
	f, err := os.Open(filepath.Join(dir, "expectations.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tab, err := report.ReadCSV(f)
	if err != nil {
		t.Fatal(err)
	}
	if tab.Len() != 2 {
		t.Fatalf("expectations.csv has %d rows, want 2", tab.Len())
	}
	if pass, _ := tab.Cell(1, "pass"); pass != "false" {
		t.Errorf("second check pass = %q, want false", pass)
	}
}

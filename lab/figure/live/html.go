// SPDX-License-Identifier: Apache-2.0

package live

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"fmt"
	"html/template"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/sluicehq/sluice/lab/figure"
	"github.com/sluicehq/sluice/lab/report"
)

// Doc is everything report.html shows. RenderHTML is a pure function of a
// Doc: the same Doc always gives the same bytes.
type Doc struct {
	// Name and Title: the experiment's name and the page title.
	Name, Title string
	// Paper names the paper and figure reproduced; Description says what
	// the experiment does.
	Paper, Description string
	// Date is when the run started, Machine what it ran on, Elapsed how
	// long it took (all preformatted).
	Date, Machine, Elapsed string
	// Quick reports the shortened form; Seed the run's seed.
	Quick bool
	Seed  uint64
	// Setup are sentences describing the run.
	Setup []string
	// Checks are the expectations with their outcome; Met counts the
	// passed ones.
	Checks []figure.Check
	Met    int
	// Metrics are the summary's metrics, formatted, in name order.
	Metrics []DocMetric
	// Figures are the PNG plots, embedded as data: URIs.
	Figures []DocFigure
	// Files are the other files of the folder (CSV tables).
	Files []string
}

// DocMetric is one row of the metrics table.
type DocMetric struct{ Name, Value string }

// DocFigure is one embedded figure.
type DocFigure struct {
	Name string
	// Src is the image as a data:image/png;base64 URI.
	Src template.URL
}

// DocInfo is the run information NewDoc cannot read from the result.
type DocInfo struct {
	Date    time.Time
	Machine string
	Quick   bool
	Elapsed time.Duration
}

// NewDoc renders the result's figures to PNG and assembles the document.
func NewDoc(e Experiment, res *figure.Result, info DocInfo) (*Doc, error) {
	met, _ := res.Passed()
	d := &Doc{Name: e.Name, Title: "sluice-lab experiment " + e.Name, Paper: e.Paper, Description: e.Description,
		Date: info.Date.UTC().Format("2006-01-02 15:04 UTC"), Machine: info.Machine, Quick: info.Quick,
		Seed: res.Summary.Seed, Elapsed: info.Elapsed.Round(100 * time.Millisecond).String(),
		Setup: res.Setup, Checks: res.Checks, Met: met}
	for _, n := range res.Summary.Names() {
		d.Metrics = append(d.Metrics, DocMetric{Name: n, Value: report.FormatFloat(res.Summary.Metric(n))})
	}
	for _, name := range res.Files() {
		switch {
		case strings.HasSuffix(name, ".png"):
			var buf bytes.Buffer
			if err := res.Figure(name).WritePNG(&buf); err != nil {
				return nil, fmt.Errorf("figure %s: %w", name, err)
			}
			d.Figures = append(d.Figures, DocFigure{Name: name,
				Src: template.URL("data:image/png;base64," + base64.StdEncoding.EncodeToString(buf.Bytes()))})
		case name != report.SummaryFile:
			d.Files = append(d.Files, name)
		}
	}
	return d, nil
}

// RenderHTML writes the self-contained report page (inline CSS, figures
// as data: URIs, no external resources).
func RenderHTML(w io.Writer, d *Doc) error {
	return pageTemplate.Execute(w, d)
}

var pageTemplate = template.Must(template.New("report").Funcs(template.FuncMap{
	"passfail": func(b bool) string {
		if b {
			return "met"
		}
		return "NOT met"
	},
}).Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{{.Title}}</title>
<style>
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;max-width:70rem;margin:2rem auto;padding:0 1rem;color:#1d1d1f;line-height:1.45}
h1{font-size:1.6rem;margin-bottom:.2rem}
h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #ddd;padding-bottom:.2rem}
.meta{color:#555;font-size:.9rem}
table{border-collapse:collapse;margin:.5rem 0;font-size:.92rem}
th,td{border:1px solid #ccc;padding:.3rem .6rem;text-align:left;vertical-align:top}
th{background:#f3f3f3}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.pass{background:#e5f6e5;color:#14621b;font-weight:600}
.fail{background:#fbe4e4;color:#9b1c1c;font-weight:600}
.score{font-size:1.1rem;font-weight:600}
figure{margin:1rem 0}
figure img{max-width:100%;border:1px solid #ddd}
figcaption{color:#555;font-size:.85rem}
code{background:#f3f3f3;padding:0 .2rem}
</style>
</head>
<body>
<h1>{{.Title}}</h1>
<p class="meta">{{.Paper}}</p>
<p>{{.Description}}</p>
<p class="meta">Run {{.Date}} on {{.Machine}}; seed {{.Seed}}; {{if .Quick}}quick form (--quick){{else}}full form{{end}}; took {{.Elapsed}}.</p>

<h2>Expectations</h2>
<p class="score">{{.Met}} of {{len .Checks}} expectations met by this run.</p>
<table>
<tr><th>expectation</th><th>measured in this run</th><th>result</th></tr>
{{range .Checks}}<tr><td>{{.Claim}}</td><td>{{.Measured}}</td><td class="{{if .Pass}}pass{{else}}fail{{end}}">{{passfail .Pass}}</td></tr>
{{end}}</table>

<h2>Setup</h2>
<ul>
{{range .Setup}}<li>{{.}}</li>
{{end}}</ul>

<h2>Figures</h2>
{{range .Figures}}<figure><img src="{{.Src}}" alt="{{.Name}}"><figcaption>{{.Name}}</figcaption></figure>
{{end}}
<h2>Metrics (summary.json)</h2>
<table>
<tr><th>metric</th><th>value</th></tr>
{{range .Metrics}}<tr><td><code>{{.Name}}</code></td><td class="num">{{.Value}}</td></tr>
{{end}}</table>

<h2>Files</h2>
<p>summary.json{{range .Files}}, {{.}}{{end}}, report.html</p>
</body>
</html>
`))

// MachineDescription describes this machine in one line: OS and
// architecture, CPU count and model, Go version.
func MachineDescription() string {
	model := cpuModel()
	if model != "" {
		model = " (" + model + ")"
	}
	return fmt.Sprintf("%s/%s, %d CPUs%s, %s", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), model, runtime.Version())
}

// cpuModel reads the first "model name" of /proc/cpuinfo, or "".
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.Join(strings.Fields(v), " ")
		}
	}
	return ""
}

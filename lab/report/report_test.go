// SPDX-License-Identifier: Apache-2.0

package report

import (
	"bytes"
	"encoding/json"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestSummaryJSON(t *testing.T) {
	s := NewSummary("kihl-step", "sim", 7)
	s.Set("utilization_mean", 0.8)
	s.Set("p90_ms", 12.5)
	s.Set("settling_time_s", math.NaN())
	s.Set("admitted_rps", math.Inf(1))
	data, err := s.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	want := `{
  "scenario": "kihl-step",
  "mode": "sim",
  "seed": 7,
  "admitted_rps": null,
  "p90_ms": 12.5,
  "settling_time_s": null,
  "utilization_mean": 0.8
}`
	if string(data) != want {
		t.Errorf("MarshalJSON:\n%s\nwant\n%s", data, want)
	}
	// It is a flat JSON object any decoder reads.
	var flat map[string]any
	if err := json.Unmarshal(data, &flat); err != nil || len(flat) != 7 {
		t.Fatalf("not a flat object of 7 keys: %v %v", flat, err)
	}
	var back Summary
	if err := back.UnmarshalJSON(data); err != nil {
		t.Fatal(err)
	}
	if back.Scenario != "kihl-step" || back.Mode != "sim" || back.Seed != 7 || back.Metric("p90_ms") != 12.5 ||
		!math.IsNaN(back.Metric("settling_time_s")) || !slices.Equal(back.Names(), s.Names()) {
		t.Errorf("round trip gave %+v", back)
	}
	if _, ok := back.Get("missing"); ok || !math.IsNaN(back.Metric("missing")) {
		t.Error("a missing metric must read as absent / NaN")
	}
}

func TestSummaryRejectsBadNames(t *testing.T) {
	for _, name := range []string{"P90", "p90-ms", "9lives", "", "seed", "mode", "p90 ms"} {
		s := NewSummary("x", "sim", 1)
		s.Set(name, 1)
		if _, err := s.MarshalJSON(); err == nil {
			t.Errorf("metric name %q accepted", name)
		}
	}
	var s Summary
	if err := s.UnmarshalJSON([]byte(`{"scenario": 3}`)); err == nil || !strings.Contains(err.Error(), `"scenario"`) {
		t.Errorf("bad scenario type: %v", err)
	}
	if err := s.UnmarshalJSON([]byte(`{"p90_ms": "fast"}`)); err == nil || !strings.Contains(err.Error(), `"p90_ms"`) {
		t.Errorf("bad metric type: %v", err)
	}
}

func TestTable(t *testing.T) {
	tb := NewTable("variant", "time_s", "n", "rt_ms", "ok")
	if err := tb.Append("a", 1500*time.Millisecond, 3, 0.1234567, true); err != nil {
		t.Fatal(err)
	}
	if err := tb.Append("b", 2.0, int64(4), math.NaN(), false); err != nil {
		t.Fatal(err)
	}
	if err := tb.Append("c", 1.0); err == nil {
		t.Error("short row accepted")
	}
	if err := tb.Append("c", 1.0, 1, struct{}{}, true); err == nil || !strings.Contains(err.Error(), `column "rt_ms"`) {
		t.Errorf("unsupported cell type: %v", err)
	}
	var b bytes.Buffer
	if err := tb.WriteCSV(&b); err != nil {
		t.Fatal(err)
	}
	want := "variant,time_s,n,rt_ms,ok\na,1.5,3,0.123457,true\nb,2,4,NaN,false\n"
	if b.String() != want {
		t.Errorf("CSV:\n%s\nwant\n%s", b.String(), want)
	}
	back, err := ReadCSV(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	rt, err := back.Floats("rt_ms")
	if err != nil || rt[0] != 0.123457 || !math.IsNaN(rt[1]) {
		t.Errorf("Floats = %v, %v", rt, err)
	}
	if _, err := back.Floats("variant"); err == nil || !strings.Contains(err.Error(), "row 0") {
		t.Errorf("non-numeric column: %v", err)
	}
	if _, err := back.Floats("nope"); err == nil {
		t.Error("unknown column accepted")
	}
	f, _ := back.Filter("variant", "b")
	if c, _ := f.Cell(0, "n"); f.Len() != 1 || c != "4" {
		t.Errorf("Filter gave %d rows, n = %q", f.Len(), c)
	}
}

func TestStats(t *testing.T) {
	xs := []float64{5, 1, math.NaN(), 3, 2, 4}
	if m := Mean(xs); m != 3 {
		t.Errorf("Mean = %v", m)
	}
	if s := Std(xs); math.Abs(s-math.Sqrt2) > 1e-12 {
		t.Errorf("Std = %v", s)
	}
	if !math.IsNaN(Mean(nil)) {
		t.Error("empty input must give NaN")
	}
	x, y := ECDF(xs)
	if !slices.Equal(x, []float64{1, 2, 3, 4, 5}) || !slices.Equal(y, []float64{0.2, 0.4, 0.6, 0.8, 1}) {
		t.Errorf("ECDF = %v %v", x, y)
	}
	c := CDFSeries("u", xs)
	if c.Kind != Step || len(c.X) != 6 || c.Y[0] != 0 || c.X[0] != 1 {
		t.Errorf("CDFSeries = %+v", c)
	}
}

func testFigure() *Figure {
	return &Figure{Width: 6, PanelHeight: 2.5, DPI: 80, Panels: []Panel{
		{Title: "line", XLabel: "time (s)", YLabel: "utilization", HLines: []RefLine{{Value: 0.8, Label: "target"}},
			VLines: []RefLine{{Value: 2}},
			Series: []Series{{Label: "a", X: []float64{1, 2, 3, 4}, Y: []float64{0.2, math.NaN(), 0.9, 0.7}},
				{Label: "b", X: []float64{1, 2, 3}, Y: []float64{0.5, 0.6, 0.4}, Kind: LinePoints, Dashed: true}}},
		{XLabel: "load (×)", YLabel: "RT (ms)", LogY: true, HLines: []RefLine{{Value: 150, Label: "Tref"}, {Value: -1}},
			Series: []Series{{Label: "c", X: []float64{1, 2}, Y: []float64{100, 1e5}, Kind: Points},
				{Label: "bars", X: []float64{1, 2}, Y: []float64{50, 0}, Kind: Bars}, {Label: "s", X: []float64{1, 2}, Y: []float64{1, 2}, Kind: Step}}},
		{XLabel: "x", YLabel: "y", Series: []Series{{Label: "empty"}}},
	}}
}

func TestFigurePNG(t *testing.T) {
	var a, b bytes.Buffer
	if err := testFigure().WritePNG(&a); err != nil {
		t.Fatal(err)
	}
	if err := testFigure().WritePNG(&b); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Error("the same figure rendered to different bytes")
	}
	img, err := png.Decode(bytes.NewReader(a.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if w, h := img.Bounds().Dx(), img.Bounds().Dy(); w != 480 || h != 600 {
		t.Errorf("image is %d×%d, want 480×600 (6 in × 3·2.5 in at 80 dpi)", w, h)
	}
}

func TestFigureValidate(t *testing.T) {
	cases := []struct {
		name string
		f    Figure
		want string
	}{
		{"no panels", Figure{}, "no panels"},
		{"no label", Figure{Panels: []Panel{{XLabel: "x"}}}, "axis labels"},
		{"ragged", Figure{Panels: []Panel{{XLabel: "x", YLabel: "y", Series: []Series{{Label: "s", X: []float64{1}}}}}}, `series "s"`},
	}
	for _, tc := range cases {
		if err := tc.f.WritePNG(&bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestDecadeTicks(t *testing.T) {
	ticks := decadeTicks{}.Ticks(math.Log10(40), math.Log10(2e5))
	var labels []string
	for _, tk := range ticks {
		if tk.Label != "" {
			labels = append(labels, tk.Label)
		}
	}
	if !slices.Equal(labels, []string{"100", "1000", "10000", "100000"}) {
		t.Errorf("labels %v", labels)
	}
	// Less than a decade: every tick is labelled.
	for _, tk := range (decadeTicks{}).Ticks(math.Log10(120), math.Log10(180)) {
		if tk.Label == "" {
			t.Errorf("unlabelled tick at %v within a narrow range", math.Pow(10, tk.Value))
		}
	}
}

func TestBundleWrite(t *testing.T) {
	s := NewSummary("demo", "sim", 3)
	s.Set("p90_ms", 10)
	b := NewBundle(s)
	tb := NewTable("time_s", "x")
	_ = tb.Append(1.0, 2.0)
	b.AddTable("timeseries.csv", tb)
	b.AddFigure("plot.png", testFigure())
	dir := filepath.Join(t.TempDir(), "out", "demo-3")
	paths, err := b.Write(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"summary.json", "timeseries.csv", "plot.png"}; !slices.Equal(b.Files(), want) || len(paths) != 3 {
		t.Errorf("files %v, paths %v", b.Files(), paths)
	}
	got, err := ReadSummary(filepath.Join(dir, SummaryFile))
	if err != nil || got.Metric("p90_ms") != 10 {
		t.Errorf("ReadSummary: %v %v", got, err)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "timeseries.csv")); string(data) != "time_s,x\n1,2\n" {
		t.Errorf("timeseries.csv = %q", data)
	}
	if b.Table("timeseries.csv") != tb || b.Figure("plot.png") == nil || b.Table("nope") != nil {
		t.Error("lookup by name failed")
	}

	for _, name := range []string{"../x.csv", "x.txt", ".csv", "a/b.csv"} {
		bad := NewBundle(s)
		bad.AddTable(name, tb)
		if _, err := bad.Write(t.TempDir()); err == nil {
			t.Errorf("table name %q accepted", name)
		}
	}
	bad := NewBundle(s)
	bad.AddFigure("f.png", &Figure{})
	if _, err := bad.Write(t.TempDir()); err == nil || !strings.Contains(err.Error(), "f.png") {
		t.Errorf("invalid figure: %v", err)
	}
}

func TestSettleTime(t *testing.T) {
	bins := []float64{400, 400, 100, 150, 190, 210, 200, 195, 205, 200}
	// Steady 200 (last 4 bins ≈ 200); from bin 2 the 2-bin mean reaches
	// ±10% at bin 4 ((190+210)/2 = 200): 2 bins after.
	if got := SettleTime(bins, 2, 2, 4, 0.1); got != 2 {
		t.Fatalf("SettleTime = %v, want 2", got)
	}
	if got := SettleTime(bins, 9, 2, 4, 0.1); !math.IsNaN(got) {
		t.Fatalf("from inside the tail: %v, want NaN", got)
	}
	if got := SettleTime([]float64{0, 0, 0, 10, 10}, 0, 1, 2, 0.1); got != 3 {
		t.Fatalf("a step: %v, want 3", got)
	}
}

// SPDX-License-Identifier: Apache-2.0

package report

import (
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// SeriesKind says how a series is drawn.
type SeriesKind uint8

const (
	// Line joins the points with straight segments (the zero value).
	Line SeriesKind = iota
	// Points draws a marker at each point.
	Points
	// LinePoints draws both: the usual look of a sweep.
	LinePoints
	// Step draws a post-step line: y holds from x[i] until x[i+1]. An
	// empirical distribution function is drawn this way.
	Step
	// Bars draws a vertical bar from 0 to y at each x. Several bar series in
	// one panel are drawn side by side.
	Bars
)

// Series is one named data series of a panel. Points with a NaN or ±Inf
// coordinate are gaps: the line is broken there. On a logarithmic axis,
// points ≤ 0 are gaps too.
type Series struct {
	// Label is the legend entry; empty leaves the series out of the legend.
	Label string
	// X and Y are the coordinates, of equal length.
	X, Y []float64
	// Kind is the drawing style (default Line).
	Kind SeriesKind
	// Dashed draws the line dashed.
	Dashed bool
}

// RefLine is a reference line across a panel: a target (ρ_ref, Tref, the
// p90 target) or an event time.
type RefLine struct {
	// Value is the y (for HLines) or x (for VLines) of the line.
	Value float64
	// Label is the legend entry, e.g. "target 150 ms"; empty means none.
	Label string
}

// Panel is one plot: axes with labels and units, series, reference lines
// and a legend.
type Panel struct {
	// Title is drawn above the panel; may be empty.
	Title string
	// XLabel and YLabel name the axes with their units, e.g. "time (s)",
	// "utilization (fraction busy)". Both are required.
	XLabel, YLabel string
	// Series are drawn in order, each with its own color.
	Series []Series
	// HLines are horizontal dashed reference lines (targets); VLines are
	// vertical ones.
	HLines, VLines []RefLine
	// XMin/XMax and YMin/YMax fix an axis range when Max > Min; otherwise
	// the axis fits the data and the reference lines.
	XMin, XMax, YMin, YMax float64
	// LogY draws the y axis on a logarithmic scale.
	LogY bool
	// LegendLeft puts the legend in the top-left corner instead of the
	// top-right one; LegendBottom puts it at the bottom.
	LegendLeft, LegendBottom bool
	// BarWidth is the total width of a group of bars in x units; 0 picks
	// 0.8 of the smallest gap between bar positions.
	BarWidth float64
}

// Figure is a PNG image made of panels stacked vertically and aligned on
// their x axes.
type Figure struct {
	// Width is the image width in inches (default 8).
	Width float64
	// PanelHeight is the height of each panel in inches (default 4).
	PanelHeight float64
	// DPI is the resolution (default 110).
	DPI int
	// Panels are drawn top to bottom; at least one.
	Panels []Panel
}

// palette holds distinguishable colors for series, in order.
var palette = []color.Color{
	color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, // blue
	color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, // red
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}, // green
	color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}, // orange
	color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}, // purple
	color.RGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff}, // brown
	color.RGBA{R: 0x17, G: 0xbe, B: 0xcf, A: 0xff}, // cyan
	color.RGBA{R: 0x7f, G: 0x7f, B: 0x7f, A: 0xff}, // grey
}

// refColor is the color of reference lines.
var refColor = color.RGBA{A: 0xff}

// Validate reports the first problem of the figure: no panels, a missing
// axis label, or a series with X and Y of different lengths.
func (f *Figure) Validate() error {
	if len(f.Panels) == 0 {
		return errors.New("report: figure has no panels")
	}
	for i, p := range f.Panels {
		if p.XLabel == "" || p.YLabel == "" {
			return fmt.Errorf("report: panel %d (%q) needs both axis labels with units", i, p.Title)
		}
		for _, s := range p.Series {
			if len(s.X) != len(s.Y) {
				return fmt.Errorf("report: panel %d series %q has %d x and %d y values", i, s.Label, len(s.X), len(s.Y))
			}
		}
	}
	return nil
}

// WritePNG renders the figure as PNG to w.
func (f *Figure) WritePNG(w io.Writer) error {
	if err := f.Validate(); err != nil {
		return err
	}
	width, ph, dpi := f.Width, f.PanelHeight, f.DPI
	if width <= 0 {
		width = 8
	}
	if ph <= 0 {
		ph = 4
	}
	if dpi <= 0 {
		dpi = 110
	}
	plots := make([][]*plot.Plot, len(f.Panels))
	for i := range f.Panels {
		p, err := f.Panels[i].build()
		if err != nil {
			return fmt.Errorf("report: panel %d (%q): %w", i, f.Panels[i].Title, err)
		}
		plots[i] = []*plot.Plot{p}
	}
	img := vgimg.NewWith(vgimg.UseWH(vg.Length(width)*vg.Inch, vg.Length(ph*float64(len(f.Panels)))*vg.Inch),
		vgimg.UseDPI(dpi), vgimg.UseBackgroundColor(color.White))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(f.Panels), Cols: 1, PadTop: vg.Points(4), PadBottom: vg.Points(4),
		PadLeft: vg.Points(4), PadRight: vg.Points(10), PadY: vg.Points(12)}
	// Align the data areas horizontally only: plot.Align also stretches
	// panels vertically, which pushes a top legend above the data area.
	canvases := plot.Align(plots, tiles, dc)
	for i := range plots {
		c := tiles.At(dc, 0, i)
		c.Min.X, c.Max.X = canvases[i][0].Min.X, canvases[i][0].Max.X
		plots[i][0].Draw(c)
	}
	_, err := vgimg.PngCanvas{Canvas: img}.WriteTo(w)
	return err
}

// WriteFile renders the figure as a PNG file at path.
func (f *Figure) WriteFile(path string) error {
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := f.WritePNG(out); err != nil {
		out.Close()
		return fmt.Errorf("report: writing %s: %w", path, err)
	}
	return out.Close()
}

// finiteFor reports whether (x, y) can be drawn on the panel's axes.
func (p *Panel) finiteFor(x, y float64) bool {
	if math.IsNaN(x) || math.IsInf(x, 0) || math.IsNaN(y) || math.IsInf(y, 0) {
		return false
	}
	return !p.LogY || y > 0
}

// ty maps a y value to the drawn coordinate: log10(y) on a log axis.
func (p *Panel) ty(y float64) float64 {
	if p.LogY {
		return math.Log10(y)
	}
	return y
}

// decadeTicks marks a log10-transformed axis: major ticks labelled with
// the value at each power of ten, minor ticks at 2…9 times it.
type decadeTicks struct{}

func (decadeTicks) Ticks(min, max float64) []plot.Tick {
	var out []plot.Tick
	for e := math.Floor(min); e <= math.Ceil(max); e++ {
		for m := 1; m <= 9; m++ {
			v := e + math.Log10(float64(m))
			if v < min-1e-9 || v > max+1e-9 {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 {
				t.Label = strconv.FormatFloat(math.Pow(10, e), 'g', -1, 64)
			}
			out = append(out, t)
		}
	}
	labelled := 0
	for _, t := range out {
		if t.Label != "" {
			labelled++
		}
	}
	if labelled < 2 { // less than a decade: label every tick
		for i := range out {
			out[i].Label = strconv.FormatFloat(math.Pow(10, out[i].Value), 'g', 2, 64)
		}
	}
	return out
}

// segments splits a series at its gaps.
func (p *Panel) segments(s Series) []plotter.XYs {
	var out []plotter.XYs
	var cur plotter.XYs
	for i := range s.X {
		if !p.finiteFor(s.X[i], s.Y[i]) {
			if len(cur) > 0 {
				out = append(out, cur)
				cur = nil
			}
			continue
		}
		cur = append(cur, plotter.XY{X: s.X[i], Y: p.ty(s.Y[i])})
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

func (p *Panel) build() (*plot.Plot, error) {
	pl := plot.New()
	pl.Title.Text = p.Title
	pl.X.Label.Text = p.XLabel
	pl.Y.Label.Text = p.YLabel
	pl.Legend.Top = !p.LegendBottom
	pl.Legend.Left = p.LegendLeft
	pl.Legend.Padding = vg.Points(3)
	pl.Add(plotter.NewGrid())
	if p.LogY {
		// Logarithmic y: the data are drawn as log10(y) on a linear axis
		// with decade ticks. (gonum's LogScale mis-places the axis label's
		// glyph box, which pushes top legends above the data area.)
		pl.Y.Tick.Marker = decadeTicks{}
	}
	nBars, barIdx := 0, 0
	for _, s := range p.Series {
		if s.Kind == Bars {
			nBars++
		}
	}
	barWidth := p.BarWidth
	if nBars > 0 && barWidth <= 0 {
		barWidth = p.defaultBarWidth()
	}
	for i, s := range p.Series {
		col := palette[i%len(palette)]
		ls := draw.LineStyle{Color: col, Width: vg.Points(1.5)}
		if s.Dashed {
			ls.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		}
		gs := draw.GlyphStyle{Color: col, Radius: vg.Points(2.5), Shape: glyphShape(i)}
		var thumbs []plot.Thumbnailer
		if s.Kind == Bars {
			b := &bars{p: p, s: s, style: ls, fill: col, width: barWidth / float64(nBars),
				offset: (float64(barIdx) - float64(nBars-1)/2) * barWidth / float64(nBars)}
			barIdx++
			pl.Add(b)
			thumbs = append(thumbs, b)
		} else {
			for k, seg := range p.segments(s) {
				if s.Kind != Points {
					l, err := plotter.NewLine(seg)
					if err != nil {
						return nil, err
					}
					l.LineStyle = ls
					if s.Kind == Step {
						l.StepStyle = plotter.PostStep
					}
					pl.Add(l)
					if k == 0 {
						thumbs = append(thumbs, l)
					}
				}
				if s.Kind == Points || s.Kind == LinePoints || len(seg) == 1 { // a lone point has no line
					sc, err := plotter.NewScatter(seg)
					if err != nil {
						return nil, err
					}
					sc.GlyphStyle = gs
					pl.Add(sc)
					if k == 0 {
						thumbs = append(thumbs, sc)
					}
				}
			}
		}
		if s.Label != "" && len(thumbs) > 0 {
			pl.Legend.Add(s.Label, thumbs...)
		}
	}
	for _, r := range p.HLines {
		pl.Add(&refLine{value: p.ty(r.Value), horizontal: true, skip: p.LogY && !(r.Value > 0)})
		if r.Label != "" {
			pl.Legend.Add(r.Label, &refLine{})
		}
	}
	for _, r := range p.VLines {
		pl.Add(&refLine{value: r.Value})
		if r.Label != "" {
			pl.Legend.Add(r.Label, &refLine{})
		}
	}
	if p.XMax > p.XMin {
		pl.X.Min, pl.X.Max = p.XMin, p.XMax
	}
	if p.YMax > p.YMin && (!p.LogY || p.YMin > 0) {
		pl.Y.Min, pl.Y.Max = p.ty(p.YMin), p.ty(p.YMax)
	}
	if pl.X.Min > pl.X.Max { // nothing drawn
		pl.X.Min, pl.X.Max = 0, 1
	}
	if pl.Y.Min > pl.Y.Max {
		pl.Y.Min, pl.Y.Max = 0, 1
	}
	if pl.Y.Min == pl.Y.Max {
		d := math.Max(math.Abs(pl.Y.Min)*0.1, 1)
		if p.LogY {
			d = 0.5
		}
		pl.Y.Min, pl.Y.Max = pl.Y.Min-d, pl.Y.Max+d
	}
	if pl.X.Min == pl.X.Max {
		pl.X.Min, pl.X.Max = pl.X.Min-1, pl.X.Max+1
	}
	return pl, nil
}

// defaultBarWidth is 0.8 of the smallest gap between distinct bar
// positions (1 when there is a single position).
func (p *Panel) defaultBarWidth() float64 {
	gap := math.Inf(1)
	var xs []float64
	for _, s := range p.Series {
		if s.Kind == Bars {
			xs = append(xs, s.X...)
		}
	}
	for i := range xs {
		for j := range xs {
			if d := math.Abs(xs[i] - xs[j]); d > 0 && d < gap {
				gap = d
			}
		}
	}
	if math.IsInf(gap, 1) {
		gap = 1
	}
	return 0.8 * gap
}

// glyphShape gives each series its own marker shape.
func glyphShape(i int) draw.GlyphDrawer {
	switch i % 4 {
	case 1:
		return draw.SquareGlyph{}
	case 2:
		return draw.TriangleGlyph{}
	case 3:
		return draw.CrossGlyph{}
	}
	return draw.CircleGlyph{}
}

// refLine is a dashed reference line spanning the panel.
type refLine struct {
	value      float64
	horizontal bool
	skip       bool // not drawable (a non-positive value on a log axis)
}

var refStyle = draw.LineStyle{Color: refColor, Width: vg.Points(1.2), Dashes: []vg.Length{vg.Points(6), vg.Points(4)}}

func (r *refLine) Plot(c draw.Canvas, plt *plot.Plot) {
	tx, ty := plt.Transforms(&c)
	if r.skip {
		return
	}
	if r.horizontal {
		y := ty(r.value)
		c.StrokeLine2(refStyle, c.Min.X, y, c.Max.X, y)
		return
	}
	x := tx(r.value)
	c.StrokeLine2(refStyle, x, c.Min.Y, x, c.Max.Y)
}

// DataRange makes the axes include the line's value.
func (r *refLine) DataRange() (xmin, xmax, ymin, ymax float64) {
	inf := math.Inf(1)
	if r.skip {
		return inf, -inf, inf, -inf
	}
	if r.horizontal {
		return inf, -inf, r.value, r.value
	}
	return r.value, r.value, inf, -inf
}

// Thumbnail draws the legend sample.
func (r *refLine) Thumbnail(c *draw.Canvas) {
	y := c.Center().Y
	c.StrokeLine2(refStyle, c.Min.X, y, c.Max.X, y)
}

// bars draws one bar series.
type bars struct {
	p      *Panel
	s      Series
	style  draw.LineStyle
	fill   color.Color
	width  float64
	offset float64
}

func (b *bars) Plot(c draw.Canvas, plt *plot.Plot) {
	tx, ty := plt.Transforms(&c)
	base := 0.0
	if b.p.LogY {
		base = plt.Y.Min
	} else {
		base = math.Max(math.Min(base, plt.Y.Max), plt.Y.Min)
	}
	for i := range b.s.X {
		if !b.p.finiteFor(b.s.X[i], b.s.Y[i]) {
			continue
		}
		x0 := tx(b.s.X[i] + b.offset - b.width/2)
		x1 := tx(b.s.X[i] + b.offset + b.width/2)
		y0, y1 := ty(base), ty(b.p.ty(b.s.Y[i]))
		pts := []vg.Point{{X: x0, Y: y0}, {X: x0, Y: y1}, {X: x1, Y: y1}, {X: x1, Y: y0}}
		c.FillPolygon(b.fill, c.ClipPolygonXY(pts))
		c.StrokeLines(draw.LineStyle{Color: color.Black, Width: vg.Points(0.5)}, c.ClipLinesXY(append(pts, pts[0]))...)
	}
}

func (b *bars) DataRange() (xmin, xmax, ymin, ymax float64) {
	xmin, ymin = math.Inf(1), math.Inf(1)
	xmax, ymax = math.Inf(-1), math.Inf(-1)
	if !b.p.LogY {
		ymin, ymax = 0, 0
	}
	for i := range b.s.X {
		if !b.p.finiteFor(b.s.X[i], b.s.Y[i]) {
			continue
		}
		xmin = math.Min(xmin, b.s.X[i]+b.offset-b.width/2)
		xmax = math.Max(xmax, b.s.X[i]+b.offset+b.width/2)
		ymin = math.Min(ymin, b.p.ty(b.s.Y[i]))
		ymax = math.Max(ymax, b.p.ty(b.s.Y[i]))
	}
	return xmin, xmax, ymin, ymax
}

func (b *bars) Thumbnail(c *draw.Canvas) {
	pts := []vg.Point{{X: c.Min.X, Y: c.Min.Y}, {X: c.Min.X, Y: c.Max.Y}, {X: c.Max.X, Y: c.Max.Y}, {X: c.Max.X, Y: c.Min.Y}}
	c.FillPolygon(b.fill, pts)
}

// CDFSeries returns the empirical distribution function of samples as a
// Step series (non-finite samples are ignored).
func CDFSeries(label string, samples []float64) Series {
	x, y := ECDF(samples)
	if len(x) > 0 { // start the step at 0 just left of the smallest value
		x = append([]float64{x[0]}, x...)
		y = append([]float64{0}, y...)
	}
	return Series{Label: label, X: x, Y: y, Kind: Step}
}

// SPDX-License-Identifier: Apache-2.0

// Package tune searches a controller's parameters for the best score on
// a workload, as the research's authors tune their controllers before a
// comparison (Rajomon's and TopFull's authors tune every scheme per
// workload; Breakwater's give per-service-time settings): a grid over
// the main parameters, then a pattern search around the grid's best.
// The workload is a function of the parameters (an Objective), so the
// same search runs on the simulator, a synthetic function in tests, or
// anything else that scores a point.
//
// A search is deterministic: the same space, objective and options give
// the same table, in the same order, whatever the parallelism.
package tune

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/sluicehq/sluice/lab/report"
)

// Dim is one parameter of the search: its name, the grid's values, and
// how the refinement moves along it.
type Dim struct {
	// Name names the parameter (the objective reads it from the Point).
	Name string
	// Values are the grid's values (at least one, finite).
	Values []float64
	// Log makes the refinement's steps multiplicative (for scales such
	// as delays or rates that span decades); the values must be > 0.
	Log bool
	// Int rounds refined values to integers.
	Int bool
	// Min and Max bound the refinement; when both are 0 the grid's range
	// bounds it.
	Min, Max float64
}

// Point is a set of parameter values by name.
type Point map[string]float64

// key is p's canonical text, for caching and tables.
func (p Point) key(space []Dim) string {
	var b strings.Builder
	for i, d := range space {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%s", d.Name, report.FormatFloat(p[d.Name]))
	}
	return b.String()
}

// Objective scores a point: higher is better. Metrics are reported in
// the table beside the score.
type Objective func(p Point) (score float64, metrics map[string]float64, err error)

// Eval is one evaluated point.
type Eval struct {
	Point   Point
	Score   float64
	Metrics map[string]float64
	// Stage is "grid" or "refine".
	Stage string
}

// Options configure a search.
type Options struct {
	// Refine is the number of pattern-search passes after the grid (0:
	// the grid only). A pass tries one step down and up each parameter
	// from the best point; a pass that improves nothing halves the steps.
	Refine int
	// Parallel is how many points are evaluated at once (default 1).
	Parallel int
}

// Result is a search's outcome.
type Result struct {
	Space []Dim
	// Best is the highest-scoring point (the earliest on ties).
	Best Eval
	// Evals are all the evaluations, in the order they were made.
	Evals []Eval
}

// Validate reports the first invalid dimension.
func Validate(space []Dim) error {
	if len(space) == 0 {
		return errors.New("tune: an empty space")
	}
	seen := make(map[string]bool)
	for _, d := range space {
		if d.Name == "" || seen[d.Name] {
			return fmt.Errorf("tune: dimension name %q empty or repeated", d.Name)
		}
		seen[d.Name] = true
		if len(d.Values) == 0 {
			return fmt.Errorf("tune: dimension %s has no values", d.Name)
		}
		for _, v := range d.Values {
			if math.IsNaN(v) || math.IsInf(v, 0) || (d.Log && v <= 0) {
				return fmt.Errorf("tune: dimension %s: value %v is not finite (and > 0 for a log dimension)", d.Name, v)
			}
		}
		if d.Min > d.Max {
			return fmt.Errorf("tune: dimension %s: min %v > max %v", d.Name, d.Min, d.Max)
		}
	}
	return nil
}

// Grid returns every point of the grid, the first dimension varying
// slowest.
func Grid(space []Dim) []Point {
	pts := []Point{{}}
	for _, d := range space {
		next := make([]Point, 0, len(pts)*len(d.Values))
		for _, p := range pts {
			for _, v := range d.Values {
				q := maps(p)
				q[d.Name] = v
				next = append(next, q)
			}
		}
		pts = next
	}
	return pts
}

func maps(p Point) Point {
	q := make(Point, len(p)+1)
	for k, v := range p {
		q[k] = v
	}
	return q
}

// Search evaluates the grid, then refines around its best.
func Search(space []Dim, obj Objective, opts Options) (*Result, error) {
	if err := Validate(space); err != nil {
		return nil, err
	}
	opts.Parallel = max(opts.Parallel, 1)
	s := &search{space: space, obj: obj, par: opts.Parallel, seen: make(map[string]int), res: &Result{Space: space}}
	if err := s.eval(Grid(space), "grid"); err != nil {
		return nil, err
	}
	steps := make([]float64, len(space))
	for i, d := range space {
		steps[i] = s.initialStep(d, s.res.Best.Point[d.Name])
	}
	for range opts.Refine {
		base := s.res.Best
		var cand []Point
		for i, d := range space {
			for _, dir := range []float64{-1, 1} {
				if q, ok := s.move(base.Point, d, steps[i], dir); ok {
					cand = append(cand, q)
				}
			}
		}
		if err := s.eval(cand, "refine"); err != nil {
			return nil, err
		}
		if s.res.Best.Score <= base.Score {
			for i := range steps {
				steps[i] /= 2
			}
		}
	}
	return s.res, nil
}

type search struct {
	space []Dim
	obj   Objective
	par   int
	seen  map[string]int
	res   *Result
}

// initialStep is half the grid's gap next to v (or a tenth of the range,
// or of v, for a one-value dimension), in log units for a log dimension.
func (s *search) initialStep(d Dim, v float64) float64 {
	vals := slices.Clone(d.Values)
	slices.Sort(vals)
	tr := func(x float64) float64 {
		if d.Log {
			return math.Log(x)
		}
		return x
	}
	gap := math.Inf(1)
	for i := 1; i < len(vals); i++ {
		if g := tr(vals[i]) - tr(vals[i-1]); g > 0 && (vals[i] == v || vals[i-1] == v) {
			gap = math.Min(gap, g)
		}
	}
	if math.IsInf(gap, 1) {
		switch {
		case d.Log:
			gap = math.Log(2)
		case d.Max > d.Min:
			gap = (d.Max - d.Min) / 5
		default:
			gap = math.Max(math.Abs(v)/5, 1)
		}
	}
	return gap / 2
}

// move returns p moved by dir·step along d, clamped to its bounds
// (ok false if it does not move).
func (s *search) move(p Point, d Dim, step, dir float64) (Point, bool) {
	v := p[d.Name]
	var w float64
	if d.Log {
		w = v * math.Exp(dir*step)
	} else {
		w = v + dir*step
	}
	lo, hi := d.Min, d.Max
	if lo == 0 && hi == 0 {
		lo, hi = slices.Min(d.Values), slices.Max(d.Values)
	}
	w = math.Min(math.Max(w, lo), hi)
	if d.Int {
		w = math.Round(w)
	}
	if w == v {
		return nil, false
	}
	q := maps(p)
	q[d.Name] = w
	return q, true
}

// eval evaluates the points not seen yet, in order, Parallel at a time.
func (s *search) eval(pts []Point, stage string) error {
	var todo []Point
	for _, p := range pts {
		k := p.key(s.space)
		if _, ok := s.seen[k]; ok {
			continue
		}
		s.seen[k] = len(s.res.Evals) + len(todo)
		todo = append(todo, p)
	}
	out := make([]Eval, len(todo))
	errs := make([]error, len(todo))
	sem := make(chan struct{}, s.par)
	var wg sync.WaitGroup
	for i, p := range todo {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			score, m, err := s.obj(p)
			if err == nil && math.IsNaN(score) {
				err = errors.New("score is NaN")
			}
			out[i], errs[i] = Eval{Point: p, Score: score, Metrics: m, Stage: stage}, err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return fmt.Errorf("tune: at %s: %w", todo[i].key(s.space), err)
		}
	}
	for _, e := range out {
		if len(s.res.Evals) == 0 || e.Score > s.res.Best.Score {
			s.res.Best = e
		}
		s.res.Evals = append(s.res.Evals, e)
	}
	return nil
}

// Table returns the evaluations as a table, best first (ties in
// evaluation order): the parameters, the score, the metrics (sorted by
// name) and the stage.
func (r *Result) Table() (*report.Table, error) {
	names := map[string]bool{}
	for _, e := range r.Evals {
		for k := range e.Metrics {
			names[k] = true
		}
	}
	metrics := make([]string, 0, len(names))
	for k := range names {
		metrics = append(metrics, k)
	}
	sort.Strings(metrics)
	cols := make([]string, 0, len(r.Space)+len(metrics)+2)
	for _, d := range r.Space {
		cols = append(cols, d.Name)
	}
	cols = append(cols, "score")
	cols = append(cols, metrics...)
	cols = append(cols, "stage")
	t := report.NewTable(cols...)
	order := slices.Clone(r.Evals)
	slices.SortStableFunc(order, func(a, b Eval) int { return cmp.Compare(b.Score, a.Score) })
	for _, e := range order {
		row := make([]any, 0, len(cols))
		for _, d := range r.Space {
			row = append(row, e.Point[d.Name])
		}
		row = append(row, e.Score)
		for _, m := range metrics {
			v, ok := e.Metrics[m]
			if !ok {
				v = math.NaN()
			}
			row = append(row, v)
		}
		row = append(row, e.Stage)
		if err := t.Append(row...); err != nil {
			return nil, err
		}
	}
	return t, nil
}

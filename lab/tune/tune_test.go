// SPDX-License-Identifier: Apache-2.0

package tune

import (
	"errors"
	"math"
	"strings"
	"sync/atomic"
	"testing"
)

// bowl peaks at (3, −1) with value 0.
func bowl(x0, y0 float64) Objective {
	return func(p Point) (float64, map[string]float64, error) {
		dx, dy := p["x"]-x0, p["y"]-y0
		return -(dx*dx + dy*dy), map[string]float64{"dist": math.Hypot(dx, dy)}, nil
	}
}

// The grid finds an optimum on its points exactly, and the table lists
// every point best first.
func TestGridFindsOptimum(t *testing.T) {
	space := []Dim{{Name: "x", Values: []float64{0, 1, 2, 3, 4, 5}}, {Name: "y", Values: []float64{-3, -2, -1, 0}}}
	r, err := Search(space, bowl(3, -1), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Best.Point["x"] != 3 || r.Best.Point["y"] != -1 || r.Best.Score != 0 || len(r.Evals) != 24 {
		t.Fatalf("best %v (%v) of %d", r.Best.Point, r.Best.Score, len(r.Evals))
	}
	tab, err := r.Table()
	if err != nil {
		t.Fatal(err)
	}
	if c := tab.Columns(); strings.Join(c, ",") != "x,y,score,dist,stage" || tab.Len() != 24 {
		t.Fatalf("table %v with %d rows", c, tab.Len())
	}
	if x, _ := tab.Cell(0, "x"); x != "3" {
		t.Fatalf("first row x = %s", x)
	}
}

// The refinement finds an optimum between the grid's points.
func TestRefineBetweenGridPoints(t *testing.T) {
	space := []Dim{{Name: "x", Values: []float64{0, 1, 2, 3, 4}}, {Name: "y", Values: []float64{-1, 0, 1}}}
	r, err := Search(space, bowl(2.4, 0.3), Options{Refine: 30})
	if err != nil {
		t.Fatal(err)
	}
	if d := r.Best.Metrics["dist"]; d > 0.02 {
		t.Fatalf("refined best %v, %.3g from (2.4, 0.3)", r.Best.Point, d)
	}
	grid, _ := Search(space, bowl(2.4, 0.3), Options{})
	if grid.Best.Metrics["dist"] < 0.3 {
		t.Fatal("the grid alone already finds it: the test does not test the refinement")
	}
}

// A log dimension refines multiplicatively and stays within its bounds;
// an int dimension stays integral.
func TestLogAndIntDims(t *testing.T) {
	space := []Dim{
		{Name: "x", Values: []float64{0.001, 0.01, 0.1, 1}, Log: true},
		{Name: "y", Values: []float64{1, 5, 9}, Int: true, Min: 1, Max: 9},
	}
	obj := func(p Point) (float64, map[string]float64, error) {
		if p["y"] != math.Round(p["y"]) || p["x"] < 0.001 || p["x"] > 1 {
			return 0, nil, errors.New("out of the space")
		}
		lx := math.Log10(p["x"]) - math.Log10(0.03)
		return -(lx*lx + (p["y"]-7)*(p["y"]-7)), nil, nil
	}
	r, err := Search(space, obj, Options{Refine: 40})
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(math.Log10(r.Best.Point["x"]/0.03)) > 0.02 || r.Best.Point["y"] != 7 {
		t.Fatalf("best %v", r.Best.Point)
	}
}

// Parallel evaluation gives the same table; a failing point is an error
// naming it; a point is never evaluated twice.
func TestParallelAndErrors(t *testing.T) {
	space := []Dim{{Name: "x", Values: []float64{0, 1, 2, 3}}, {Name: "y", Values: []float64{0, 1}}}
	var n atomic.Int32
	counting := func(p Point) (float64, map[string]float64, error) {
		n.Add(1)
		return bowl(1.6, 0.4)(p)
	}
	a, err := Search(space, counting, Options{Refine: 10})
	if err != nil {
		t.Fatal(err)
	}
	if int(n.Load()) != len(a.Evals) {
		t.Fatalf("%d evaluations for %d distinct points", n.Load(), len(a.Evals))
	}
	b, err := Search(space, bowl(1.6, 0.4), Options{Refine: 10, Parallel: 4})
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Evals) != len(b.Evals) {
		t.Fatalf("%d vs %d evaluations", len(a.Evals), len(b.Evals))
	}
	for i := range a.Evals {
		if a.Evals[i].Point.key(space) != b.Evals[i].Point.key(space) || a.Evals[i].Score != b.Evals[i].Score {
			t.Fatalf("evaluation %d differs: %v vs %v", i, a.Evals[i], b.Evals[i])
		}
	}
	_, err = Search(space, func(p Point) (float64, map[string]float64, error) {
		if p["x"] == 2 && p["y"] == 1 {
			return 0, nil, errors.New("boom")
		}
		return 0, nil, nil
	}, Options{Parallel: 3})
	if err == nil || !strings.Contains(err.Error(), "x=2 y=1") || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("error %v", err)
	}
	if err := Validate([]Dim{{Name: "x", Values: []float64{0}, Log: true}}); err == nil {
		t.Fatal("a log dimension with 0 accepted")
	}
}

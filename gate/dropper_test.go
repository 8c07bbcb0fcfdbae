// SPDX-License-Identifier: Apache-2.0

package gate

import (
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
)

func seededRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x5eed)) }

func decisions(d *Dropper, n int) []bool {
	out := make([]bool, n)
	for i := range out {
		out[i] = d.Admit()
	}
	return out
}

func TestDropperReproducible(t *testing.T) {
	run := func() []bool {
		d := NewDropper(seededRand(7))
		var out []bool
		for _, p := range []float64{0.3, 1, 0.7, 0, 0.5} {
			if err := d.SetProbability(p); err != nil {
				t.Fatal(err)
			}
			out = append(out, decisions(d, 1000)...)
		}
		return out
	}
	a, b := run(), run()
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("decision %d differs between two runs with the same seed", i)
		}
	}
	c := NewDropper(seededRand(8))
	_ = c.SetProbability(0.3)
	if same := equalBools(decisions(c, 1000), a[:1000]); same {
		t.Errorf("a different seed gave the same 1000 decisions")
	}
}

func equalBools(a, b []bool) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestDropperFraction(t *testing.T) {
	const n = 100_000
	tests := []struct {
		name string
		rng  *rand.Rand
		p    float64
		tol  float64 // on the drop fraction; σ ≤ 0.0016 at n = 100k
	}{
		{"p=0 seeded", seededRand(1), 0, 0},
		{"p=1 seeded", seededRand(1), 1, 0},
		{"p=0 nil rng", nil, 0, 0},
		{"p=1 nil rng", nil, 1, 0},
		{"p=0.1 seeded", seededRand(2), 0.1, 0.01},
		{"p=0.5 seeded", seededRand(3), 0.5, 0.01},
		{"p=0.9 seeded", seededRand(4), 0.9, 0.01},
		{"p=0.25 nil rng", nil, 0.25, 0.015},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := NewDropper(tt.rng)
			if err := d.SetProbability(tt.p); err != nil {
				t.Fatal(err)
			}
			if d.Probability() != tt.p {
				t.Fatalf("Probability() = %v, want %v", d.Probability(), tt.p)
			}
			dropped := 0
			for range n {
				if !d.Admit() {
					dropped++
				}
			}
			frac := float64(dropped) / n
			if math.Abs(frac-tt.p) > tt.tol {
				t.Errorf("drop fraction %v, want %v ± %v", frac, tt.p, tt.tol)
			}
		})
	}
}

func TestDropperZeroAndOneTakeNoDraw(t *testing.T) {
	// p = 0 and p = 1 are decided without a draw, so they do not shift the
	// random sequence seen by later fractional probabilities.
	a := NewDropper(seededRand(9))
	b := NewDropper(seededRand(9))
	_ = b.SetProbability(1)
	decisions(b, 100)
	_ = b.SetProbability(0)
	decisions(b, 100)
	_ = a.SetProbability(0.5)
	_ = b.SetProbability(0.5)
	if !equalBools(decisions(a, 500), decisions(b, 500)) {
		t.Fatal("p = 0 or 1 consumed random draws")
	}
}

func TestDropperInvalid(t *testing.T) {
	for _, p := range []float64{-0.1, 1.5, math.NaN(), math.Inf(1), math.Inf(-1)} {
		d := NewDropper(nil)
		_ = d.SetProbability(0.4)
		err := d.SetProbability(p)
		if err == nil {
			t.Errorf("SetProbability(%v): no error", p)
			continue
		}
		checkErr(t, err, "probability", formatFloat(p))
		if d.Probability() != 0.4 {
			t.Errorf("SetProbability(%v) changed p to %v", p, d.Probability())
		}
	}
}

func formatFloat(x float64) string {
	switch {
	case math.IsNaN(x):
		return "NaN"
	case math.IsInf(x, 1):
		return "+Inf"
	case math.IsInf(x, -1):
		return "-Inf"
	}
	return strconvFloat(x)
}

func TestDropperZeroValueAndConcurrency(t *testing.T) {
	var zero Dropper
	if !zero.Admit() || zero.Probability() != 0 {
		t.Fatal("zero Dropper must admit with p = 0")
	}
	for _, rng := range []*rand.Rand{nil, seededRand(5)} {
		d := NewDropper(rng)
		_ = d.SetProbability(0.5)
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Go(func() {
				for i := range 2000 {
					if g == 0 && i%100 == 0 {
						_ = d.SetProbability(float64(i%3) / 2)
					}
					d.Admit()
				}
			})
		}
		wg.Wait()
	}
}

func strconvFloat(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }

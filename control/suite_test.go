// SPDX-License-Identifier: Apache-2.0

package control

import (
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/mathx"
)

// catalogue returns a constructor for every controller variant, built from
// the registry with the required fields filled in.
func catalogue(t testing.TB) map[string]func() sluice.Controller {
	mk := func(name string, edit func(Config)) func() sluice.Controller {
		return func() sluice.Controller {
			cfg, err := NewConfig(name)
			if err != nil {
				t.Fatal(err)
			}
			if edit != nil {
				edit(cfg)
			}
			c, err := cfg.New()
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return c
		}
	}
	return map[string]func() sluice.Controller{
		"auto":   mk("auto", nil),
		"kihl":   mk("kihl", nil),
		"yaksha": mk("yaksha", func(c Config) { c.(*YakshaConfig).Tref = 150 * time.Millisecond }),
		"yaksha-static": mk("yaksha", func(c Config) {
			y := c.(*YakshaConfig)
			y.Tref, y.SelfTuning, y.Lambda0 = 150*time.Millisecond, false, 50
		}),
		"seda": mk("seda", func(c Config) { c.(*SEDAConfig).Target = time.Second }),
		"seda-classes": mk("seda", func(c Config) {
			s := c.(*SEDAConfig)
			s.Target, s.Classes, s.InitialRate = time.Second, 3, 200
		}),
		"seda-degrade": mk("seda", func(c Config) {
			s := c.(*SEDAConfig)
			s.Target, s.Degrade.Enabled = time.Second, true
		}),
		"voigt-cpu":          mk("voigt-cpu", nil),
		"voigt-queue":        mk("voigt-queue", nil),
		"static-rate":        mk("static-rate", func(c Config) { c.(*StaticRateConfig).Rate = 100 }),
		"static-concurrency": mk("static-concurrency", func(c Config) { c.(*StaticConcurrencyConfig).Limit = 10 }),
		"none":               mk("none", nil),
		"gradient2":          mk("gradient2", nil),
		"envoy-gradient":     mk("envoy-gradient", nil),
		"bbr":                mk("bbr", nil),
	}
}

// weird values every measured field may take.
var weird = []float64{math.NaN(), math.Inf(1), math.Inf(-1), 0, -1, -1e300, 1e300, math.SmallestNonzeroFloat64, 0.5, 1, 2}

// randomMeasurements draws a measurement, sometimes with pathological fields.
func randomMeasurements(r *rand.Rand, classes int) sluice.Measurements {
	f := func(scale float64) float64 {
		if r.IntN(5) == 0 {
			return weird[r.IntN(len(weird))]
		}
		return r.Float64() * scale
	}
	m := sluice.Measurements{
		Elapsed: time.Duration(r.IntN(3000)) * time.Millisecond, Class: r.IntN(classes+1) - r.IntN(2),
		Arrivals: f(500), Admitted: f(500), Rejected: f(50), Completed: f(500),
		Samples: f(200), MeanRT: f(2), P90RT: f(4), Utilization: f(1.2), Queue: f(300),
		Failed: f(50), InFlight: f(300), MaxInFlight: f(400), ServiceSamples: f(200),
		ServiceMean: f(2), ServiceP50: f(2), ServiceP90: f(4), ServiceP99: f(8), ServiceMin: f(1),
		QueueWaitMean: f(1), QueueWaitMin: f(0.5), Expired: f(20),
	}
	return m
}

// checkBounded fails unless every number a runner applies is finite and
// within the meaning of its kind.
func checkBounded(t *testing.T, name string, d sluice.Decision) {
	t.Helper()
	for _, x := range append([]float64{d.Old, d.New, d.Quality}, d.ClassRates...) {
		if !mathx.Finite(x) || x < 0 {
			t.Fatalf("%s: non-finite or negative output in %+v", name, d)
		}
	}
	switch d.Kind {
	case sluice.KindDropProbability:
		if d.New > 1 {
			t.Fatalf("%s: drop probability %v > 1", name, d.New)
		}
	case sluice.KindRate:
		if d.New > 1e6 {
			t.Fatalf("%s: rate %v above every configured max", name, d.New)
		}
	case sluice.KindConcurrency:
		if d.New < 1 {
			t.Fatalf("%s: concurrency limit %v < 1 would admit nothing", name, d.New)
		}
	}
	if d.Quality > 1 {
		t.Fatalf("%s: quality %v > 1", name, d.Quality)
	}
	if d.Reason == "" {
		t.Fatalf("%s: empty reason", name)
	}
}

// Every controller, fed random and pathological measurements (NaN, ±Inf,
// zero, negative, huge), returns finite bounded settings with a reason.
func TestSuiteBoundedOutputs(t *testing.T) {
	for name, mk := range catalogue(t) {
		t.Run(name, func(t *testing.T) {
			c := mk()
			checkBounded(t, name, c.Current())
			r := rand.New(rand.NewPCG(1, 2))
			for i := 1; i <= 2000; i++ {
				d := c.Update(at(i), randomMeasurements(r, 3))
				checkBounded(t, name, d)
			}
			// Each weird value alone in every field.
			for _, w := range weird {
				m := sluice.Measurements{Elapsed: time.Second, Arrivals: w, Admitted: w, Rejected: w, Completed: w,
					Samples: w, MeanRT: w, P90RT: w, Utilization: w, Queue: w,
					Failed: w, InFlight: w, MaxInFlight: w, ServiceSamples: w, ServiceMean: w, ServiceP50: w,
					ServiceP90: w, ServiceP99: w, ServiceMin: w, QueueWaitMean: w, QueueWaitMin: w, Expired: w}
				checkBounded(t, name, c.Update(at(5000), m))
			}
		})
	}
}

// load maps a load level x ≥ 0 to the signals every controller watches,
// keeping demand-side counts (arrivals, completions, samples) equal so that
// only the congestion signals differ.
func load(x float64, class int) sluice.Measurements {
	return sluice.Measurements{
		Elapsed: time.Second, Class: class, Arrivals: 200, Admitted: 150, Rejected: 50, Completed: 150,
		Samples: 150, MeanRT: 0.05 * x * x, P90RT: 0.1 * x * x, Utilization: math.Min(1, 0.35*x), Queue: 60 * x,
	}
}

// tighter reports whether decision a is a gate at least as tight as b
// (within a small tolerance): lower rate or concurrency, higher drop
// probability, lower quality, gate on rather than off.
func tighter(a, b sluice.Decision) bool {
	const eps = 1e-9
	if a.GateOff && !b.GateOff {
		return false
	}
	if a.Quality > b.Quality+eps {
		return false
	}
	if !a.GateOff && !b.GateOff {
		switch a.Kind {
		case sluice.KindDropProbability:
			if a.New < b.New-eps {
				return false
			}
		default:
			if a.New > b.New+eps {
				return false
			}
		}
		for i := range a.ClassRates {
			if a.ClassRates[i] > b.ClassRates[i]+eps {
				return false
			}
		}
	}
	return true
}

// From the same state, one step with a heavier load never yields a looser
// gate than one step with a lighter load. The state is reached by replaying
// the same random history on two fresh instances (controllers are
// deterministic). The Voigt queue rule's "unchanged queue" guard is the one
// designed exception (see TestVoigtQueueUnchangedGuard); random histories
// make q(t) = q(t−1) a measure-zero event here.
func TestSuiteMonotoneInLoad(t *testing.T) {
	for name, mk := range catalogue(t) {
		t.Run(name, func(t *testing.T) {
			for trial := 0; trial < 300; trial++ {
				r := rand.New(rand.NewPCG(uint64(trial), 7))
				n := r.IntN(40)
				hist := make([]sluice.Measurements, n)
				for i := range hist {
					hist[i] = load(r.Float64()*3, r.IntN(3))
				}
				light, heavy := mk(), mk()
				for i, m := range hist {
					light.Update(at(i+1), m)
					heavy.Update(at(i+1), m)
				}
				x1, x2 := r.Float64()*3, r.Float64()*3
				if x1 > x2 {
					x1, x2 = x2, x1
				}
				class := r.IntN(3)
				dl := light.Update(at(n+1), load(x1, class))
				dh := heavy.Update(at(n+1), load(x2, class))
				if !tighter(dh, dl) {
					t.Fatalf("trial %d: load %.3f gave a looser gate than load %.3f:\nheavy %+v\nlight %+v", trial, x2, x1, dh, dl)
				}
			}
		})
	}
}

// The same input sequence always gives the same decision sequence.
func TestSuiteDeterministic(t *testing.T) {
	for name, mk := range catalogue(t) {
		t.Run(name, func(t *testing.T) {
			run := func() []sluice.Decision {
				c := mk()
				r := rand.New(rand.NewPCG(42, 42))
				var out []sluice.Decision
				for i := 1; i <= 500; i++ {
					out = append(out, c.Update(at(i), randomMeasurements(r, 3)))
				}
				return out
			}
			a, b := run(), run()
			for i := range a {
				// NaN inputs are not equal to themselves; compare settings and reasons.
				a[i].Inputs, b[i].Inputs = sluice.Measurements{}, sluice.Measurements{}
			}
			if !reflect.DeepEqual(a, b) {
				t.Fatal("two runs of the same input sequence differ")
			}
		})
	}
}

// Every registered name is in the catalogue, so the suite covers it.
func TestSuiteCoversRegistry(t *testing.T) {
	cat := catalogue(t)
	for _, n := range Names() {
		if _, ok := cat[n]; !ok {
			t.Errorf("controller %q is registered but not in the shared suite", n)
		}
	}
	if _, err := NewConfig("pid"); err == nil {
		t.Fatal("unknown name accepted")
	}
}

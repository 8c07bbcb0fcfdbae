// SPDX-License-Identifier: Apache-2.0

package dist

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func mustDur(t testing.TB, s string) Dist {
	t.Helper()
	d, err := ParseDuration(s)
	if err != nil {
		t.Fatalf("ParseDuration(%q): %v", s, err)
	}
	return d
}

// TestSampleMeans checks that the sample mean over many seeded draws is
// within five standard errors of Mean(), and that the relative error is
// small, for every kind.
func TestSampleMeans(t *testing.T) {
	cases := []struct {
		spec   string
		relTol float64 // additional bound on the relative error
	}{
		{"exp:20ms", 0.01},
		{"det:10ms", 1e-9},
		{"lognormal:20ms,1.5", 0.05},
		{"lognormal:1s,0.5", 0.01},
		{"pareto:1ms,2s,1.2", 0.03},
		{"pareto:1,100,1", 0.02},
		{"pareto:1,100,2.5", 0.01},
		{"pareto:1,1000,0.5", 0.01},
		{"uniform:1s,3s", 0.01},
		{"exp:0.7s,max=7s", 0.01},
		{"exp:1s,max=0.5s", 0.01},
		{"lognormal:20ms,1.5,max=100ms", 0.01},
		{"pareto:1ms,2s,1.2,max=10ms", 0.01},
		{"uniform:0,10,max=4", 0.01},
	}
	const n = 400_000
	for _, tc := range cases {
		t.Run(tc.spec, func(t *testing.T) {
			d := mustDur(t, tc.spec)
			r := rand.New(rand.NewPCG(1, 2))
			var sum, sum2 float64
			for range n {
				x := d.Sample(r)
				if x < 0 || !finite(x) {
					t.Fatalf("sample %v is not a finite non-negative number", x)
				}
				sum += x
				sum2 += x * x
			}
			mean := sum / n
			se := math.Sqrt(math.Max(sum2/n-mean*mean, 0) / n)
			want := d.Mean()
			if diff := math.Abs(mean - want); diff > 5*se+1e-12 || diff > tc.relTol*want {
				t.Errorf("sample mean %.6g, Mean() %.6g (diff %.3g, 5·SE %.3g, rel tol %.3g)", mean, want, diff, 5*se, tc.relTol*want)
			}
		})
	}
}

// TestMeansByHand pins exact means computed by hand.
func TestMeansByHand(t *testing.T) {
	cases := []struct {
		spec string
		want float64
	}{
		{"exp:20ms", 0.020},
		{"det:10ms", 0.010},
		{"lognormal:20ms,1.5", 0.020},
		{"uniform:1s,3s", 2},
		// α = 1: min·ln(max/min)/(1 − min/max).
		{"pareto:1,100,1", math.Log(100) / (1 - 0.01)},
		// α = 2 on [1, 2]: 2/(1 − 1/4)·(1 − 1/2) = 4/3.
		{"pareto:1,2,2", 4.0 / 3},
		// α = 0.5 on [1, 4]: 0.5/(1 − 1/2)·(4^0.5 − 1)/0.5 = 2.
		{"pareto:1,4,0.5", 2},
		// E[min(X, c)] for an exponential: mean·(1 − e^(−c/mean)).
		{"exp:0.7s,max=7s", 0.7 * (1 - math.Exp(-10))},
		{"exp:2,max=2", 2 * (1 - math.Exp(-1))},
		// Uniform on [0, 10] capped at 4: 0.4·2 + 0.6·4 = 3.2.
		{"uniform:0,10,max=4", 3.2},
		{"det:5,max=3", 3},
	}
	for _, tc := range cases {
		d := mustDur(t, tc.spec)
		if got := d.Mean(); math.Abs(got-tc.want) > 1e-12*math.Max(1, tc.want) {
			t.Errorf("%s: Mean() = %.15g, want %.15g", tc.spec, got, tc.want)
		}
	}
}

// TestParetoAlphaNearOne checks the mean is continuous through α = 1.
func TestParetoAlphaNearOne(t *testing.T) {
	at1, _ := NewBoundedPareto(0.001, 2, 1)
	for _, a := range []float64{1 - 1e-9, 1 + 1e-9, 1 - 1e-14, 1 + 1e-14} {
		d, err := NewBoundedPareto(0.001, 2, a)
		if err != nil {
			t.Fatal(err)
		}
		if rel := math.Abs(d.Mean()-at1.Mean()) / at1.Mean(); rel > 1e-7 {
			t.Errorf("alpha %v: mean %.15g vs %.15g at alpha 1", a, d.Mean(), at1.Mean())
		}
	}
}

// TestLimitedMeanVsIntegral compares LimitedMean with ∫₀^m P(X > x) dx
// estimated from the empirical distribution of many draws.
func TestLimitedMeanVsSamples(t *testing.T) {
	ds := []string{"exp:1", "lognormal:1,1", "pareto:0.1,10,1.3", "uniform:0.5,2", "det:1", "exp:1,max=1.5"}
	caps := []float64{0.05, 0.3, 1, 1.7, 5, 20}
	const n = 200_000
	for _, spec := range ds {
		d := mustDur(t, spec)
		lm := d.(LimitedMeaner)
		for _, m := range caps {
			r := rand.New(rand.NewPCG(7, 7))
			sum := 0.0
			for range n {
				sum += math.Min(d.Sample(r), m)
			}
			got, want := sum/n, lm.LimitedMean(m)
			if math.Abs(got-want) > 0.01*want+1e-9 {
				t.Errorf("%s: E[min(X,%v)] sampled %.5g, LimitedMean %.5g", spec, m, got, want)
			}
		}
	}
}

// opaque is a Dist that is not a LimitedMeaner.
type opaque struct{}

func (opaque) Sample(r *rand.Rand) float64 { return 2 * r.Float64() }
func (opaque) Mean() float64               { return 1 }
func (opaque) String() string              { return "opaque" }

func TestCappedMonteCarlo(t *testing.T) {
	c, err := NewCapped(opaque{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	// Uniform on [0, 2] capped at 1: 0.5·0.5 + 0.5·1 = 0.75.
	if got := c.Mean(); math.Abs(got-0.75) > 0.005 {
		t.Errorf("Monte Carlo capped mean %v, want about 0.75", got)
	}
	if c.Mean() != c.Mean() {
		t.Error("Monte Carlo mean is not deterministic")
	}
	if got := c.String(); got != "opaque,max=1" {
		t.Errorf("String() = %q", got)
	}
}

func TestConstructorErrors(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"exp zero", second(NewExponential(0)), "MEAN = 0"},
		{"exp nan", second(NewExponential(math.NaN())), "MEAN = NaN"},
		{"det negative", second(NewDeterministic(-1)), "V = -1"},
		{"lognormal mean", second(NewLogNormal(-1, 1)), "MEAN = -1"},
		{"lognormal sigma", second(NewLogNormal(1, -0.5)), "SIGMA = -0.5"},
		{"lognormal sigma big", second(NewLogNormal(1, 11)), "SIGMA = 11"},
		{"pareto min", second(NewBoundedPareto(0, 1, 1)), "MIN = 0"},
		{"pareto max<min", second(NewBoundedPareto(2, 1, 1)), "MAX = 1"},
		{"pareto alpha", second(NewBoundedPareto(1, 2, 0)), "ALPHA = 0"},
		{"uniform b<a", second(NewUniform(2, 1)), "B = 1"},
		{"uniform inf", second(NewUniform(0, math.Inf(1))), "B = +Inf"},
		{"capped nil", second(NewCapped(nil, 1)), "nil"},
		{"capped max", second(NewCapped(Deterministic{}, 0)), "max = 0"},
		{"poisson", second(NewPoissonCount(-3)), "MEAN = -3"},
	}
	for _, tc := range cases {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: error %v, want it to mention %q", tc.name, tc.err, tc.want)
		}
	}
}

func second[T any](_ T, err error) error { return err }

func TestZeroValues(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	for _, d := range []Dist{Exponential{}, Deterministic{}, LogNormal{}, BoundedPareto{}, Uniform{}, PoissonCount{}} {
		if x, m := d.Sample(r), d.Mean(); x != 0 || m != 0 {
			t.Errorf("%T zero value: sample %v, mean %v; want 0, 0", d, x, m)
		}
	}
}

func TestPoissonCount(t *testing.T) {
	for _, lam := range []float64{0.5, 5, 29.9, 30, 44.4, 100, 1000} {
		d, err := NewPoissonCount(lam)
		if err != nil {
			t.Fatal(err)
		}
		r := rand.New(rand.NewPCG(3, uint64(lam*10)))
		const n = 200_000
		var sum, sum2 float64
		for range n {
			k := d.Sample(r)
			if k < 0 || k != math.Floor(k) {
				t.Fatalf("lambda %v: sample %v is not a count", lam, k)
			}
			sum += k
			sum2 += k * k
		}
		mean := sum / n
		variance := sum2/n - mean*mean
		se := math.Sqrt(lam / n)
		if math.Abs(mean-lam) > 5*se {
			t.Errorf("lambda %v: sample mean %v (5·SE %v)", lam, mean, 5*se)
		}
		if math.Abs(variance-lam)/lam > 0.03 {
			t.Errorf("lambda %v: sample variance %v, want about %v", lam, variance, lam)
		}
	}
}

func TestSameSeedSameSamples(t *testing.T) {
	d := mustDur(t, "lognormal:20ms,1.5,max=1s")
	a, b, c := rand.New(rand.NewPCG(9, 9)), rand.New(rand.NewPCG(9, 9)), rand.New(rand.NewPCG(9, 10))
	same, differ := true, false
	for range 100 {
		x, y, z := d.Sample(a), d.Sample(b), d.Sample(c)
		same = same && x == y
		differ = differ || x != z
	}
	if !same || !differ {
		t.Errorf("same seed identical: %v, different seed differs: %v", same, differ)
	}
}

// SPDX-License-Identifier: Apache-2.0

package design

import (
	"encoding/json"
	"math"
	"math/cmplx"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// The paper's plant: 1/μ = 22.5 ms, h = 1 s, so σ = μ·h ≈ 44.4 per period.
const paperSigma = 44.4

func near(got, want, tol float64) bool { return math.Abs(got-want) <= tol }

func TestKihlPlacePaper(t *testing.T) {
	// K = (2 + a1)·σ = 0.45·44.4 = 19.98; Ti = h·(2 + a1)/(1 + a1 + a2)
	// = 0.45/0.16 = 2.8125 s.
	K, Ti, err := KihlPlace(paperSigma, time.Second, -1.55, 0.71)
	if err != nil {
		t.Fatal(err)
	}
	if !near(K, 19.98, 1e-9) || !near(Ti, 2.8125, 1e-9) {
		t.Fatalf("K, Ti = %v, %v; want 19.98, 2.8125", K, Ti)
	}
	// The placed parameters reproduce the requested polynomial.
	a, err := KihlAnalyze(paperSigma, time.Second, K, Ti)
	if err != nil {
		t.Fatal(err)
	}
	if !near(a.A1, -1.55, 1e-12) || !near(a.A2, 0.71, 1e-12) {
		t.Fatalf("a1, a2 = %v, %v; want -1.55, 0.71", a.A1, a.A2)
	}
	if !a.StableLinear || !a.StableTsypkin {
		t.Fatalf("paper design not stable: %+v", a)
	}
}

func TestKihlPlaceScalesWithH(t *testing.T) {
	// Ti is proportional to h; K does not depend on h.
	K1, Ti1, err1 := KihlPlace(10, time.Second, -1, 0.5)
	K2, Ti2, err2 := KihlPlace(10, 3*time.Second, -1, 0.5)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	// K = 1·10 = 10; Ti = h·1/0.5 = 2h.
	if K1 != 10 || K2 != 10 || !near(Ti1, 2, 1e-12) || !near(Ti2, 6, 1e-12) {
		t.Fatalf("got K %v %v, Ti %v %v", K1, K2, Ti1, Ti2)
	}
}

func TestKihlPlaceErrors(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	place := func(sigma float64, h time.Duration, a1, a2 float64) error {
		_, _, err := KihlPlace(sigma, h, a1, a2)
		return err
	}
	checkErrors(t, []errCase{
		{"zero sigma", place(0, time.Second, -1.55, 0.71), "sigma"},
		{"negative sigma", place(-1, time.Second, -1.55, 0.71), "sigma"},
		{"NaN sigma", place(nan, time.Second, -1.55, 0.71), "sigma"},
		{"infinite sigma", place(inf, time.Second, -1.55, 0.71), "sigma"},
		{"zero h", place(paperSigma, 0, -1.55, 0.71), "h (control period)"},
		{"negative h", place(paperSigma, -time.Second, -1.55, 0.71), "h (control period)"},
		{"NaN a1", place(paperSigma, time.Second, nan, 0.71), "a1"},
		{"infinite a2", place(paperSigma, time.Second, -1.55, -inf), "a2"},
		{"pole at z = 1", place(paperSigma, time.Second, -1.5, 0.5), "1 + a1 + a2 = 0"},
		{"K = 0", place(paperSigma, time.Second, -2, 0.5), "K = (2 + a1)·σ = 0"},
		{"overflow", place(1e300, time.Second, 1e10, 0.5), "overflows"},
	})
}

// errCase is a call of a design function that must fail: its error must
// contain want.
type errCase struct {
	name string
	err  error
	want string
}

func checkErrors(t *testing.T, cases []errCase) {
	t.Helper()
	for _, c := range cases {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%s: err = %v, want one containing %q", c.name, c.err, c.want)
		}
	}
}

func TestKihlAnalyzeErrors(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	analyze := func(sigma float64, h time.Duration, K, Ti float64) error {
		_, err := KihlAnalyze(sigma, h, K, Ti)
		return err
	}
	checkErrors(t, []errCase{
		{"zero sigma", analyze(0, time.Second, 20, 2.8), "sigma"},
		{"zero h", analyze(paperSigma, 0, 20, 2.8), "h (control period)"},
		{"NaN K", analyze(paperSigma, time.Second, nan, 2.8), "K must"},
		{"infinite K", analyze(paperSigma, time.Second, inf, 2.8), "K must"},
		{"zero Ti", analyze(paperSigma, time.Second, 20, 0), "Ti must"},
		{"NaN Ti", analyze(paperSigma, time.Second, 20, nan), "Ti must"},
		{"infinite Ti", analyze(paperSigma, time.Second, 20, inf), "Ti must"},
		{"K/σ overflows", analyze(1e-300, time.Second, 1e300, 2.8), "not finite"},
	})
}

func TestKihlAnalyzePaper(t *testing.T) {
	// K/σ = 20/44.4 = 0.4504505.
	// Good {20, 2.8}: a1 = −1.5495495, a2 = 1 − 0.4504505 + 0.4504505/2.8
	// = 0.7104247; the closed-loop roots are a complex pair with
	// |z| = √a2 = 0.8428670. G's denominator z² − 0.5495495·z − 0.2895753
	// has real roots 0.8789904 and −0.3294408.
	// Bad {20, 0.1}: a2 = 0.5495495 + 4.5045045 = 5.0540541, |z| = √a2
	// = 2.2481223; G's denominator z² − 0.5495495·z + 4.0540541 has
	// |z| = √4.0540541 = 2.0134682.
	good, err := KihlAnalyze(paperSigma, time.Second, 20, 2.8)
	if err != nil {
		t.Fatal(err)
	}
	if !near(good.A1, -1.5495495, 1e-7) || !near(good.A2, 0.7104247, 1e-7) {
		t.Errorf("good: a1, a2 = %v, %v", good.A1, good.A2)
	}
	if len(good.Poles) != 3 || good.Poles[0] != (Pole{}) {
		t.Fatalf("good: poles = %v, want 0 first", good.Poles)
	}
	for _, p := range good.Poles[1:] {
		if !near(p.Abs, 0.8428670, 1e-7) || !near(p.Re, 1.5495495/2, 1e-7) {
			t.Errorf("good: pole %+v, want |z| = 0.8428670, Re = 0.7747748", p)
		}
	}
	if good.Poles[1].Im <= 0 || good.Poles[2].Im != -good.Poles[1].Im {
		t.Errorf("good: poles %v, want a conjugate pair, positive imaginary part first", good.Poles)
	}
	if !near(good.GPoles[0].Re, 0.8789904, 1e-7) || !near(good.GPoles[1].Re, -0.3294408, 1e-7) {
		t.Errorf("good: G poles %v", good.GPoles)
	}
	if !good.StableLinear || !good.StableTsypkin || good.Eta == nil {
		t.Fatalf("good: stable_linear %v, stable_tsypkin %v, eta %v", good.StableLinear, good.StableTsypkin, good.Eta)
	}
	if !strings.HasPrefix(good.Verdict, "stable: linear model and Tsypkin criterion both satisfied (η = ") {
		t.Errorf("good: verdict %q", good.Verdict)
	}

	bad, err := KihlAnalyze(paperSigma, time.Second, 20, 0.1)
	if err != nil {
		t.Fatal(err)
	}
	if !near(bad.A2, 5.0540541, 1e-7) || !near(bad.Poles[1].Abs, 2.2481223, 1e-7) {
		t.Errorf("bad: a2 = %v, poles %v", bad.A2, bad.Poles)
	}
	if !near(bad.GPoles[0].Abs, 2.0134682, 1e-7) {
		t.Errorf("bad: G poles %v, want |z| = 2.0134682", bad.GPoles)
	}
	if bad.StableLinear || bad.StableTsypkin || bad.Eta != nil || !math.IsNaN(bad.TsypkinMargin) {
		t.Errorf("bad: %+v, want unstable on both counts and no η", bad)
	}
	if want := "unstable: closed-loop pole at |z| = 2.25 outside the unit circle"; bad.Verdict != want {
		t.Errorf("bad: verdict %q, want %q", bad.Verdict, want)
	}
}

// TestKihlJuryTriangleErratum pins the corrected stability triangle. The
// paper prints {a2 < 1, a2 > 1 + a1, a2 > 1 − a1}, which is empty (it needs
// a2 > 1 + |a1| ≥ 1); in particular it excludes the paper's own design
// a1 = −1.55, a2 = 0.71 (0.71 < 1 − a1 = 2.55). The Jury triangle
// {a2 < 1, a2 > −1 + a1, a2 > −1 − a1} is meant, and it must agree with the
// closed-loop pole moduli.
func TestKihlJuryTriangleErratum(t *testing.T) {
	cases := []struct {
		a1, a2 float64
		stable bool
	}{
		{-1.55, 0.71, true}, // the paper's design; violates the printed a2 > 1 − a1
		{0, 0.5, true},      // violates both printed lower bounds
		{1.5, 0.6, true},    // near the right edge a2 = −1 + a1
		{-1.5, 0.6, true},   // near the left edge a2 = −1 − a1
		{0, 0.99, true},
		{0, 1.01, false},  // above a2 = 1
		{1.5, 0.4, false}, // below a2 = −1 + a1
		{-1.5, 0.4, false},
		{-0.5, -0.6, false}, // below a2 = −1 − a1
		{3, 2.5, false},     // above a2 = 1 but above both lower bounds
	}
	for _, c := range cases {
		K, Ti, err := KihlPlace(paperSigma, time.Second, c.a1, c.a2)
		if err != nil {
			t.Fatal(err)
		}
		a, err := KihlAnalyze(paperSigma, time.Second, K, Ti)
		if err != nil {
			t.Fatal(err)
		}
		if a.StableLinear != c.stable {
			t.Errorf("a1 = %v, a2 = %v: stable_linear = %v, want %v", c.a1, c.a2, a.StableLinear, c.stable)
		}
		inside := math.Max(a.Poles[1].Abs, a.Poles[2].Abs) < 1
		if inside != c.stable {
			t.Errorf("a1 = %v, a2 = %v: max |z| = %v disagrees with the triangle", c.a1, c.a2, math.Max(a.Poles[1].Abs, a.Poles[2].Abs))
		}
		if !c.stable && !strings.HasPrefix(a.Verdict, "unstable: closed-loop pole at |z| = ") {
			t.Errorf("a1 = %v, a2 = %v: verdict %q", c.a1, c.a2, a.Verdict)
		}
	}
}

// TestKihlPolesProperty checks on random designs that the reported poles
// are roots of the characteristic polynomial and that the triangle test
// agrees with the pole moduli away from the boundary.
func TestKihlPolesProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		sigma := 1 + 99*rng.Float64()
		K := sigma * (5*rng.Float64() - 0.5)
		Ti := 0.05 + 5*rng.Float64()
		a, err := KihlAnalyze(sigma, time.Second, K, Ti)
		if err != nil {
			t.Fatal(err)
		}
		if !near(a.A1, K/sigma-2, 1e-12) || !near(a.A2, 1-K/sigma+K/(sigma*Ti), 1e-9) {
			t.Fatalf("K %v Ti %v σ %v: a1 %v a2 %v", K, Ti, sigma, a.A1, a.A2)
		}
		maxAbs := 0.0
		for _, p := range a.Poles {
			z := complex(p.Re, p.Im)
			if v := z * (z*z + complex(a.A1, 0)*z + complex(a.A2, 0)); cmplx.Abs(v) > 1e-9*(1+p.Abs*p.Abs*p.Abs) {
				t.Fatalf("pole %v is not a root: residual %v", p, v)
			}
			if !near(p.Abs, cmplx.Abs(z), 1e-12) {
				t.Fatalf("pole %v: abs inconsistent", p)
			}
			maxAbs = math.Max(maxAbs, p.Abs)
		}
		if math.Abs(maxAbs-1) > 1e-6 && a.StableLinear != (maxAbs < 1) {
			t.Fatalf("K %v Ti %v σ %v: stable_linear %v but max |z| = %v", K, Ti, sigma, a.StableLinear, maxAbs)
		}
		for _, p := range a.GPoles {
			z := complex(p.Re, p.Im)
			if v := z*z + complex(K/sigma-1, 0)*z + complex(K*(1-Ti)/(sigma*Ti), 0); cmplx.Abs(v) > 1e-9*(1+p.Abs*p.Abs) {
				t.Fatalf("G pole %v is not a root: residual %v", p, v)
			}
		}
		if a.StableTsypkin && !a.StableLinear {
			t.Fatalf("K %v Ti %v σ %v: Tsypkin-stable but not linear-stable", K, Ti, sigma)
		}
	}
}

// tsypkinValue is an independent evaluation of the Tsypkin inequality's
// left-hand side, straight from the paper's G with the factor z kept.
func tsypkinValue(k, r, eta, w float64) float64 {
	z := cmplx.Exp(complex(0, w))
	g := -z * (z - 1) / (z * (z*z + complex(k-1, 0)*z + complex(k*(r-1), 0)))
	return real((1+complex(eta, 0)*(1-1/z))*g) + 1
}

func TestKihlTsypkinBruteForce(t *testing.T) {
	const nw = 20000
	t.Run("satisfied at the reported η", func(t *testing.T) {
		for _, p := range [][2]float64{{20, 2.8}, {19.98, 2.8125}, {10, 1.5}, {40, 1.25}} {
			a, err := KihlAnalyze(paperSigma, time.Second, p[0], p[1])
			if err != nil {
				t.Fatal(err)
			}
			if !a.StableTsypkin || a.Eta == nil {
				t.Fatalf("K %v Ti %v: not Tsypkin-stable: %s", p[0], p[1], a.Verdict)
			}
			k, r := p[0]/paperSigma, 1/p[1]
			minV := math.Inf(1)
			for j := 0; j <= nw; j++ {
				minV = math.Min(minV, tsypkinValue(k, r, *a.Eta, math.Pi*float64(j)/nw))
			}
			if minV < 0 || !near(minV, a.TsypkinMargin, 1e-6) {
				t.Errorf("K %v Ti %v: brute-force min %v, reported margin %v", p[0], p[1], minV, a.TsypkinMargin)
			}
		}
	})
	t.Run("no η works", func(t *testing.T) {
		// K/σ = 1, h/Ti = 0.9: linear poles at |z| = √0.9, G's poles at
		// 0 ± i·√0.1 (stable), but Re G dips below −1.
		a, err := KihlAnalyze(paperSigma, time.Second, paperSigma, 1/0.9)
		if err != nil {
			t.Fatal(err)
		}
		if !a.StableLinear || a.StableTsypkin || a.Eta != nil {
			t.Fatalf("got %+v, want linear-stable, Tsypkin not satisfied", a)
		}
		if !strings.HasPrefix(a.Verdict, "not guaranteed: the linear model is stable, but no η in [0, 100] satisfies the Tsypkin criterion") {
			t.Errorf("verdict %q", a.Verdict)
		}
		for i := 0; i <= 2000; i++ {
			eta := float64(i) * 0.05
			ok := true
			for j := 0; j <= nw && ok; j++ {
				ok = tsypkinValue(1, 0.9, eta, math.Pi*float64(j)/nw) >= 0
			}
			if ok {
				t.Fatalf("η = %v satisfies the criterion, but the search found none", eta)
			}
		}
	})
	t.Run("G unstable", func(t *testing.T) {
		// a1 = 0.5, a2 = 0: K/σ = 2.5, h/Ti = 0.6, linear-stable, but G's
		// denominator z² + 1.5z − 1 = (z − 0.5)(z + 2) has a pole at −2.
		K, Ti, err := KihlPlace(paperSigma, time.Second, 0.5, 0)
		if err != nil {
			t.Fatal(err)
		}
		a, err := KihlAnalyze(paperSigma, time.Second, K, Ti)
		if err != nil {
			t.Fatal(err)
		}
		want := "not guaranteed: the linear model is stable, but the Tsypkin criterion fails: G has a pole at |z| = 2 outside the unit circle"
		if !a.StableLinear || a.StableTsypkin || a.Verdict != want {
			t.Fatalf("got stable_linear %v, stable_tsypkin %v, verdict %q", a.StableLinear, a.StableTsypkin, a.Verdict)
		}
	})
}

func TestKihlAnalysisJSONKeys(t *testing.T) {
	for _, Ti := range []float64{2.8, 0.1} {
		a, err := KihlAnalyze(paperSigma, time.Second, 20, Ti)
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		want := []string{"K", "Ti", "a1", "a2", "eta", "h_s", "poles", "sigma", "stable_linear", "stable_tsypkin", "verdict"}
		if !slices.Equal(keys, want) {
			t.Fatalf("keys %v, want %v", keys, want)
		}
		if (string(m["eta"]) == "null") != (Ti == 0.1) {
			t.Errorf("Ti = %v: eta = %s", Ti, m["eta"])
		}
		var poles []map[string]float64
		if err := json.Unmarshal(m["poles"], &poles); err != nil || len(poles) != 3 {
			t.Fatalf("poles %s: %v", m["poles"], err)
		}
		for _, p := range poles {
			if _, ok := p["abs"]; !ok || len(p) != 3 {
				t.Errorf("pole %v, want keys re, im, abs", p)
			}
		}
	}
}

func TestKihlRegion(t *testing.T) {
	g := DefaultKihlGrid()
	pts, err := KihlRegion(paperSigma, time.Second, g)
	if err != nil {
		t.Fatal(err)
	}
	if len(pts) != g.NK*g.NTi {
		t.Fatalf("%d points, want %d", len(pts), g.NK*g.NTi)
	}
	if p := pts[0]; !near(p.KSigma, 0.05, 1e-12) || !near(p.HTi, 0.025, 1e-12) || !near(p.K, 0.05*paperSigma, 1e-9) || !near(p.Ti, 40, 1e-9) {
		t.Errorf("first point %+v", p)
	}
	if p := pts[len(pts)-1]; p.KSigma != 3.95 || p.HTi != 0.975 {
		t.Errorf("last point %+v", p)
	}
	var lin, tsy int
	for _, p := range pts {
		// The linear region in (k, r) = (K/σ, h/Ti), from the triangle with
		// a1 = k − 2, a2 = 1 − k + k·r: 0 < k, r < 1, k·r > 2k − 4.
		k, r := p.KSigma, p.HTi
		if want := k > 0 && r < 1 && k*r > 2*k-4; want != p.StableLinear {
			t.Errorf("K/σ %v h/Ti %v: stable_linear %v, want %v", k, r, p.StableLinear, want)
		}
		// Every Tsypkin-stable point is linear-stable. This holds
		// mathematically: the linear model is the loop closed with the
		// sector's upper gain 1. A closed-loop pole on the unit circle for
		// some gain κ in (0, 1] means G(e^{iω}) = −1/κ ≤ −1 (ω ≠ 0, as
		// G(1) = 0), where the Tsypkin expression equals
		// 1 − (1 + η(1 − cos ω))/κ ≤ 0, with equality only in the
		// boundary case κ = 1, η·(1 − cos ω) = 0. So with a positive
		// margin no pole crosses the circle as κ grows from 0 (G's poles,
		// inside) to 1 (the linear model). The numerical check agrees on
		// every grid point, so the test asserts it without exceptions.
		if p.StableTsypkin && !p.StableLinear {
			t.Errorf("K/σ %v h/Ti %v: Tsypkin-stable but not linear-stable", k, r)
		}
		if p.StableLinear {
			lin++
		}
		if p.StableTsypkin {
			tsy++
		}
		// Spot-check agreement with KihlAnalyze.
		if p.HTi == 0.475 {
			a, err := KihlAnalyze(paperSigma, time.Second, p.K, p.Ti)
			if err != nil || a.StableLinear != p.StableLinear || a.StableTsypkin != p.StableTsypkin {
				t.Errorf("point %+v disagrees with KihlAnalyze: %+v, %v", p, a, err)
			}
		}
	}
	// The paper's Figure 6: the nonlinear analysis guarantees a strict,
	// non-empty part of the linear region.
	if tsy == 0 || tsy >= lin {
		t.Errorf("%d linear-stable and %d Tsypkin-stable points; want 0 < Tsypkin < linear", lin, tsy)
	}
}

func TestKihlGridValidate(t *testing.T) {
	base := DefaultKihlGrid()
	if err := base.Validate(); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		mod  func(*KihlGrid)
		want string
	}{
		{"empty K range", func(g *KihlGrid) { g.KSigmaMax = g.KSigmaMin }, "K/σ range"},
		{"NaN h/Ti", func(g *KihlGrid) { g.HTiMin = math.NaN() }, "h/Ti range"},
		{"one K point", func(g *KihlGrid) { g.NK = 1 }, "K/σ needs"},
		{"too many h/Ti points", func(g *KihlGrid) { g.NTi = 10001 }, "h/Ti needs"},
	}
	for _, c := range cases {
		g := base
		c.mod(&g)
		if err := g.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.name, err, c.want)
		}
		if _, err := KihlRegion(paperSigma, time.Second, g); err == nil {
			t.Errorf("%s: KihlRegion accepted the grid", c.name)
		}
	}
	var zero KihlGrid
	if zero.Validate() == nil {
		t.Error("zero grid validated")
	}
	if _, err := KihlRegion(0, time.Second, base); err == nil || !strings.Contains(err.Error(), "sigma") {
		t.Errorf("sigma 0: err = %v", err)
	}
}

func TestFormatAbs(t *testing.T) {
	for _, c := range []struct {
		x    float64
		want string
	}{
		{2.248122, "2.25"},
		{2, "2"},
		{1, "1"},
		{1.0004, "1.0004"},
		{0.99999, "0.99999"},
		{123.456, "123"},
	} {
		if got := formatAbs(c.x); got != c.want {
			t.Errorf("formatAbs(%v) = %q, want %q", c.x, got, c.want)
		}
	}
}

func TestQuadRoots(t *testing.T) {
	for _, c := range []struct {
		p, q float64
		want [2]Pole
	}{
		{-3, 2, [2]Pole{{2, 0, 2}, {1, 0, 1}}},
		{0, 0, [2]Pole{{0, 0, 0}, {0, 0, 0}}},
		{0, 4, [2]Pole{{0, 2, 2}, {0, -2, 2}}},
		{1.5, -1, [2]Pole{{0.5, 0, 0.5}, {-2, 0, 2}}},
		{1e8, 1, [2]Pole{{-1e-8, 0, 1e-8}, {-1e8, 0, 1e8}}}, // no cancellation
	} {
		got := quadRoots(c.p, c.q)
		for i := range got {
			if !near(got[i].Re, c.want[i].Re, 1e-12*math.Max(1, math.Abs(c.want[i].Re))) ||
				!near(got[i].Im, c.want[i].Im, 1e-12) || !near(got[i].Abs, c.want[i].Abs, 1e-12*math.Max(1, c.want[i].Abs)) {
				t.Errorf("quadRoots(%v, %v) = %v, want %v", c.p, c.q, got, c.want)
			}
		}
	}
}

func BenchmarkKihlAnalyze(b *testing.B) {
	for b.Loop() {
		if _, err := KihlAnalyze(paperSigma, time.Second, 20, 2.8); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkKihlRegionDefault(b *testing.B) {
	g := DefaultKihlGrid()
	for b.Loop() {
		if _, err := KihlRegion(paperSigma, time.Second, g); err != nil {
			b.Fatal(err)
		}
	}
}

func TestKihlAnalyzeNegativeParameters(t *testing.T) {
	// K < 0 or Ti < 0 is analysed as given and is never stable: with
	// k = K/σ, r = h/Ti, the triangle needs k·r > 0 (a2 > −1 − a1) and
	// k·(1 − r) > 0 (a2 < 1), so k > 0 and 0 < r < 1.
	for _, p := range [][2]float64{{-20, 2.8}, {20, -2.8}, {-20, -2.8}, {-1, -0.5}} {
		a, err := KihlAnalyze(paperSigma, time.Second, p[0], p[1])
		if err != nil {
			t.Fatal(err)
		}
		if a.StableLinear || a.StableTsypkin || !strings.HasPrefix(a.Verdict, "unstable: ") {
			t.Errorf("K %v Ti %v: %+v", p[0], p[1], a)
		}
	}
}

// FuzzKihlAnalyze checks that any input either is rejected with an error or
// yields a consistent analysis that encodes as JSON.
func FuzzKihlAnalyze(f *testing.F) {
	f.Add(44.4, int64(time.Second), 20.0, 2.8)
	f.Add(44.4, int64(time.Second), 20.0, 0.1)
	f.Add(1e-300, int64(1), 1e300, 1e-300)
	f.Add(1.0, int64(time.Second), 1e200, 1e-200)
	f.Fuzz(func(t *testing.T, sigma float64, hNanos int64, K, Ti float64) {
		a, err := KihlAnalyze(sigma, time.Duration(hNanos), K, Ti)
		if err != nil {
			return
		}
		if _, err := json.Marshal(a); err != nil {
			t.Fatalf("σ %v h %v K %v Ti %v: JSON: %v", sigma, hNanos, K, Ti, err)
		}
		if a.StableTsypkin && (!a.StableLinear || a.Eta == nil) {
			t.Fatalf("σ %v h %v K %v Ti %v: %+v", sigma, hNanos, K, Ti, a)
		}
		if a.Verdict == "" || len(a.Poles) != 3 {
			t.Fatalf("incomplete analysis %+v", a)
		}
	})
}

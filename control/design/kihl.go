// SPDX-License-Identifier: Apache-2.0

package design

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// Numerical resolution of the Kihl stability analysis. A verdict is exact up
// to these settings; they are constants so that results repeat.
const (
	// KihlTol is the slack of every strict inequality: (a1, a2) is inside
	// the Jury triangle only if each inequality holds by more than KihlTol,
	// a pole is inside the unit circle only if |z| < 1 − KihlTol, and the
	// Tsypkin inequality counts as satisfied if its minimum is ≥ −KihlTol.
	KihlTol = 1e-9

	// KihlEtaMax and KihlEtaStep define the η grid of the Tsypkin search:
	// η = 0, KihlEtaStep, 2·KihlEtaStep, …, KihlEtaMax. The margin
	// F(η) = 1 + min over ω of Re[(1 + η(1 − e^{−iω}))·G(e^{iω})] is a
	// minimum of functions affine in η, hence concave: the scan can stop
	// as soon as F falls below its best value, the best grid point's
	// neighbours bracket the global maximum on [0, KihlEtaMax], and a
	// golden-section refinement inside that bracket finds it to 1e-9.
	KihlEtaMax  = 100.0
	KihlEtaStep = 0.1

	// KihlOmegaIntervals is the minimum number of equal intervals of the ω
	// grid on [0, π]. When a pole of G lies within distance d of the unit
	// circle the grid is refined to at least 4π/d intervals (at most
	// kihlOmegaIntervalsMax) so that the resonance peak is sampled, and every
	// local minimum found on the grid is refined by golden-section search.
	KihlOmegaIntervals = 4096

	kihlOmegaIntervalsMax = 1 << 18
)

// Pole is a pole of a discrete-time transfer function, a point of the
// complex z plane; Abs is its modulus |z|.
type Pole struct {
	Re  float64 `json:"re"`
	Im  float64 `json:"im"`
	Abs float64 `json:"abs"`
}

// KihlAnalysis is the stability analysis of one Andersson–Kihl PI design
// (see the package documentation for the model). The JSON keys are part of
// the `sluice design kihl --json` output and are stable.
type KihlAnalysis struct {
	// Sigma is σ, the maximum number of departures per period (requests
	// per period, σ ≈ μ·h).
	Sigma float64 `json:"sigma"`
	// HSeconds is the control period h in seconds.
	HSeconds float64 `json:"h_s"`
	// K is the proportional gain in requests per period per unit of
	// utilization; Ti is the integral time in seconds.
	K  float64 `json:"K"`
	Ti float64 `json:"Ti"`
	// A1 and A2 are the coefficients of the closed-loop characteristic
	// polynomial z·(z² + a1·z + a2) of the linear model:
	// a1 = K/σ − 2, a2 = 1 − K/σ + K·h/(σ·Ti).
	A1 float64 `json:"a1"`
	A2 float64 `json:"a2"`
	// Poles are the three closed-loop poles of the linear model: 0, then
	// the two roots of z² + a1·z + a2 (real roots in decreasing order,
	// complex pairs with the positive imaginary part first).
	Poles []Pole `json:"poles"`
	// StableLinear reports that (a1, a2) lies strictly inside the Jury
	// triangle a2 < 1, a2 > −1 + a1, a2 > −1 − a1, that is, both roots of
	// z² + a1·z + a2 are strictly inside the unit circle.
	StableLinear bool `json:"stable_linear"`
	// StableTsypkin reports that the Tsypkin (Jury–Lee) criterion proves
	// absolute stability for the queue nonlinearity in the sector [0, 1]:
	// G has all its poles strictly inside the unit circle and some η in
	// [0, KihlEtaMax] gives Re[(1 + η(1 − e^{−iω}))·G(e^{iω})] + 1 ≥ 0 for
	// all ω in [0, π]. The criterion is sufficient, not necessary.
	StableTsypkin bool `json:"stable_tsypkin"`
	// Eta is the η that maximises the Tsypkin margin when StableTsypkin is
	// true, and nil otherwise.
	Eta *float64 `json:"eta"`
	// Verdict is a one-sentence summary beginning with "stable:",
	// "not guaranteed:" or "unstable:".
	Verdict string `json:"verdict"`

	// GPoles are the poles of G(z) = −(z − 1)/(z² + (K/σ − 1)·z +
	// K(h − Ti)/(σ·Ti)) after cancelling the common factor z; the cancelled
	// pole at 0 is always inside the unit circle.
	GPoles []Pole `json:"-"`
	// TsypkinMargin is max over the η grid of
	// min over ω of Re[(1 + η(1 − e^{−iω}))·G(e^{iω})] + 1; the criterion
	// holds when it is ≥ −KihlTol. It is NaN when G is unstable (no search).
	TsypkinMargin float64 `json:"-"`
	// TsypkinEta is the η at which TsypkinMargin is reached (NaN when G is
	// unstable), reported whether or not the criterion holds.
	TsypkinEta float64 `json:"-"`
}

// KihlPlace computes the PI parameters that place the closed-loop poles of
// the linear Andersson–Kihl model at the roots of z·(z² + a1·z + a2):
//
//	K  = (2 + a1)·σ
//	Ti = h·(2 + a1)/(1 + a1 + a2)
//
// sigma is σ in requests per period, h the control period; K is returned in
// requests per period per unit of utilization and Ti in seconds. KihlPlace
// does not judge the polynomial: a polynomial outside the stability
// triangle yields the (unstable) parameters that realise it, which
// [KihlAnalyze] then reports as unstable. It returns an error naming the
// input when σ or h is not positive, a1 or a2 is not finite, 1 + a1 + a2 = 0
// (a pole at z = 1 cannot be placed), a1 = −2 (K = 0, no controller), or the
// result overflows.
func KihlPlace(sigma float64, h time.Duration, a1, a2 float64) (K, Ti float64, err error) {
	if err := checkSigmaH(sigma, h); err != nil {
		return 0, 0, err
	}
	if !isFinite(a1) {
		return 0, 0, fmt.Errorf("design: a1 must be finite, got %v", a1)
	}
	if !isFinite(a2) {
		return 0, 0, fmt.Errorf("design: a2 must be finite, got %v", a2)
	}
	d := 1 + a1 + a2
	if d == 0 {
		return 0, 0, fmt.Errorf("design: 1 + a1 + a2 = 0 (a1 = %v, a2 = %v): a pole at z = 1 cannot be placed, Ti = h·(2 + a1)/(1 + a1 + a2) is undefined", a1, a2)
	}
	if 2+a1 == 0 {
		return 0, 0, fmt.Errorf("design: a1 = %v gives K = (2 + a1)·σ = 0: no controller places this polynomial", a1)
	}
	K = (2 + a1) * sigma
	Ti = h.Seconds() * (2 + a1) / d
	if !isFinite(K) || !isFinite(Ti) {
		return 0, 0, fmt.Errorf("design: pole placement for a1 = %v, a2 = %v overflows (K = %v, Ti = %v)", a1, a2, K, Ti)
	}
	return K, Ti, nil
}

// KihlAnalyze analyses the Andersson–Kihl PI design with gain K (requests
// per period per unit of utilization) and integral time Ti (seconds) for a
// server with σ departures per period (requests per period) and control
// period h: the closed-loop poles of the linear model, the Jury triangle
// test and the Tsypkin criterion (see [KihlAnalysis] for each field).
// Negative K or Ti are analysed as given (they are never stable). It
// returns an error naming the input when σ or h is not positive, K is not
// finite, Ti is zero or not finite, or K/σ and h/Ti are so large that the
// polynomial coefficients or poles overflow.
func KihlAnalyze(sigma float64, h time.Duration, K, Ti float64) (KihlAnalysis, error) {
	if err := checkSigmaH(sigma, h); err != nil {
		return KihlAnalysis{}, err
	}
	if !isFinite(K) {
		return KihlAnalysis{}, fmt.Errorf("design: K must be finite, got %v", K)
	}
	if !isFinite(Ti) || Ti == 0 {
		return KihlAnalysis{}, fmt.Errorf("design: Ti must be a finite non-zero number of seconds, got %v", Ti)
	}
	hs := h.Seconds()
	k, r := K/sigma, hs/Ti
	if !isFinite(k) || !isFinite(r) {
		return KihlAnalysis{}, fmt.Errorf("design: K/σ = %v or h/Ti = %v is not finite (K = %v, σ = %v, Ti = %v)", k, r, K, sigma, Ti)
	}
	n := kihlNormalized(k, r)
	for _, v := range []float64{n.a1, n.a2, n.poles[0].Abs, n.poles[1].Abs, n.gPoles[0].Abs, n.gPoles[1].Abs} {
		if !isFinite(v) {
			return KihlAnalysis{}, fmt.Errorf("design: K/σ = %v and h/Ti = %v are too large to analyse (K = %v, σ = %v, Ti = %v)", k, r, K, sigma, Ti)
		}
	}
	a := KihlAnalysis{
		Sigma: sigma, HSeconds: hs, K: K, Ti: Ti,
		A1: n.a1, A2: n.a2,
		Poles:         append([]Pole{{}}, n.poles[:]...),
		StableLinear:  n.linear,
		StableTsypkin: n.tsypkin,
		GPoles:        n.gPoles[:],
		TsypkinMargin: n.margin,
		TsypkinEta:    n.eta,
	}
	if n.tsypkin {
		eta := n.eta
		a.Eta = &eta
	}
	a.Verdict = n.verdict()
	return a, nil
}

// KihlGrid is a rectangular grid over the normalised PI parameters K/σ and
// h/Ti: NK points evenly spaced from KSigmaMin to KSigmaMax (inclusive) and
// NTi points from HTiMin to HTiMax. Its zero value is invalid; start from
// [DefaultKihlGrid].
type KihlGrid struct {
	KSigmaMin, KSigmaMax float64
	HTiMin, HTiMax       float64
	NK, NTi              int
}

// DefaultKihlGrid returns the grid of cell centres covering the linear
// stability region 0 < K/σ < 4, 0 < h/Ti < 1 (the paper's Figure 5):
// K/σ = 0.05, 0.15, …, 3.95 and h/Ti = 0.025, 0.075, …, 0.975.
func DefaultKihlGrid() KihlGrid {
	return KihlGrid{KSigmaMin: 0.05, KSigmaMax: 3.95, NK: 40, HTiMin: 0.025, HTiMax: 0.975, NTi: 20}
}

// Validate reports the first invalid field: bounds must be finite with
// min < max, and each axis needs at least 2 and at most 10000 points.
func (g KihlGrid) Validate() error {
	axes := []struct {
		name     string
		min, max float64
		n        int
	}{{"K/σ", g.KSigmaMin, g.KSigmaMax, g.NK}, {"h/Ti", g.HTiMin, g.HTiMax, g.NTi}}
	for _, ax := range axes {
		if !isFinite(ax.min) || !isFinite(ax.max) || !(ax.min < ax.max) {
			return fmt.Errorf("design: grid %s range must be finite with min < max, got [%v, %v]", ax.name, ax.min, ax.max)
		}
		if ax.n < 2 || ax.n > 10000 {
			return fmt.Errorf("design: grid %s needs 2…10000 points, got %d", ax.name, ax.n)
		}
	}
	return nil
}

// KihlRegionPoint is one grid point of [KihlRegion].
type KihlRegionPoint struct {
	// KSigma is K/σ and HTi is h/Ti (both dimensionless).
	KSigma float64 `json:"k_sigma"`
	HTi    float64 `json:"h_ti"`
	// K (requests per period per unit of utilization) and Ti (seconds) are
	// the parameters for the σ and h given to KihlRegion; Ti is ±Inf when
	// HTi is 0.
	K  float64 `json:"K"`
	Ti float64 `json:"Ti"`
	// StableLinear and StableTsypkin are as in [KihlAnalysis].
	StableLinear  bool `json:"stable_linear"`
	StableTsypkin bool `json:"stable_tsypkin"`
}

// KihlRegion samples the linear and the Tsypkin stability regions over the
// grid g (the paper's Figures 5 and 6). Both regions depend only on K/σ and
// h/Ti; sigma (requests per period) and h only convert each point to K and
// Ti. Points are returned row by row: h/Ti ascending in the outer loop, K/σ
// ascending in the inner loop.
func KihlRegion(sigma float64, h time.Duration, g KihlGrid) ([]KihlRegionPoint, error) {
	if err := checkSigmaH(sigma, h); err != nil {
		return nil, err
	}
	if err := g.Validate(); err != nil {
		return nil, err
	}
	hs := h.Seconds()
	pts := make([]KihlRegionPoint, 0, g.NK*g.NTi)
	for i := range g.NTi {
		r := gridValue(g.HTiMin, g.HTiMax, g.NTi, i)
		for j := range g.NK {
			k := gridValue(g.KSigmaMin, g.KSigmaMax, g.NK, j)
			n := kihlNormalized(k, r)
			pts = append(pts, KihlRegionPoint{
				KSigma: k, HTi: r, K: k * sigma, Ti: hs / r,
				StableLinear: n.linear, StableTsypkin: n.tsypkin,
			})
		}
	}
	return pts, nil
}

// gridValue is the i-th of n evenly spaced values from lo to hi.
func gridValue(lo, hi float64, n, i int) float64 {
	if i == n-1 {
		return hi
	}
	return lo + (hi-lo)*float64(i)/float64(n-1)
}

// kihlResult is the analysis in normalised parameters k = K/σ, r = h/Ti.
type kihlResult struct {
	a1, a2      float64
	poles       [2]Pole // roots of z² + a1·z + a2
	linear      bool
	gPoles      [2]Pole // roots of z² + (k − 1)·z + k·(r − 1)
	gStable     bool
	tsypkin     bool
	eta, margin float64
}

// kihlNormalized analyses the design with k = K/σ and r = h/Ti. In these
// terms a1 = k − 2, a2 = 1 − k + k·r, and G(z) = −(z − 1)/(z² + b1·z + b2)
// with b1 = k − 1, b2 = k·(r − 1) = k·h/Ti − k.
func kihlNormalized(k, r float64) kihlResult {
	var n kihlResult
	n.a1 = k - 2
	n.a2 = 1 - k + k*r
	n.poles = quadRoots(n.a1, n.a2)
	n.linear = n.a2 < 1-KihlTol && n.a2 > -1+n.a1+KihlTol && n.a2 > -1-n.a1+KihlTol
	b1, b2 := k-1, k*(r-1)
	n.gPoles = quadRoots(b1, b2)
	gmax := math.Max(n.gPoles[0].Abs, n.gPoles[1].Abs)
	n.gStable = gmax < 1-KihlTol
	n.eta, n.margin = math.NaN(), math.NaN()
	if n.gStable {
		n.eta, n.margin = tsypkinSearch(b1, b2, 1-gmax)
		n.tsypkin = n.margin >= -KihlTol
	}
	return n
}

// verdict is the one-sentence summary of the analysis.
func (n kihlResult) verdict() string {
	switch {
	case !n.linear:
		return "unstable: " + poleWhere("closed-loop pole", n.poles)
	case !n.gStable:
		return "not guaranteed: the linear model is stable, but the Tsypkin criterion fails: " + poleWhere("G has a pole", n.gPoles)
	case !n.tsypkin:
		return fmt.Sprintf("not guaranteed: the linear model is stable, but no η in [0, %g] satisfies the Tsypkin criterion (best margin %.3g at η = %.4g)", KihlEtaMax, n.margin, n.eta)
	default:
		return fmt.Sprintf("stable: linear model and Tsypkin criterion both satisfied (η = %.4g)", n.eta)
	}
}

// poleWhere describes the outermost of two poles relative to the unit circle.
func poleWhere(what string, p [2]Pole) string {
	m := math.Max(p[0].Abs, p[1].Abs)
	where := "outside the unit circle"
	if math.Abs(m-1) <= 1e-6 {
		where = "on the unit circle"
	} else if m < 1 {
		where = "at the edge of the unit circle"
	}
	return fmt.Sprintf("%s at |z| = %s %s", what, formatAbs(m), where)
}

// formatAbs prints |z| with three significant digits, or more when three
// would make a modulus different from 1 print as "1".
func formatAbs(x float64) string {
	s := strconv.FormatFloat(x, 'g', 3, 64)
	for prec := 4; (s == "1" || s == "1.00") && x != 1 && prec <= 12; prec++ {
		s = strconv.FormatFloat(x, 'g', prec, 64)
	}
	return s
}

// quadRoots returns the roots of z² + p·z + q, real roots in decreasing
// order and complex pairs with the positive imaginary part first. It uses
// the cancellation-free form of the quadratic formula.
func quadRoots(p, q float64) [2]Pole {
	disc := p*p - 4*q
	if disc < 0 {
		re, im := -p/2, math.Sqrt(-disc)/2
		abs := math.Hypot(re, im)
		return [2]Pole{{re, im, abs}, {re, -im, abs}}
	}
	t := -(p + math.Copysign(math.Sqrt(disc), p)) / 2
	r1, r2 := t, 0.0
	if t != 0 {
		r2 = q / t
	}
	if r2 > r1 {
		r1, r2 = r2, r1
	}
	return [2]Pole{{r1, 0, math.Abs(r1)}, {r2, 0, math.Abs(r2)}}
}

// tsypkinSearch maximises over η in [0, KihlEtaMax] the Tsypkin margin
// F(η) = 1 + min over ω in [0, π] of Re[(1 + η(1 − e^{−iω}))·G(e^{iω})] for
// G(z) = −(z − 1)/(z² + b1·z + b2), whose poles are at distance dist > 0
// inside the unit circle. It returns the maximising η and F(η), the
// latter refined around every grid minimum over ω.
func tsypkinSearch(b1, b2, dist float64) (eta, margin float64) {
	n := KihlOmegaIntervals
	if need := 4 * math.Pi / dist; need > float64(n) {
		n = int(math.Min(math.Ceil(need), kihlOmegaIntervalsMax))
	}
	// On the grid, Re[(1 + η(1 − e^{−iω}))G] = P(ω) + η·Q(ω).
	P := make([]float64, n+1)
	Q := make([]float64, n+1)
	for j := range P {
		P[j], Q[j] = tsypkinPQ(b1, b2, math.Pi*float64(j)/float64(n))
	}
	F := func(eta float64) float64 {
		m := math.Inf(1)
		for j, p := range P {
			if v := p + eta*Q[j]; v < m {
				m = v
			}
		}
		return 1 + m
	}
	// Scan the η grid upwards. F is concave, so once it has dropped below
	// the best value so far it never comes back: stopping there gives the
	// same best grid point as a full scan.
	steps := int(math.Round(KihlEtaMax / KihlEtaStep))
	best, bestF := 0, math.Inf(-1)
	for i := 0; i <= steps; i++ {
		f := F(float64(i) * KihlEtaStep)
		if f > bestF {
			best, bestF = i, f
		} else if f < bestF-1e-12 {
			break
		}
	}
	eta, margin = float64(best)*KihlEtaStep, bestF
	lo := math.Max(0, eta-KihlEtaStep)
	hi := math.Min(KihlEtaMax, eta+KihlEtaStep)
	if e, f := goldenMax(F, lo, hi, 1e-9); f > margin {
		eta, margin = e, f
	}
	// Refine over ω between grid points around each local minimum.
	f := func(w float64) float64 {
		p, q := tsypkinPQ(b1, b2, w)
		return 1 + p + eta*q
	}
	g := func(j int) float64 { return 1 + P[j] + eta*Q[j] }
	for j := range P {
		left := j == 0 || g(j) < g(j-1)
		right := j == n || g(j) <= g(j+1)
		if !left || !right {
			continue
		}
		lo := math.Pi * float64(max(j-1, 0)) / float64(n)
		hi := math.Pi * float64(min(j+1, n)) / float64(n)
		_, neg := goldenMax(func(w float64) float64 { return -f(w) }, lo, hi, 1e-12)
		margin = math.Min(margin, -neg)
	}
	return eta, margin
}

// tsypkinPQ returns P = Re G(e^{iω}) and Q = Re[(1 − e^{−iω})·G(e^{iω})] for
// G(z) = −(z − 1)/(z² + b1·z + b2).
func tsypkinPQ(b1, b2, w float64) (P, Q float64) {
	s, c := math.Sincos(w)
	z := complex(c, s)
	g := -(z - 1) / (z*z + complex(b1, 0)*z + complex(b2, 0))
	return real(g), real((1 - complex(c, -s)) * g)
}

// goldenMax maximises a unimodal (here: concave) function on [lo, hi] by
// golden-section search until the bracket is narrower than tol, and
// returns the best point seen and its value.
func goldenMax(f func(float64) float64, lo, hi, tol float64) (x, fx float64) {
	const invPhi = 0.6180339887498949
	a, b := lo, hi
	c, d := b-invPhi*(b-a), a+invPhi*(b-a)
	fc, fd := f(c), f(d)
	x, fx = lo, f(lo)
	if fhi := f(hi); fhi > fx {
		x, fx = hi, fhi
	}
	for i := 0; b-a > tol && i < 200; i++ {
		if fc >= fd {
			b, d, fd = d, c, fc
			c = b - invPhi*(b-a)
			fc = f(c)
		} else {
			a, c, fc = c, d, fd
			d = a + invPhi*(b-a)
			fd = f(d)
		}
	}
	for _, p := range [...]struct{ x, f float64 }{{c, fc}, {d, fd}} {
		if p.f > fx {
			x, fx = p.x, p.f
		}
	}
	return x, fx
}

// checkSigmaH validates the plant inputs shared by the Kihl functions.
func checkSigmaH(sigma float64, h time.Duration) error {
	if !(sigma > 0) || math.IsInf(sigma, 0) {
		return fmt.Errorf("design: sigma (σ, max departures per period) must be a positive finite number, got %v", sigma)
	}
	if h <= 0 {
		return fmt.Errorf("design: h (control period) must be positive, got %v", h)
	}
	return nil
}

func isFinite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

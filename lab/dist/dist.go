// SPDX-License-Identifier: Apache-2.0

// Package dist provides the random distributions, their text syntax and the
// arrival processes that sluice's load generator, testbed and simulator
// share.
//
// Everything here is pure: a distribution or an arrival process holds only
// its parameters (MMPP also holds its current phase), and every random draw
// comes from a *rand.Rand (math/rand/v2) passed in by the caller, so a run
// repeats exactly for a given seed. Nothing reads the wall clock.
//
// Values are plain float64: seconds for times, bytes for sizes. The text
// syntax is
//
//	exp:MEAN[,max=CAP]          exponential with the given mean
//	det:V                       always V
//	lognormal:MEAN,SIGMA        log-normal with the given mean; SIGMA is the
//	                            standard deviation of the underlying normal
//	pareto:MIN,MAX,ALPHA        bounded Pareto on [MIN, MAX] with shape ALPHA
//	uniform:A,B                 uniform on [A, B]
//
// where every kind accepts a trailing ",max=CAP" that caps samples at CAP
// (see Capped). ParseDuration reads MEAN, V, MIN, MAX, A, B and CAP as
// durations ("20ms", "0.7s"; a plain number is seconds) and ParseSize as
// sizes ("1500", "10KB", "1MiB"; a plain number is bytes). Examples:
// "exp:20ms", "det:10ms", "lognormal:20ms,1.5", "pareto:1ms,2s,1.2",
// "exp:0.7s,max=7s", "pareto:1KB,10MB,1.1".
package dist

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
)

// Dist is a distribution of non-negative values.
//
// Implementations in this package are immutable values and safe for
// concurrent use; the *rand.Rand passed to Sample is not, so concurrent
// callers each need their own.
type Dist interface {
	// Sample draws one value using r.
	Sample(r *rand.Rand) float64
	// Mean returns the exact expected value (see Capped for the one
	// documented exception).
	Mean() float64
	// String returns the distribution in the text syntax, with values as
	// plain numbers (seconds or bytes), so that ParseDuration or ParseSize
	// reads it back to an equal distribution.
	String() string
}

// LimitedMeaner is implemented by distributions that know their limited
// expected value E[min(X, m)]. Capped uses it to give an exact mean; every
// distribution in this package implements it.
type LimitedMeaner interface {
	// LimitedMean returns E[min(X, m)].
	LimitedMean(m float64) float64
}

// Compile-time guards.
var (
	_ Dist          = Exponential{}
	_ Dist          = Deterministic{}
	_ Dist          = LogNormal{}
	_ Dist          = BoundedPareto{}
	_ Dist          = Uniform{}
	_ Dist          = Capped{}
	_ Dist          = PoissonCount{}
	_ LimitedMeaner = Exponential{}
	_ LimitedMeaner = Deterministic{}
	_ LimitedMeaner = LogNormal{}
	_ LimitedMeaner = BoundedPareto{}
	_ LimitedMeaner = Uniform{}
	_ LimitedMeaner = Capped{}
)

// num formats a parameter so that strconv.ParseFloat returns it exactly.
// Moderate magnitudes are written without an exponent ("1048576").
func num(v float64) string {
	if a := math.Abs(v); a == 0 || (a >= 1e-4 && a < 1e21) {
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// checkNonNeg returns an error naming param unless v is finite and ≥ 0.
func checkNonNeg(kind, param string, v float64) error {
	if !finite(v) || v < 0 {
		return fmt.Errorf("dist %s: %s = %v: must be a finite number ≥ 0", kind, param, v)
	}
	return nil
}

// checkPos returns an error naming param unless v is finite and > 0.
func checkPos(kind, param string, v float64) error {
	if !finite(v) || v <= 0 {
		return fmt.Errorf("dist %s: %s = %v: must be a finite number > 0", kind, param, v)
	}
	return nil
}

// checkMean rejects parameter combinations whose mean is not representable.
func checkMean(d Dist) error {
	if m := d.Mean(); !finite(m) || m < 0 {
		return fmt.Errorf("dist %s: mean %v is not a finite non-negative number (parameters out of range)", d, m)
	}
	return nil
}

// Exponential is the exponential distribution with the given mean:
// P(X > x) = exp(−x/mean). Construct it with NewExponential; the zero value
// always samples 0.
type Exponential struct{ mean float64 }

// NewExponential returns an exponential distribution; mean must be finite
// and > 0.
func NewExponential(mean float64) (Exponential, error) {
	if err := checkPos("exp", "MEAN", mean); err != nil {
		return Exponential{}, err
	}
	return Exponential{mean: mean}, nil
}

// Sample draws mean·E with E a standard exponential variate.
func (d Exponential) Sample(r *rand.Rand) float64 { return d.mean * r.ExpFloat64() }

// Mean returns the mean.
func (d Exponential) Mean() float64 { return d.mean }

// LimitedMean returns E[min(X, m)] = mean·(1 − exp(−m/mean)).
func (d Exponential) LimitedMean(m float64) float64 {
	if m <= 0 || d.mean == 0 {
		return math.Min(m, 0)
	}
	return -d.mean * math.Expm1(-m/d.mean)
}

// String returns "exp:MEAN".
func (d Exponential) String() string { return "exp:" + num(d.mean) }

// Deterministic always returns the same value. The zero value returns 0.
type Deterministic struct{ v float64 }

// NewDeterministic returns a distribution that always yields v; v must be
// finite and ≥ 0.
func NewDeterministic(v float64) (Deterministic, error) {
	if err := checkNonNeg("det", "V", v); err != nil {
		return Deterministic{}, err
	}
	return Deterministic{v: v}, nil
}

// Sample returns the value without drawing from r.
func (d Deterministic) Sample(*rand.Rand) float64 { return d.v }

// Mean returns the value.
func (d Deterministic) Mean() float64 { return d.v }

// LimitedMean returns min(v, m).
func (d Deterministic) LimitedMean(m float64) float64 { return math.Min(d.v, m) }

// String returns "det:V".
func (d Deterministic) String() string { return "det:" + num(d.v) }

// maxSigma bounds the log-normal shape: beyond it samples overflow float64
// for ordinary means and sample means never converge.
const maxSigma = 10

// LogNormal is the log-normal distribution parameterised by its mean, so
// that the mean is exact whatever the shape: X = exp(μ + σZ) with Z standard
// normal and μ = ln(mean) − σ²/2. Construct it with NewLogNormal; the zero
// value always samples 0.
type LogNormal struct{ mean, sigma, mu float64 }

// NewLogNormal returns a log-normal distribution with the given mean
// (finite, > 0) and sigma, the standard deviation of the underlying normal
// (finite, in [0, 10]; 0 makes it deterministic).
func NewLogNormal(mean, sigma float64) (LogNormal, error) {
	if err := checkPos("lognormal", "MEAN", mean); err != nil {
		return LogNormal{}, err
	}
	if !finite(sigma) || sigma < 0 || sigma > maxSigma {
		return LogNormal{}, fmt.Errorf("dist lognormal: SIGMA = %v: must be a number in [0, %d]", sigma, maxSigma)
	}
	return LogNormal{mean: mean, sigma: sigma, mu: math.Log(mean) - sigma*sigma/2}, nil
}

// Sample draws exp(μ + σZ).
func (d LogNormal) Sample(r *rand.Rand) float64 {
	if d.mean == 0 {
		return 0
	}
	return math.Exp(d.mu + d.sigma*r.NormFloat64())
}

// Mean returns the mean.
func (d LogNormal) Mean() float64 { return d.mean }

// Sigma returns the standard deviation of the underlying normal.
func (d LogNormal) Sigma() float64 { return d.sigma }

// phi is the standard normal CDF.
func phi(z float64) float64 { return 0.5 * math.Erfc(-z/math.Sqrt2) }

// LimitedMean returns E[min(X, m)] =
// mean·Φ((ln m − μ − σ²)/σ) + m·(1 − Φ((ln m − μ)/σ)).
func (d LogNormal) LimitedMean(m float64) float64 {
	if m <= 0 || d.mean == 0 {
		return math.Min(m, 0)
	}
	if d.sigma == 0 {
		return math.Min(d.mean, m)
	}
	lm := math.Log(m)
	s := d.sigma
	return d.mean*phi((lm-d.mu-s*s)/s) + m*phi(-(lm-d.mu)/s)
}

// String returns "lognormal:MEAN,SIGMA".
func (d LogNormal) String() string { return "lognormal:" + num(d.mean) + "," + num(d.sigma) }

// BoundedPareto is the Pareto distribution truncated to [min, max] with
// shape alpha: P(X ≤ x) = (1 − (min/x)^α) / (1 − (min/max)^α). Sampling
// inverts the CDF. Construct it with NewBoundedPareto; the zero value
// always samples 0.
type BoundedPareto struct {
	lo, hi, alpha float64
	ell           float64 // ln(max/min)
	norm          float64 // 1 − (min/max)^α
}

// NewBoundedPareto returns a bounded Pareto distribution; it needs
// 0 < min < max (finite) and alpha finite and > 0.
func NewBoundedPareto(min, max, alpha float64) (BoundedPareto, error) {
	if err := checkPos("pareto", "MIN", min); err != nil {
		return BoundedPareto{}, err
	}
	if err := checkPos("pareto", "MAX", max); err != nil {
		return BoundedPareto{}, err
	}
	if max <= min {
		return BoundedPareto{}, fmt.Errorf("dist pareto: MAX = %v: must be greater than MIN = %v", max, min)
	}
	if err := checkPos("pareto", "ALPHA", alpha); err != nil {
		return BoundedPareto{}, err
	}
	ell := math.Log(max) - math.Log(min)
	d := BoundedPareto{lo: min, hi: max, alpha: alpha, ell: ell, norm: -math.Expm1(-alpha * ell)}
	if d.norm <= 0 || !finite(d.norm) {
		return BoundedPareto{}, fmt.Errorf("dist pareto: ALPHA = %v with MAX/MIN = %v: distribution is numerically degenerate", alpha, max/min)
	}
	if err := checkMean(d); err != nil {
		return BoundedPareto{}, err
	}
	return d, nil
}

// Sample draws min·(1 − U·(1 − (min/max)^α))^(−1/α) for U uniform in [0, 1).
func (d BoundedPareto) Sample(r *rand.Rand) float64 {
	if d.lo == 0 {
		return 0
	}
	x := d.lo * math.Exp(-math.Log1p(-r.Float64()*d.norm)/d.alpha)
	return math.Min(math.Max(x, d.lo), d.hi)
}

// g returns ∫₀^ℓ e^{s·y} dy = expm1(s·ℓ)/s, and ℓ when s = 0.
func g(s, ell float64) float64 {
	if s == 0 {
		return ell
	}
	return math.Expm1(s*ell) / s
}

// partial returns E[X; X ≤ m] for min ≤ m ≤ max:
// α·min/(1 − (min/max)^α) · ∫₀^{ln(m/min)} e^{(1−α)y} dy.
func (d BoundedPareto) partial(m float64) float64 {
	ell := math.Log(m) - math.Log(d.lo)
	return d.alpha * d.lo / d.norm * g(1-d.alpha, ell)
}

// Mean returns the exact mean
// α·min/(1 − (min/max)^α) · ((max/min)^(1−α) − 1)/(1 − α), which for α = 1
// is min·ln(max/min)/(1 − min/max).
func (d BoundedPareto) Mean() float64 {
	if d.lo == 0 {
		return 0
	}
	return d.alpha * d.lo / d.norm * g(1-d.alpha, d.ell)
}

// LimitedMean returns E[min(X, m)] = E[X; X ≤ m] + m·P(X > m).
func (d BoundedPareto) LimitedMean(m float64) float64 {
	switch {
	case d.lo == 0:
		return math.Min(m, 0)
	case m <= d.lo:
		return m
	case m >= d.hi:
		return d.Mean()
	}
	// P(X > m) = ((min/m)^α − (min/max)^α)/(1 − (min/max)^α).
	tail := (math.Exp(-d.alpha*(math.Log(m)-math.Log(d.lo))) - (1 - d.norm)) / d.norm
	return d.partial(m) + m*tail
}

// String returns "pareto:MIN,MAX,ALPHA".
func (d BoundedPareto) String() string {
	return "pareto:" + num(d.lo) + "," + num(d.hi) + "," + num(d.alpha)
}

// Uniform is the continuous uniform distribution on [a, b]. Construct it
// with NewUniform; the zero value always samples 0.
type Uniform struct{ a, b float64 }

// NewUniform returns a uniform distribution; it needs 0 ≤ a ≤ b, finite.
func NewUniform(a, b float64) (Uniform, error) {
	if err := checkNonNeg("uniform", "A", a); err != nil {
		return Uniform{}, err
	}
	if err := checkNonNeg("uniform", "B", b); err != nil {
		return Uniform{}, err
	}
	if b < a {
		return Uniform{}, fmt.Errorf("dist uniform: B = %v: must be ≥ A = %v", b, a)
	}
	return Uniform{a: a, b: b}, nil
}

// Sample draws a + (b − a)·U.
func (d Uniform) Sample(r *rand.Rand) float64 { return d.a + (d.b-d.a)*r.Float64() }

// Mean returns (a + b)/2.
func (d Uniform) Mean() float64 { return d.a/2 + d.b/2 }

// LimitedMean returns E[min(X, m)].
func (d Uniform) LimitedMean(m float64) float64 {
	switch {
	case m <= d.a:
		return m
	case m >= d.b:
		return d.Mean()
	}
	w := d.b - d.a
	return (m-d.a)/w*(m+d.a)/2 + m*(d.b-m)/w
}

// String returns "uniform:A,B".
func (d Uniform) String() string { return "uniform:" + num(d.a) + "," + num(d.b) }

// Capped caps the samples of D at Max: it yields min(X, Max). Use
// NewCapped to validate; a literal with Max < 0 or a nil D is invalid.
//
// Mean is exact, E[min(X, Max)], when D implements LimitedMeaner (every
// distribution in this package does). For any other D it is a Monte Carlo
// estimate from 100,000 draws with a fixed seed: deterministic, but only
// accurate to about 1% for moderately dispersed D, and recomputed on every
// call.
type Capped struct {
	D   Dist
	Max float64
}

// NewCapped returns D capped at max; d must be non-nil and max finite and
// > 0.
func NewCapped(d Dist, max float64) (Capped, error) {
	if d == nil {
		return Capped{}, fmt.Errorf("dist: capped distribution is nil")
	}
	if err := checkPos(d.String(), "max", max); err != nil {
		return Capped{}, err
	}
	return Capped{D: d, Max: max}, nil
}

// Sample draws min(D.Sample(r), Max).
func (c Capped) Sample(r *rand.Rand) float64 { return math.Min(c.D.Sample(r), c.Max) }

// monteCarloDraws is the sample count behind Capped.Mean for distributions
// that are not LimitedMeaners.
const monteCarloDraws = 100_000

// Mean returns E[min(X, Max)]; see the type's doc for when it is estimated.
func (c Capped) Mean() float64 { return c.LimitedMean(c.Max) }

// LimitedMean returns E[min(X, Max, m)].
func (c Capped) LimitedMean(m float64) float64 {
	m = math.Min(m, c.Max)
	if lm, ok := c.D.(LimitedMeaner); ok {
		return lm.LimitedMean(m)
	}
	r := rand.New(rand.NewPCG(0x5eed, 0xca99ed))
	sum := 0.0
	for range monteCarloDraws {
		sum += math.Min(c.D.Sample(r), m)
	}
	return sum / monteCarloDraws
}

// String returns D's text followed by ",max=MAX".
func (c Capped) String() string { return c.D.String() + ",max=" + num(c.Max) }

// PoissonCount is the Poisson distribution of event counts with the given
// mean: P(X = k) = e^(−mean)·mean^k/k!. The simulator's fluid model uses it
// for the arrivals and departures per period. It is not part of the text
// syntax. Construct it with NewPoissonCount; the zero value always samples 0.
type PoissonCount struct{ mean float64 }

// NewPoissonCount returns a Poisson count distribution; mean must be finite
// and ≥ 0.
func NewPoissonCount(mean float64) (PoissonCount, error) {
	if err := checkNonNeg("poisson", "MEAN", mean); err != nil {
		return PoissonCount{}, err
	}
	return PoissonCount{mean: mean}, nil
}

// Mean returns the mean.
func (d PoissonCount) Mean() float64 { return d.mean }

// String returns "poisson:MEAN".
func (d PoissonCount) String() string { return "poisson:" + num(d.mean) }

// Sample draws a count, returned as a float64 holding an integer. Means
// below 30 use sequential inversion of the CDF (O(mean) per draw); larger
// means use Hörmann's transformed rejection (PTRS, 1993), O(1) per draw.
func (d PoissonCount) Sample(r *rand.Rand) float64 {
	lam := d.mean
	if lam == 0 {
		return 0
	}
	if lam < 30 {
		// Inversion: walk the CDF from k = 0.
		u := r.Float64()
		p := math.Exp(-lam)
		cdf := p
		k := 0.0
		for u > cdf {
			k++
			p *= lam / k
			cdf += p
			if p == 0 { // u beyond the CDF's float64 resolution
				break
			}
		}
		return k
	}
	slam := math.Sqrt(lam)
	loglam := math.Log(lam)
	b := 0.931 + 2.53*slam
	a := -0.059 + 0.02483*b
	invAlpha := 1.1239 + 1.1328/(b-3.4)
	vr := 0.9277 - 3.6224/(b-2)
	for {
		u := r.Float64() - 0.5
		v := r.Float64()
		us := 0.5 - math.Abs(u)
		k := math.Floor((2*a/us+b)*u + lam + 0.43)
		if us >= 0.07 && v <= vr {
			return k
		}
		if k < 0 || (us < 0.013 && v > us) {
			continue
		}
		lg, _ := math.Lgamma(k + 1)
		if math.Log(v)+math.Log(invAlpha)-math.Log(a/(us*us)+b) <= -lam+k*loglam-lg {
			return k
		}
	}
}

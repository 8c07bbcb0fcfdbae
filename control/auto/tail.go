// SPDX-License-Identifier: Apache-2.0

package auto

import (
	"math"

	"github.com/sluicehq/sluice/internal/mathx"
)

// Auto's estimates of the service-time tail.
//
// R̂99 (estimates.rP99) is a running mean of the latest steps' p99 (tailRing.add):
// it follows the service within a few steps, and it is what the tail
// guard, the maximum healthy latency, the deck and the overtake test
// read. But a step of 20 lognormal σ 1.5 samples has a p99 anywhere from
// the service's p95 to its p99.9, so R̂99 swings by half behind a heavy
// tail: between 124 and 223 ms in one second behind a service whose p99
// is 106 ms. A wait queue sized from it is too short where it reads high
// (a crowd's first second is turned away) and too long where it reads
// low (the admitted p99 passes the SLO).
//
// With TailPool (a named option, off by default; 2000 in the adaptive
// figure) a standing queue past its burst allowance reads R̂99ᴾ instead:
// the p99 of the latest TailPool service times (tailRing.pooled), scaled
// by how far the service's median moved since,
//
//	R̂99ᴾ = p99(latest TailPool samples) · s,
//	s = m_recent/m_pool if m_recent/m_pool > shiftRatio, else 1,
//
// where m_recent is the median of the latest shiftSamples samples and
// m_pool that of the pool. The pool is precise (its p99 has about 20
// samples above it) but slow, and a service that got slower would have
// its queue sized from the faster one's tail for seconds; the median of
// shiftSamples samples is not swayed by the tail and moves within about
// a second: a service twice as slow doubles it. The pool spans at most
// tailPeriods steps. A burst and the burst allowance keep R̂99
// (queueTail).

// tailPeriods bounds how many periods tailRing keeps, and tailSamples is
// how many service-time samples its step estimate covers: 100·e^−γ ≈ 56
// (γ Euler's constant), the count whose expected largest sample is the p99
// of an exponential tail (E[max of n] = H_n·mean ≈ (ln n + γ)·mean, and
// the p99 is ln 100·mean).
const (
	tailPeriods = 128
	tailSamples = 56
)

// shiftSamples and shiftRatio detect a service that got slower: the
// median of the latest shiftSamples samples over the pool's median (see
// R̂99ᴾ above). A median of 200 lognormal σ 1.5 samples has a relative
// standard error of about 13 %, so 1.25 is two of them.
const (
	shiftSamples = 200
	shiftRatio   = 1.25
)

// tailRing holds the service-time p99 and sample count of the latest
// periods, and their median and its sample count. A period of n < 100
// samples has no p99 of its own: its nearest-rank p99 is its largest
// sample, near the p97 for 30 samples, and a running mean of those
// underestimates the tail (by 12 % for exponential service). The largest
// per-period p99 over the latest periods that together hold at least
// tailSamples samples does not; a period with that many is its own
// estimate.
type tailRing struct {
	p99, n   [tailPeriods]float64
	p50, n50 [tailPeriods]float64
	next     int
	len      int
}

// add records one period and returns the step's tail estimate.
func (t *tailRing) add(p99, n float64) float64 {
	t.p99[t.next], t.n[t.next] = p99, n
	t.p50[t.next], t.n50[t.next] = math.NaN(), 0
	t.next = (t.next + 1) % tailPeriods
	t.len = min(t.len+1, tailPeriods)
	worst, seen := 0.0, 0.0
	for k := 1; k <= t.len && seen < tailSamples; k++ {
		i := (t.next - k + tailPeriods) % tailPeriods
		worst = math.Max(worst, t.p99[i])
		seen += t.n[i]
	}
	return worst
}

// addMedian records the median of the period add recorded last and the
// samples behind it.
func (t *tailRing) addMedian(p50, n float64) {
	if t.len == 0 || !(n > 0) || !mathx.Usable(p50) {
		return
	}
	i := (t.next - 1 + tailPeriods) % tailPeriods
	t.p50[i], t.n50[i] = p50, n
}

// pooled returns the p99 of the latest periods that together hold at
// least minN samples (all of them if fewer), in s, from their per-period
// p99s: a period of n samples has n − ⌈0.99·n⌉ + 1 samples at or above
// its nearest-rank p99 (its largest sample for n < 100), so the pooled
// p99 is the largest period p99 at which the periods from it upwards
// hold 1 % of the pool's samples. Two of the pool's largest samples in
// one period count once, which biases it low by about one rank. NaN for
// an empty ring.
func (t *tailRing) pooled(minN float64) float64 {
	var vals, wts [tailPeriods]float64
	k, total := t.latest(minN, &vals, &wts, func(i int) (v, w, n float64, ok bool) {
		n = t.n[i]
		return t.p99[i], n - math.Ceil(0.99*n) + 1, n, n > 0 && mathx.Usable(t.p99[i])
	})
	return rankFrom(vals[:k], wts[:k], 0.01*total, true)
}

// median returns the median of the latest periods' medians that
// together hold at least minN samples, each weighted by its samples, in
// s (NaN without any).
func (t *tailRing) median(minN float64) float64 {
	var vals, wts [tailPeriods]float64
	k, total := t.latest(minN, &vals, &wts, func(i int) (v, w, n float64, ok bool) {
		return t.p50[i], t.n50[i], t.n50[i], t.n50[i] > 0
	})
	return rankFrom(vals[:k], wts[:k], total/2, false)
}

// latest fills vals and wts with the value and weight of the latest
// periods that pick accepts, newest first, until their samples n reach
// minN (or the ring ends), and returns how many it filled and their
// samples.
func (t *tailRing) latest(minN float64, vals, wts *[tailPeriods]float64,
	pick func(i int) (v, w, n float64, ok bool)) (int, float64) {
	k, total := 0, 0.0
	for j := 1; j <= t.len && total < minN; j++ {
		v, w, n, ok := pick((t.next - j + tailPeriods) % tailPeriods)
		if !ok {
			continue
		}
		vals[k], wts[k] = v, w
		total += n
		k++
	}
	return k, total
}

// rankFrom sorts vals (with their weights) from the largest (desc) or
// the smallest, and returns the first value at which the weights reach
// need (the last value if they never do; NaN for none). At most
// tailPeriods values: an insertion sort.
func rankFrom(vals, wts []float64, need float64, desc bool) float64 {
	if len(vals) == 0 {
		return math.NaN()
	}
	for i := 1; i < len(vals); i++ {
		for j := i; j > 0 && (vals[j] > vals[j-1]) == desc && vals[j] != vals[j-1]; j-- {
			vals[j], vals[j-1] = vals[j-1], vals[j]
			wts[j], wts[j-1] = wts[j-1], wts[j]
		}
	}
	need, cum := math.Max(need, 1e-9), 0.0
	for i, v := range vals {
		cum += wts[i]
		if cum >= need-1e-9 {
			return v
		}
	}
	return vals[len(vals)-1]
}

// pooledTail returns the pool's p99 in s, and s, the median's shift
// (1 when none); R̂99ᴾ is their product (see above).
func (t *tailRing) pooledTail(pool int) (float64, float64) {
	shift := t.median(shiftSamples) / t.median(float64(pool))
	if !(shift > shiftRatio) {
		shift = 1
	}
	return t.pooled(float64(pool)), shift
}

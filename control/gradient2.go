// SPDX-License-Identifier: Apache-2.0

package control

import (
	"fmt"
	"math"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/mathx"
)

// gradient2Warmup is the number of windows whose plain mean seeds longRtt
// before the exponential average takes over (ExpAvgMeasurement's warmup
// window in Gradient2Limit).
const gradient2Warmup = 10

// gradient2Drain multiplies longRtt when it is more than twice the window's
// RTT (Gradient2Limit; the Go port platinummonkey/go-concurrency-limits
// uses 0.9).
const gradient2Drain = 0.95

// Gradient2Config configures the gradient2 controller. The names and
// defaults are those of Netflix concurrency-limits: Gradient2Limit.Builder
// (initial_limit … rtt_tolerance) and WindowedLimit.Builder (the window
// fields). Start from DefaultGradient2Config.
type Gradient2Config struct {
	// Period is how often the runner reports measurements (default 100ms).
	// Windows are built from these steps, so it bounds how far a window's
	// end can fall after its nominal length.
	Period time.Duration `yaml:"period" json:"period"`
	// InitialLimit is the starting concurrency limit, in requests (default
	// 20); it must lie within [min_limit, max_concurrency].
	InitialLimit int `yaml:"initial_limit" json:"initial_limit"`
	// MinLimit is the smallest limit, in requests (default 20).
	MinLimit int `yaml:"min_limit" json:"min_limit"`
	// MaxConcurrency is the largest limit, in requests (default 200).
	MaxConcurrency int `yaml:"max_concurrency" json:"max_concurrency"`
	// Smoothing is the weight s of the new estimate, in (0, 1] (default
	// 0.2): limit = (1−s)·limit + s·newLimit.
	Smoothing float64 `yaml:"smoothing" json:"smoothing"`
	// QueueSize is the fixed headroom added to the limit at every update,
	// in requests, ≥ 0 (default 4, the Java default; the older
	// GradientLimit used max(4, √limit)).
	QueueSize int `yaml:"queue_size" json:"queue_size"`
	// LongWindow is the length N of longRtt's exponential average, in
	// windows, ≥ 1 (default 600): α = 2/(N+1).
	LongWindow int `yaml:"long_window" json:"long_window"`
	// RTTTolerance is how much the window's RTT may exceed longRtt before
	// the limit shrinks, ≥ 1 (default 1.5).
	RTTTolerance float64 `yaml:"rtt_tolerance" json:"rtt_tolerance"`
	// MinWindowTime and MaxWindowTime bound a sample window's length,
	// which is 2 × the previous window's smallest service time clamped to
	// [min_window_time, max_window_time]; both ≥ 100ms (defaults 1s and
	// 1s, so every window lasts 1 s).
	MinWindowTime time.Duration `yaml:"min_window_time" json:"min_window_time"`
	MaxWindowTime time.Duration `yaml:"max_window_time" json:"max_window_time"`
	// WindowSize is the fewest service-time samples a window needs before
	// it updates the limit, ≥ 10 (default 10).
	WindowSize int `yaml:"window_size" json:"window_size"`
	// MinRTTThreshold: a step whose mean service time is below it
	// contributes no samples (default 100µs; 0 keeps every step).
	MinRTTThreshold time.Duration `yaml:"min_rtt_threshold" json:"min_rtt_threshold"`
}

// DefaultGradient2Config returns the defaults of Gradient2Limit and
// WindowedLimit: InitialLimit 20 within MinLimit 20 and MaxConcurrency
// 200, Smoothing 0.2, QueueSize 4, LongWindow 600, RTTTolerance 1.5,
// windows of MinWindowTime 1s and MaxWindowTime 1s that need WindowSize 10
// samples, MinRTTThreshold 100µs, and a step every Period 100ms.
func DefaultGradient2Config() Gradient2Config {
	return Gradient2Config{Period: 100 * time.Millisecond, InitialLimit: 20, MinLimit: 20, MaxConcurrency: 200,
		Smoothing: 0.2, QueueSize: 4, LongWindow: 600, RTTTolerance: 1.5,
		MinWindowTime: time.Second, MaxWindowTime: time.Second, WindowSize: 10, MinRTTThreshold: 100 * time.Microsecond}
}

// Validate reports the first invalid field.
func (c *Gradient2Config) Validate() error {
	return firstError(
		checkPeriod("period", c.Period),
		checkAtLeast("min_limit", c.MinLimit, 1),
		invalidIf(c.MaxConcurrency < c.MinLimit, "max_concurrency", c.MaxConcurrency, fmt.Sprintf("must be ≥ min_limit (%d)", c.MinLimit)),
		invalidIf(c.InitialLimit < c.MinLimit || c.InitialLimit > c.MaxConcurrency, "initial_limit", c.InitialLimit,
			fmt.Sprintf("must be within [min_limit, max_concurrency] = [%d, %d]", c.MinLimit, c.MaxConcurrency)),
		checkWithin("smoothing", c.Smoothing, '(', 0, 1, ']'),
		checkAtLeast("queue_size", c.QueueSize, 0),
		invalidIf(c.LongWindow < 1, "long_window", c.LongWindow, "must be ≥ 1 window"),
		invalidIf(!mathx.Finite(c.RTTTolerance) || c.RTTTolerance < 1, "rtt_tolerance", c.RTTTolerance, "must be a finite number ≥ 1"),
		invalidIf(c.MinWindowTime < 100*time.Millisecond, "min_window_time", c.MinWindowTime, "must be ≥ 100ms (as in WindowedLimit)"),
		invalidIf(c.MaxWindowTime < c.MinWindowTime, "max_window_time", c.MaxWindowTime, fmt.Sprintf("must be ≥ min_window_time (%s)", c.MinWindowTime)),
		invalidIf(c.WindowSize < 10, "window_size", c.WindowSize, "must be ≥ 10 samples (as in WindowedLimit)"),
		invalidIf(c.MinRTTThreshold < 0, "min_rtt_threshold", c.MinRTTThreshold, "must be a duration ≥ 0 such as 100us"),
	)
}

// New validates the configuration and returns a controller.
func (c *Gradient2Config) New() (sluice.Controller, error) { return NewGradient2(*c) }

// Gradient2 is Netflix's Gradient2 concurrency limit behind its windowed
// sampler: concurrency-limits, limit/Gradient2Limit.java wrapped in
// limit/WindowedLimit.java (docs/algorithms.md §6). The limit follows the
// ratio of a long-term average RTT to the current window's RTT.
//
// Service-time samples are pooled into windows. A window closes at the
// first step at which both its length (the sum of the steps' Elapsed,
// at least 2·(previous window's smallest service time) clamped to
// [min_window_time, max_window_time], i.e. 1 s by default) and window_size
// samples are reached. Then, with shortRtt the window's mean service time
// and inflight the window's peak number of requests in service:
//
//	longRtt = mean of the first 10 windows' shortRtt, then
//	          (1−α)·longRtt + α·shortRtt,      α = 2/(long_window+1)
//	if longRtt/shortRtt > 2:  longRtt ← 0.95·longRtt   (after its use below)
//	if inflight < limit/2:    keep limit        (app-limited)
//	gradient = clamp(rtt_tolerance·longRtt/shortRtt, 0.5, 1)
//	newLimit = limit·gradient + queue_size
//	limit    = clamp((1−smoothing)·limit + smoothing·newLimit, min_limit, max_concurrency)
//
// Decision.New is the estimated limit (requests; the stage admits while
// fewer than ⌊New⌋ are in service, as Java's getLimit truncates it), and
// MaxWait is −1: a request that finds no free slot is rejected at once.
// Steps that do not close a window hold the limit (Acted false).
//
// Departures from the sources, all forced by the runner's per-interval
// aggregates:
//   - WindowedLimit discards each RTT below 100 µs. Only a step's mean is
//     known here, so a step whose mean service time is below
//     min_rtt_threshold contributes none of its samples, and a step above
//     it contributes all of them (a few fast requests may remain in the
//     mean). Rejected requests, whose near-zero latency was the reason for
//     the threshold, are never samples
//     here, nor are failed ones ("dropped requests are not samples").
//   - WindowedLimit drops a window with fewer than window_size samples and
//     starts a new one; here the window stays open and keeps accumulating
//     until it has them, so a quiet service still updates, only less often.
//   - The window's peak in flight is the largest MaxInFlight of its steps
//     (the stage's peak over time) rather than the largest in-flight count
//     seen by a sampled request when it started.
//   - The window ends at a step boundary, so up to one period late.
//   - longRtt's drain factor is Java's 0.95; the Go port uses 0.9.
//
// Known user pain with the original (kept here, as it is the algorithm):
// the limit drifts up under steady timeouts, because timed-out requests
// are not samples (Gradient2Limit updates only on completed requests).
//
// By priority (stage.Priority, on by default): a class is admitted only
// below its threshold of the limit, so the lowest class is refused first;
// Netflix's partitioned limiters split a limit by percentage instead,
// which guarantees shares rather than shedding the lowest first.
type Gradient2 struct {
	cfg   Gradient2Config
	alpha float64 // 2/(long_window+1)
	limit float64 // estimatedLimit

	longRTT   float64 // seconds
	longSum   float64 // sum of the warm-up windows' shortRtt
	longCount int     // warm-up windows seen (≤ 10)

	win gradient2Window
	cur sluice.Decision
}

// gradient2Window is the sample window being filled.
type gradient2Window struct {
	length      time.Duration // length this window must reach
	elapsed     time.Duration // time covered so far (saturates at length)
	samples     float64
	sum         float64 // Σ samples·mean, seconds
	min         float64 // smallest service time seen, seconds (+Inf if none)
	maxInFlight float64
	discarded   float64 // samples dropped by the RTT threshold
}

var _ sluice.Controller = (*Gradient2)(nil)

// NewGradient2 returns a Gradient2 controller for a validated copy of cfg.
func NewGradient2(cfg Gradient2Config) (*Gradient2, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	g := &Gradient2{cfg: cfg, alpha: 2 / (float64(cfg.LongWindow) + 1), limit: float64(cfg.InitialLimit)}
	g.resetWindow(cfg.MinWindowTime)
	g.cur = sluice.Decision{Controller: "gradient2", Kind: sluice.KindConcurrency, Old: g.limit, New: g.limit,
		MaxWait: -1, Reason: fmt.Sprintf("initial: limit %d", cfg.InitialLimit)}
	return g, nil
}

func (g *Gradient2) resetWindow(length time.Duration) {
	g.win = gradient2Window{length: length, min: math.Inf(1)}
}

// Period returns the step period.
func (g *Gradient2) Period() time.Duration { return g.cfg.Period }

// Current returns the setting in force.
func (g *Gradient2) Current() sluice.Decision { return g.cur }

// LongRTT returns longRtt in seconds (0 before the first window).
func (g *Gradient2) LongRTT() float64 { return g.longRTT }

// Update adds the step's samples to the window and, when the window
// closes, runs one Gradient2 update. Decision.New is the limit.
func (g *Gradient2) Update(now time.Time, m sluice.Measurements) sluice.Decision {
	old := g.limit
	el := m.Elapsed
	if el <= 0 {
		el = g.cfg.Period
	}
	if g.win.elapsed < g.win.length {
		g.win.elapsed += min(el, g.win.length)
	}
	g.addSamples(m)
	if usable(m.MaxInFlight) {
		g.win.maxInFlight = math.Max(g.win.maxInFlight, m.MaxInFlight)
	}
	if g.win.elapsed < g.win.length || g.win.samples < float64(g.cfg.WindowSize) {
		why := fmt.Sprintf("window %s of %s, %.0f of %d samples", g.win.elapsed, g.win.length, g.win.samples, g.cfg.WindowSize)
		if g.win.discarded > 0 {
			why += fmt.Sprintf(" (%.0f below %s discarded)", g.win.discarded, g.cfg.MinRTTThreshold)
		}
		return g.decide(now, m, old, false, fmt.Sprintf("limit %.4g held: %s", old, why))
	}
	w := g.win
	g.resetWindow(time.Duration(clamp(2*w.min, g.cfg.MinWindowTime.Seconds(), g.cfg.MaxWindowTime.Seconds()) * float64(time.Second)))
	return g.step(now, m, old, w)
}

// addSamples pools the step's successful service times into the window.
func (g *Gradient2) addSamples(m sluice.Measurements) {
	n, mean := m.ServiceSamples, m.ServiceMean
	if !usable(n) || n < 1 || !usable(mean) || mean <= 0 {
		return
	}
	if mean < g.cfg.MinRTTThreshold.Seconds() {
		g.win.discarded += n
		return
	}
	sum := g.win.sum + n*mean
	if !mathx.Finite(sum) || !mathx.Finite(g.win.samples+n) {
		return
	}
	g.win.samples += n
	g.win.sum = sum
	lo := mean
	if usable(m.ServiceMin) && m.ServiceMin > 0 && m.ServiceMin < mean {
		lo = m.ServiceMin
	}
	g.win.min = math.Min(g.win.min, lo)
}

// step is Gradient2Limit's update for one closed window.
func (g *Gradient2) step(now time.Time, m sluice.Measurements, old float64, w gradient2Window) sluice.Decision {
	short := w.sum / w.samples
	if g.longCount < gradient2Warmup {
		g.longCount++
		g.longSum += short
		g.longRTT = g.longSum / float64(g.longCount)
	} else {
		g.longRTT = g.longRTT*(1-g.alpha) + short*g.alpha
	}
	long := g.longRTT
	drained := ""
	if long/short > 2 {
		g.longRTT *= gradient2Drain
		drained = fmt.Sprintf(", longRtt drained to %s", fmtSec(g.longRTT))
	}
	head := fmt.Sprintf("window mean %s over %.0f samples, longRtt %s%s, max in flight %.0f",
		fmtSec(short), w.samples, fmtSec(long), drained, w.maxInFlight)
	if w.maxInFlight < old/2 {
		return g.decide(now, m, old, false, fmt.Sprintf("%s < limit/2 = %.4g: app-limited, limit %.4g held", head, old/2, old))
	}
	grad := clamp(g.cfg.RTTTolerance*long/short, 0.5, 1)
	q := float64(g.cfg.QueueSize)
	s := g.cfg.Smoothing
	est := old*grad + q
	nl := clamp((1-s)*old+s*est, float64(g.cfg.MinLimit), float64(g.cfg.MaxConcurrency))
	g.limit = nl
	return g.decide(now, m, old, true, fmt.Sprintf("%s: gradient %.3f, new estimate %.4g·%.3f + %d = %.4g, limit %.4g → %.4g (⌊limit⌋ %d)",
		head, grad, old, grad, g.cfg.QueueSize, est, old, nl, int(nl)))
}

func (g *Gradient2) decide(now time.Time, m sluice.Measurements, old float64, acted bool, reason string) sluice.Decision {
	d := decision(now, "gradient2", sluice.KindConcurrency, m, old, g.limit, acted, reason)
	d.MaxWait = -1
	g.cur = d
	return d
}

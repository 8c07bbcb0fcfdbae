// SPDX-License-Identifier: Apache-2.0

package control

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/mathx"
)

// envoyFloorRuns is the number of consecutive sample intervals that keep
// the limit at the floor before a fresh minRTT window starts
// (GradientController::updateConcurrencyLimit).
const envoyFloorRuns = 5

// EnvoyGradientConfig configures the envoy-gradient controller. Field
// names follow Envoy's GradientControllerConfig (v3 API,
// adaptive_concurrency.proto); start from DefaultEnvoyGradientConfig.
type EnvoyGradientConfig struct {
	// ConcurrencyUpdateInterval is the sample interval: how often the
	// limit is recalculated from the latency samples (default 100ms; it is
	// the controller's period).
	ConcurrencyUpdateInterval time.Duration `yaml:"concurrency_update_interval" json:"concurrency_update_interval"`
	// MinRTTCalcInterval is the time from the end of one minRTT window to
	// the start of the next, before jitter (default 60s).
	MinRTTCalcInterval time.Duration `yaml:"min_rtt_calc_interval" json:"min_rtt_calc_interval"`
	// RequestCount is the number of samples a minRTT window aggregates
	// (default 50).
	RequestCount int `yaml:"request_count" json:"request_count"`
	// Jitter delays each minRTT window by a uniform random amount in
	// [0, interval·jitter/100), in percent of min_rtt_calc_interval within
	// [0, 100] (default 15).
	Jitter float64 `yaml:"jitter" json:"jitter"`
	// Buffer is added to the measured minRTT before the gradient is taken,
	// in percent of minRTT, ≥ 0 (default 25).
	Buffer float64 `yaml:"buffer" json:"buffer"`
	// Percentile summarises a set of latency samples, for minRTT and for
	// the sample RTT: 50, 90 or 99 (default 50). Envoy accepts any
	// percentile; the runner measures only these three.
	Percentile int `yaml:"percentile" json:"percentile"`
	// MaxConcurrency is the largest limit, in requests (default 1000).
	MaxConcurrency int `yaml:"max_concurrency" json:"max_concurrency"`
	// MinConcurrency is the floor of the calculated limit, in requests
	// (default 3; Envoy's concurrency_limit_params.min_concurrency_limit).
	MinConcurrency int `yaml:"min_concurrency" json:"min_concurrency"`
	// ProbeConcurrency is the limit pinned during a minRTT window, in
	// requests (default 3; Envoy's min_rtt_calc_params.min_concurrency). A
	// window never raises the limit: it pins min(limit, probe_concurrency),
	// so probe_concurrency = max_concurrency measures minRTT on live
	// traffic without pinning, like Envoy with min_concurrency_limit set.
	ProbeConcurrency int `yaml:"probe_concurrency" json:"probe_concurrency"`
	// Seed seeds the jitter's random source (PCG, math/rand/v2), so a run
	// repeats exactly (default 0).
	Seed uint64 `yaml:"seed" json:"seed"`
}

// DefaultEnvoyGradientConfig returns Envoy's defaults: Percentile 50,
// MaxConcurrency 1000, RequestCount 50, Jitter 15 %, MinConcurrency 3 and
// ProbeConcurrency 3 (the floor and the probe), Buffer 25 %. Envoy has no
// default for the two intervals, which its config requires:
// ConcurrencyUpdateInterval 100ms and MinRTTCalcInterval 60s are those of
// the example configuration in Envoy's adaptive concurrency filter
// documentation.
func DefaultEnvoyGradientConfig() EnvoyGradientConfig {
	return EnvoyGradientConfig{ConcurrencyUpdateInterval: 100 * time.Millisecond, MinRTTCalcInterval: 60 * time.Second,
		RequestCount: 50, Jitter: 15, Buffer: 25, Percentile: 50, MaxConcurrency: 1000, MinConcurrency: 3, ProbeConcurrency: 3}
}

// Validate reports the first invalid field.
func (c *EnvoyGradientConfig) Validate() error {
	return firstError(
		checkPeriod("concurrency_update_interval", c.ConcurrencyUpdateInterval),
		invalidIf(c.MinRTTCalcInterval < time.Millisecond, "min_rtt_calc_interval", c.MinRTTCalcInterval, "must be a duration ≥ 1ms such as 60s"),
		checkAtLeast("request_count", c.RequestCount, 1),
		invalidIf(!mathx.Finite(c.Jitter) || c.Jitter < 0 || c.Jitter > 100, "jitter", c.Jitter, "must be a percentage within [0, 100]"),
		invalidIf(!mathx.Finite(c.Buffer) || c.Buffer < 0, "buffer", c.Buffer, "must be a finite percentage ≥ 0"),
		invalidIf(c.Percentile != 50 && c.Percentile != 90 && c.Percentile != 99, "percentile", c.Percentile,
			"must be 50, 90 or 99 (the percentiles the runner measures)"),
		checkAtLeast("min_concurrency", c.MinConcurrency, 1),
		invalidIf(c.MaxConcurrency < c.MinConcurrency, "max_concurrency", c.MaxConcurrency, fmt.Sprintf("must be ≥ min_concurrency (%d)", c.MinConcurrency)),
		invalidIf(c.ProbeConcurrency < 1 || c.ProbeConcurrency > c.MaxConcurrency, "probe_concurrency", c.ProbeConcurrency,
			fmt.Sprintf("must be within [1, max_concurrency] = [1, %d]", c.MaxConcurrency)),
	)
}

// New validates the configuration and returns a controller.
func (c *EnvoyGradientConfig) New() (sluice.Controller, error) { return NewEnvoyGradient(*c) }

// EnvoyGradient is the gradient controller of Envoy's adaptive concurrency
// filter (source/extensions/filters/http/adaptive_concurrency/controller/
// gradient_controller.cc; docs/algorithms.md §7), with the floor and the
// probe limit as two settings (the source once used one value,
// min_concurrency, for both, and later split them).
//
// minRTT window: at start, after every min_rtt_calc_interval + jitter
// (jitter uniform in [0, ⌈interval·jitter/100⌉), drawn from the seeded
// PCG source), and when five consecutive sample intervals keep the limit
// at min_concurrency, the controller saves the limit, pins it to
// min(limit, probe_concurrency) and sets Decision.Fence, so that requests
// admitted before the window are not samples. TriggerSamples asks the
// runner to call again as soon as the window has request_count samples;
// then minRTT is their percentile (seconds), the saved limit is restored
// and the next window is scheduled. Without samples the window stays open.
//
// Every sample interval outside a window with at least one sample, with
// sampleRTT the interval's percentile:
//
//	gradient = clamp(minRTT·(1 + buffer/100)/sampleRTT, 0.5, 2)
//	L′       = limit·gradient
//	limit    = clamp(⌊L′ + √L′⌋, min_concurrency, max_concurrency)
//
// An interval without samples leaves the limit (and the floor count)
// alone. Decision.New is the limit in requests; the stage admits while
// fewer are in service (Envoy: outstanding < limit) and MaxWait is −1:
// the rest are rejected at once (Envoy answers 503). The limit starts at
// probe_concurrency, inside the first window (Envoy starts at
// min_concurrency, the probe value).
//
// Departures: Envoy's histogram gives the exact percentile of a window's
// samples; the runner gives one percentile per step, so a minRTT window
// whose samples arrive over several steps takes their sample-weighted
// mean (exact when one step holds them all, which TriggerSamples
// arranges). Envoy's minRTT timer fires on its own; here the window opens
// at the first step at or after its time, and that step's samples, taken
// before the fence, are dropped (Envoy clears the histogram when the
// window opens). Envoy's jitter is in whole milliseconds; here in
// nanoseconds.
//
// By priority (stage.Priority, on by default): a class is admitted only
// below its threshold of the limit, so the lowest class is refused first;
// Envoy's controller has no classes.
type EnvoyGradient struct {
	cfg EnvoyGradientConfig
	rng *rand.Rand

	limit    float64 // whole requests
	minRTT   float64 // seconds; 0 until the first window closes
	inWindow bool
	deferred float64 // limit saved when the window opened
	winN     float64 // samples in the open window
	winSum   float64 // Σ samples·percentile, seconds
	next     time.Time
	atFloor  int // consecutive updates that kept the limit at the floor

	cur sluice.Decision
}

var (
	_ sluice.Controller      = (*EnvoyGradient)(nil)
	_ sluice.SampleTriggered = (*EnvoyGradient)(nil)
)

// NewEnvoyGradient returns an Envoy gradient controller for a validated
// copy of cfg, inside its first minRTT window.
func NewEnvoyGradient(cfg EnvoyGradientConfig) (*EnvoyGradient, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	e := &EnvoyGradient{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 0x5eed)), limit: float64(cfg.ProbeConcurrency)}
	e.enterWindow()
	e.cur = sluice.Decision{Controller: "envoy-gradient", Kind: sluice.KindConcurrency, Old: e.limit, New: e.limit,
		MaxWait: -1, Fence: true, Reason: fmt.Sprintf("initial: minRTT window open, limit pinned at %.0f until %d samples", e.limit, cfg.RequestCount)}
	return e, nil
}

// Period returns the sample interval.
func (e *EnvoyGradient) Period() time.Duration { return e.cfg.ConcurrencyUpdateInterval }

// TriggerSamples returns, inside a minRTT window, the number of samples
// the window still needs; outside one, 0 (run on the period only).
func (e *EnvoyGradient) TriggerSamples() int {
	if !e.inWindow {
		return 0
	}
	return max(1, e.cfg.RequestCount-int(e.winN))
}

// Current returns the setting in force.
func (e *EnvoyGradient) Current() sluice.Decision { return e.cur }

// MinRTT returns the last measured minRTT in seconds (0 before the first
// window closes).
func (e *EnvoyGradient) MinRTT() float64 { return e.minRTT }

// InWindow reports whether a minRTT window is open.
func (e *EnvoyGradient) InWindow() bool { return e.inWindow }

// NextWindow returns the time the next scheduled minRTT window opens (zero
// while one is open).
func (e *EnvoyGradient) NextWindow() time.Time { return e.next }

// percentile returns the configured percentile of the step's samples.
func (e *EnvoyGradient) percentile(m sluice.Measurements) float64 {
	switch e.cfg.Percentile {
	case 90:
		return m.ServiceP90
	case 99:
		return m.ServiceP99
	}
	return m.ServiceP50
}

// enterWindow saves the limit and pins it to min(limit, probe).
func (e *EnvoyGradient) enterWindow() {
	e.inWindow, e.deferred = true, e.limit
	e.limit = math.Min(e.limit, float64(e.cfg.ProbeConcurrency))
	e.winN, e.winSum, e.atFloor, e.next = 0, 0, 0, time.Time{}
}

// jittered returns min_rtt_calc_interval plus a uniform draw in
// [0, ⌈interval·jitter/100⌉) nanoseconds.
func (e *EnvoyGradient) jittered() time.Duration {
	iv := e.cfg.MinRTTCalcInterval
	span := int64(math.Ceil(float64(iv) * e.cfg.Jitter / 100))
	if span <= 0 {
		return iv
	}
	return iv + time.Duration(e.rng.Int64N(span))
}

// setLimit stores a calculated limit and counts updates at the floor.
func (e *EnvoyGradient) setLimit(l float64) {
	floor := float64(e.cfg.MinConcurrency)
	if !e.inWindow && e.limit == floor && l == floor {
		e.atFloor++
	} else {
		e.atFloor = 0
	}
	e.limit = l
}

// Update runs one step: inside a minRTT window it collects samples and
// closes the window once request_count are in; outside, it opens a window
// when one is due, or recalculates the limit from the interval's samples.
func (e *EnvoyGradient) Update(now time.Time, m sluice.Measurements) sluice.Decision {
	old := e.limit
	n, p := m.ServiceSamples, e.percentile(m)
	ok := usable(n) && n >= 1 && usable(p)
	if e.inWindow {
		if ok && mathx.Finite(e.winSum+n*p) {
			e.winN += n
			e.winSum += n * p
		}
		if e.winN < float64(e.cfg.RequestCount) {
			return e.decide(now, m, old, false, false, fmt.Sprintf("minRTT window: %.0f of %d samples, limit pinned at %.0f",
				e.winN, e.cfg.RequestCount, e.limit))
		}
		e.minRTT = e.winSum / e.winN
		e.setLimit(e.deferred)
		e.inWindow = false
		wait := e.jittered()
		e.next = now.Add(wait)
		return e.decide(now, m, old, true, false, fmt.Sprintf("minRTT window closed: p%d %s over %.0f samples; limit %.0f → %.0f; next window in %s",
			e.cfg.Percentile, fmtSec(e.minRTT), e.winN, old, e.limit, wait.Round(time.Millisecond)))
	}
	if !now.Before(e.next) {
		e.enterWindow()
		return e.decide(now, m, old, true, true, fmt.Sprintf("minRTT interval elapsed: window opened, limit %.0f → %.0f until %d samples",
			old, e.limit, e.cfg.RequestCount))
	}
	if !ok || p <= 0 {
		return e.decide(now, m, old, false, false, fmt.Sprintf("limit %.0f held: no usable samples (%v at p%d %v)", old, n, e.cfg.Percentile, p))
	}
	buffered := e.minRTT * (1 + e.cfg.Buffer/100)
	g := clamp(buffered/p, 0.5, 2)
	l := old * g
	nl := clamp(math.Floor(l+math.Sqrt(l)), float64(e.cfg.MinConcurrency), float64(e.cfg.MaxConcurrency))
	e.setLimit(nl)
	reason := fmt.Sprintf("sample p%d %s over %.0f, minRTT %s+%g%%: gradient %.3f, L′ %.4g, limit %.0f → ⌊L′+√L′⌋ = %.0f",
		e.cfg.Percentile, fmtSec(p), n, fmtSec(e.minRTT), e.cfg.Buffer, g, l, old, nl)
	if e.atFloor >= envoyFloorRuns {
		e.enterWindow()
		return e.decide(now, m, old, true, true, fmt.Sprintf("%s; %d intervals at the floor: minRTT window opened, limit %.0f", reason, envoyFloorRuns, e.limit))
	}
	return e.decide(now, m, old, true, false, reason)
}

func (e *EnvoyGradient) decide(now time.Time, m sluice.Measurements, old float64, acted, fence bool, reason string) sluice.Decision {
	d := decision(now, "envoy-gradient", sluice.KindConcurrency, m, old, e.limit, acted, reason)
	d.MaxWait, d.Fence = -1, fence
	e.cur = d
	return d
}

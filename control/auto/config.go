// SPDX-License-Identifier: Apache-2.0

package auto

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/control/internal/ctl"
	"github.com/sluicehq/sluice/internal/fielderr"
	"github.com/sluicehq/sluice/internal/mathx"
)

// Config configures the auto controller. Only the objective has to be
// chosen; DefaultConfig gives working values for the rest.
type Config struct {
	// SLO is the objective: the response time admitted answers must meet
	// (default 500ms). auto keeps the stage's queue short enough that an
	// admitted request's wait plus its service time stays below it, and
	// rejects at once what would not.
	SLO time.Duration `yaml:"slo" json:"slo"`
	// Period is how often the controller steps (default 100ms).
	Period time.Duration `yaml:"period" json:"period"`
	// InitialLimit is the concurrency limit before anything is known
	// (default 16).
	InitialLimit float64 `yaml:"initial_limit" json:"initial_limit"`
	// MinLimit and MaxLimit bound the limit (defaults 1 and 10000).
	MinLimit float64 `yaml:"min_limit" json:"min_limit"`
	MaxLimit float64 `yaml:"max_limit" json:"max_limit"`
	// HighProbe > 1 is the ratio of the high probe to the limit: it asks
	// whether more concurrency brings more throughput (default 1.5).
	HighProbe float64 `yaml:"high_probe" json:"high_probe"`
	// LowProbe > 1 divides the limit for the low probe: it asks whether
	// less concurrency would do (default 1.5).
	LowProbe float64 `yaml:"low_probe" json:"low_probe"`
	// MinCompletions is the number of successful completions a window
	// needs before it is judged (default 200), unless it has run for
	// MaxWindow (default 1s).
	MinCompletions int           `yaml:"min_completions" json:"min_completions"`
	MaxWindow      time.Duration `yaml:"max_window" json:"max_window"`
	// StandingWait is the longest a request may wait in a standing queue
	// (offered load above what the limit serves, or a queue that never
	// emptied in the last step); 0 (the default) means the longer of one
	// mean service time (enough to keep the service busy) and SLO/10 (so
	// that closed-loop clients, whose queue always stands but never grows,
	// are not turned away from a fast service); either way at most half
	// of what the service-time p99 leaves of the SLO, but not less than
	// one mean service time where that room has it. Otherwise a request
	// may wait for the SLO budget, to absorb a burst.
	StandingWait time.Duration `yaml:"standing_wait" json:"standing_wait"`
	// BurstWindow turns on the burst allowance (a named option, off by
	// default): for this long after a queue begins to stand it may hold
	// half of what the service-time p99 leaves of the SLO instead of the
	// standing wait, so that a burst shorter than it is queued and served
	// rather than rejected; the allowance comes back once the queue has
	// not stood for as long (see queue.go; default 0: off, a standing
	// queue is trimmed at once).
	BurstWindow time.Duration `yaml:"burst_window" json:"burst_window"`
	// TailPool turns on the pooled tail estimate (a named option, off by
	// default): a standing queue past its burst allowance is sized from
	// the p99 of the latest TailPool service times, scaled up by how far
	// their median has moved since (R̂99ᴾ, see tail.go), instead of
	// the running mean of the latest steps' p99 (R̂99), which swings by
	// half behind a heavy-tailed service time (default 0: off; 2000 in
	// the figures; at most the latest 128 steps are pooled).
	TailPool int `yaml:"tail_pool" json:"tail_pool"`

	// Guardrails (see Auto); the zero value of each is off.

	// MinRate, in req/s, is the offered rate below which auto sheds
	// nothing (Envoy admission control's rps_threshold): while the last
	// step's offered rate is below it, the gate is open (default 0: off).
	MinRate float64 `yaml:"min_rate" json:"min_rate"`
	// MaxRejectFraction in (0, 1] is the largest share of a step's
	// arrivals the stage rejects; beyond it, requests are admitted past
	// the limit (Envoy admission control's max_rejection_probability;
	// default 0: off).
	MaxRejectFraction float64 `yaml:"max_reject_fraction" json:"max_reject_fraction"`
	// Warmup is how long after the controller starts (the stage's start,
	// or a reload that changes the stage) the limit grows without waiting
	// for a second high probe to confirm a gain, with the high probe at 4×
	// from the first (a fast start from InitialLimit; default 0: off).
	Warmup time.Duration `yaml:"warmup" json:"warmup"`
	// MaxHealthyLatency is the service-time p99 (R̂99) above which auto
	// never raises its limit, whatever its probes measure (failsafe-go's
	// and concurrency-limits' maximum healthy latency; default 0: off).
	MaxHealthyLatency time.Duration `yaml:"max_healthy_latency" json:"max_healthy_latency"`
	// TailGuard turns on the tail guard (see Auto): R̂99 takes a rise at
	// once, and a base window ending while R̂99 > SLO − standing wait cuts
	// L ← L/√LowProbe and holds it from rising (default false: off). For a single service with a
	// heavy-tailed service time; not for a hop whose service time is a
	// chain's, where a slow downstream would hold the limit down.
	TailGuard bool `yaml:"tail_guard" json:"tail_guard"`
	// MedianProbe turns on the median test of the probes (see Auto): a
	// low probe whose median service time fell with its concurrency cuts
	// L ← L/√LowProbe, and a high probe whose median rose with its
	// concurrency does not raise L. Its signal is the queue inside the
	// service, which throughput windows miss behind a heavy-tailed
	// service time (default false: off).
	MedianProbe bool `yaml:"median_probe" json:"median_probe"`
	// Knee is how auto finds the service's parallelism W: "probes" (the
	// default, also "") uses the throughput probes alone; "overtakes"
	// also reads it from how many earlier requests a completion overtook
	// (Measurements.Parallel), where the service times vary enough to
	// show it, and caps L at it (see Auto and overtake.go).
	Knee string `yaml:"knee" json:"knee"`
	// KneeTolerance is, with Knee "overtakes", how far apart two requests
	// may be handed to the service, or their answers read, and still be
	// in either order at the service: a request is not counted as
	// overtaken by one that entered service less than half of it later,
	// nor by one that left less than it earlier. It is at most half the
	// mean time between completions (default 2ms; 0: the order as seen).
	KneeTolerance time.Duration `yaml:"knee_tolerance" json:"knee_tolerance"`
}

// DefaultConfig returns the defaults: SLO 500ms, Period 100ms,
// InitialLimit 16 within MinLimit 1 and MaxLimit 10000, HighProbe 1.5 and
// LowProbe 1.5, windows of MinCompletions 200 or MaxWindow 1s, Knee
// "probes" (KneeTolerance 2ms).
func DefaultConfig() Config {
	return Config{SLO: 500 * time.Millisecond, Period: 100 * time.Millisecond, InitialLimit: 16,
		MinLimit: 1, MaxLimit: 10000, HighProbe: 1.5, LowProbe: 1.5, MinCompletions: 200, MaxWindow: time.Second,
		Knee: KneeProbes, KneeTolerance: 2 * time.Millisecond}
}

// Validate reports the first invalid field.
func (c *Config) Validate() error {
	return fielderr.First(
		fielderr.PositiveDuration("slo", c.SLO, "250ms"),
		ctl.CheckPeriod("period", c.Period),
		fielderr.If(!mathx.Finite(c.MinLimit) || c.MinLimit < 1, "min_limit", c.MinLimit, "must be ≥ 1"),
		fielderr.If(!mathx.Finite(c.MaxLimit) || c.MaxLimit < c.MinLimit, "max_limit", c.MaxLimit, fmt.Sprintf("must be ≥ min_limit (%g)", c.MinLimit)),
		fielderr.Within("initial_limit", c.InitialLimit, '[', c.MinLimit, c.MaxLimit, ']'),
		fielderr.Within("high_probe", c.HighProbe, '(', 1, 4, ']'),
		fielderr.Within("low_probe", c.LowProbe, '(', 1, 4, ']'),
		fielderr.AtLeast("min_completions", c.MinCompletions, 1),
		fielderr.If(c.MaxWindow < c.Period, "max_window", c.MaxWindow, fmt.Sprintf("must be ≥ period (%v)", c.Period)),
		// The queue's, the guardrails' and the knee's settings.
		fielderr.If(c.StandingWait < 0 || c.StandingWait >= c.SLO, "standing_wait", c.StandingWait, "must be ≥ 0 and below slo"),
		fielderr.If(c.BurstWindow < 0 || c.BurstWindow > time.Minute, "burst_window", c.BurstWindow, "must be within [0, 1m] (0: off)"),
		fielderr.If(c.TailPool != 0 && (c.TailPool < 100 || c.TailPool > 1000000), "tail_pool", c.TailPool,
			"must be within [100, 1000000] service times (0: off)"),
		fielderr.If(!mathx.Finite(c.MinRate) || c.MinRate < 0, "min_rate", c.MinRate, "must be a rate ≥ 0 in req/s (0: off)"),
		fielderr.If(!mathx.Finite(c.MaxRejectFraction) || c.MaxRejectFraction < 0 || c.MaxRejectFraction > 1, "max_reject_fraction",
			c.MaxRejectFraction, "must be within (0, 1], or 0 for off"),
		fielderr.If(c.Warmup < 0, "warmup", c.Warmup, "must be ≥ 0 (0: off)"),
		fielderr.If(c.MaxHealthyLatency < 0, "max_healthy_latency", c.MaxHealthyLatency, "must be ≥ 0 (0: off)"),
		fielderr.If(c.Knee != "" && c.Knee != KneeOvertakes && c.Knee != KneeProbes, "knee", c.Knee,
			fmt.Sprintf("must be %q (the default) or %q", KneeProbes, KneeOvertakes)),
		fielderr.If(c.KneeTolerance < 0 || c.KneeTolerance >= c.SLO, "knee_tolerance", c.KneeTolerance,
			"must be ≥ 0 (0: the order as seen) and below slo"),
	)
}

// New validates the configuration and returns a controller.
func (c *Config) New() (sluice.Controller, error) { return New(*c) }

// Floor: min_limit, the fewest requests auto lets run at once. Auto's
// limit starts at initial_limit and stays where it is without evidence,
// so a limit held at min_limit means the backend missed the SLO even
// with that little concurrency.
func (c *Config) Floor() float64 { return c.MinLimit }

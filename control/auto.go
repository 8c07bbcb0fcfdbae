package control

import (
	"fmt"
	"math"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/mathx"
)

// AutoConfig configures the auto controller. Only the objective has to be
// chosen; DefaultAutoConfig gives working values for the rest.
type AutoConfig struct {
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
	// not stood for as long (see auto_queue.go; default 0: off, a standing
	// queue is trimmed at once).
	BurstWindow time.Duration `yaml:"burst_window" json:"burst_window"`
	// TailPool turns on the pooled tail estimate (a named option, off by
	// default): a standing queue past its burst allowance is sized from
	// the p99 of the latest TailPool service times, scaled up by how far
	// their median has moved since (R̂99ᴾ, see auto_tail.go), instead of
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
	// show it, and caps L at it (see Auto and auto_overtake.go).
	Knee string `yaml:"knee" json:"knee"`
	// KneeTolerance is, with Knee "overtakes", how far apart two requests
	// may be handed to the service, or their answers read, and still be
	// in either order at the service: a request is not counted as
	// overtaken by one that entered service less than half of it later,
	// nor by one that left less than it earlier. It is at most half the
	// mean time between completions (default 2ms; 0: the order as seen).
	KneeTolerance time.Duration `yaml:"knee_tolerance" json:"knee_tolerance"`
}

// DefaultAutoConfig returns the defaults: SLO 500ms, Period 100ms,
// InitialLimit 16 within MinLimit 1 and MaxLimit 10000, HighProbe 1.5 and
// LowProbe 1.5, windows of MinCompletions 200 or MaxWindow 1s, Knee
// "probes" (KneeTolerance 2ms).
func DefaultAutoConfig() AutoConfig {
	return AutoConfig{SLO: 500 * time.Millisecond, Period: 100 * time.Millisecond, InitialLimit: 16,
		MinLimit: 1, MaxLimit: 10000, HighProbe: 1.5, LowProbe: 1.5, MinCompletions: 200, MaxWindow: time.Second,
		Knee: KneeProbes, KneeTolerance: 2 * time.Millisecond}
}

// Validate reports the first invalid field.
func (c *AutoConfig) Validate() error {
	if err := checkTarget(c.SLO); err != nil {
		return badField("slo", c.SLO, "must be a positive duration such as 250ms")
	}
	if err := checkPeriod("period", c.Period); err != nil {
		return err
	}
	if !mathx.Finite(c.MinLimit) || c.MinLimit < 1 {
		return badField("min_limit", c.MinLimit, "must be ≥ 1")
	}
	if !mathx.Finite(c.MaxLimit) || c.MaxLimit < c.MinLimit {
		return badField("max_limit", c.MaxLimit, fmt.Sprintf("must be ≥ min_limit (%g)", c.MinLimit))
	}
	if err := checkRange("initial_limit", c.InitialLimit, c.MinLimit, c.MaxLimit); err != nil {
		return err
	}
	if !mathx.Finite(c.HighProbe) || c.HighProbe <= 1 || c.HighProbe > 4 {
		return badField("high_probe", c.HighProbe, "must be within (1, 4]")
	}
	if !mathx.Finite(c.LowProbe) || c.LowProbe <= 1 || c.LowProbe > 4 {
		return badField("low_probe", c.LowProbe, "must be within (1, 4]")
	}
	if c.MinCompletions < 1 {
		return badField("min_completions", c.MinCompletions, "must be ≥ 1")
	}
	if c.MaxWindow < c.Period {
		return badField("max_window", c.MaxWindow, fmt.Sprintf("must be ≥ period (%v)", c.Period))
	}
	if c.StandingWait < 0 || c.StandingWait >= c.SLO {
		return badField("standing_wait", c.StandingWait, "must be ≥ 0 and below slo")
	}
	if c.BurstWindow < 0 || c.BurstWindow > time.Minute {
		return badField("burst_window", c.BurstWindow, "must be within [0, 1m] (0: off)")
	}
	if c.TailPool != 0 && (c.TailPool < 100 || c.TailPool > 1000000) {
		return badField("tail_pool", c.TailPool, "must be within [100, 1000000] service times (0: off)")
	}
	if !mathx.Finite(c.MinRate) || c.MinRate < 0 {
		return badField("min_rate", c.MinRate, "must be a rate ≥ 0 in req/s (0: off)")
	}
	if !mathx.Finite(c.MaxRejectFraction) || c.MaxRejectFraction < 0 || c.MaxRejectFraction > 1 {
		return badField("max_reject_fraction", c.MaxRejectFraction, "must be within (0, 1], or 0 for off")
	}
	if c.Warmup < 0 {
		return badField("warmup", c.Warmup, "must be ≥ 0 (0: off)")
	}
	if c.MaxHealthyLatency < 0 {
		return badField("max_healthy_latency", c.MaxHealthyLatency, "must be ≥ 0 (0: off)")
	}
	if c.Knee != "" && c.Knee != KneeOvertakes && c.Knee != KneeProbes {
		return badField("knee", c.Knee, fmt.Sprintf("must be %q (the default) or %q", KneeProbes, KneeOvertakes))
	}
	if c.KneeTolerance < 0 || c.KneeTolerance >= c.SLO {
		return badField("knee_tolerance", c.KneeTolerance, "must be ≥ 0 (0: the order as seen) and below slo")
	}
	return nil
}

// New validates the configuration and returns a controller.
func (c *AutoConfig) New() (sluice.Controller, error) { return NewAuto(*c) }

// Auto is sluice's own adaptive mode, told only the objective (SLO). It
// combines a concurrency limit that finds the service's useful
// concurrency by itself with a short, deadline-bounded wait queue in
// front of it.
//
// The limit L caps the requests in service. A concurrency limit follows a
// service that gets slower or faster by itself (the same L serves fewer or
// more requests per second), so L only has to track the service's
// parallelism W: the number in service beyond which the service time
// grows instead of the throughput X. While demand fills the limit, auto
// measures X in windows of MinCompletions completions (or MaxWindow),
// each after the number in service has settled on the window's limit, in
// the cycle
//
//	base (L) → high probe (a·L) → base → low probe (L/b) → …
//
// and compares each probe with the base window before it (r = X_probe/X_base):
//
//	high probe, r ≥ 0.9·a        ⇒  L ← a·L, the whole gain (the
//	                                 service was not saturated; the
//	                                 high probe's gain doubles, up to 4,
//	                                 while growth repeats)
//	high probe, r ≥ 1 + (a−1)/2  ⇒  L ← max(L, √b·r·L): part of the
//	                                 gain puts the knee at W ≈ r·L
//	low probe,  r ≥ 1 − (1−1/b)/4   ⇒  L ← L/√b (less concurrency would do)
//	low probe,  r < 1 − 3(1−1/b)/4  ⇒  L ← L·√b (the knee is close: step back)
//
// and holds L otherwise. A high probe's gain counts only when the next
// high probe confirms it (one window's gain may be noise), and a base
// window whose mean service time exceeds SLO/4 cuts L in proportion,
// L ← L·(SLO/4)/R (at most halving it): by Little's law such a limit only
// queues inside the service. The cut comes back when its cause is gone:
// a step whose tail estimate T is below SLO/4 raises L ← min(L₀,
// n̄·(SLO/4)/T) towards the limit L₀ it cut from, n̄ the step's mean in
// service (auto_uncut.go). The thresholds are a fixed fraction of the change
// each probe could make, so the same test works whatever the service's
// speed, and a change of capacity between two windows moves both ratios
// the same way. At equilibrium L sits between √b·W and b·W: the low probe
// finds the knee, the service stays busy, and the queue inside the service
// stays below (a·b − 1)·W during a high probe and (b − 1)·W otherwise.
// The limit is clamped to [MinLimit, MaxLimit].
//
// The tail guard (TailGuard, off by default; for heavy-tailed service): a
// base window ending while
// R̂99 > SLO − w_s (w_s the standing wait below) cuts L ← L/√b, and no
// step raises L meanwhile. The service time auto measures includes the
// queue inside the service, which a limit above the service's
// parallelism W builds; with a heavy tail a request queued there waits
// behind a long one, and the p99 leaves a standing queue no room under
// the SLO. Cutting towards W removes that queue; the service's own tail
// then bounds what is left. Throughput probes are noisy with heavy tails
// (a window of 200 lognormal σ 1.5 service times has a coefficient of
// variation of 0.2), which is how L drifts above W in the first place.
//
// The wait queue is the stage's (class 0 first; a full queue sheds the
// lowest class). Each step sets how long a new arrival may wait,
//
//	MaxWait = max(SLO − 1.1·R̂99, (SLO − R̂99)/2) for a burst,
//	MaxWait = min(StandingWait or max(R̂, SLO/10), max((SLO − T)/2, min(R̂, SLO − T))) while it stands,
//	MaxWait = max((SLO − R̂99)/2, min(R̂, SLO − R̂99)) for an overload's first BurstWindow (auto_queue.go),
//
// where T = R̂99, or with TailPool the pooled estimate R̂99ᴾ and
// min(R̂, SLO − 1.1·T) (auto_tail.go), R̂ is a running mean of the mean
// service time and R̂99 of the p99
// (each step's p99 taken as the largest over the latest steps that hold
// at least 56 samples, so that a step of 30 samples does not report its
// p97; over every completion, Measurements.ServiceTailP99, not only the
// window's since its fence, which a long request is the likelier to
// straddle; with TailGuard a rise is taken at once, R̂99 = max(p99, EWMA), so
// that the wait allowed never trails a service that just got slower).
// Under a standing overload, and in a crowd's first second, most
// admitted requests wait about MaxWait, so their p99 is about MaxWait +
// R̂99: a burst leaves 10 % of R̂99 for the estimate's error (tailMargin),
// and a standing queue gets at most half the room the tail leaves, but
// not less than one mean service time where the room has it (a shorter
// queue leaves a worker idle from a completion to the next arrival)
// (behind lognormal σ 1.5 service of 20 ms, p99 213 ms, an SLO of 250 ms
// leaves 37 ms, and a wait of 25 ms put the admitted p99 at 245–260 ms),
// and in its burst allowance the same without the standing wait's bound;
// the queue stands when the offered rate exceeds the drain rate L/R̂ or it
// did not empty in the last step. The stage rejects at once a request
// whose predicted wait (ahead+1)·R̂/L exceeds MaxWait. So a flash crowd is
// cut at the queue, at once, by the requests' own count rather than a
// lagging percentile; admitted answers meet the SLO; and a standing
// overload keeps only about L requests queued (CoDel's lesson: a standing
// queue adds latency and no throughput).
//
// Without samples (no traffic, or a service whose requests all fail or
// time out) and while demand does not fill the limit, auto holds L: it
// never drifts to its floor or up for lack of evidence, and rejections,
// failures and timeouts are never samples (but a high probe that demand
// did not fill, n̄ > 1.1·L, whose throughput grew in proportion to n̄,
// X_probe/X_base ≥ 0.9·n̄/n̄_base, sets L ← ⌈n̄⌉: the service serves all
// the concurrency the demand brings). It needs no response-time
// target for its limit, has no integrator to wind up, and runs the same
// live and in the simulator.
//
// By priority (a stage with several classes, stage.Priority): the stage's
// wait queue serves the highest class first and a full queue evicts the
// lowest class's newest waiter; while Auto's MaxWait leaves no queue, the
// stage's class thresholds keep the top of the limit for the higher
// classes. The law above is the same for every class.
//
// The knee from overtakes (Knee "overtakes", off by default; see
// auto_overtake.go): behind W workers serving their queue in order, no
// request leaving service overtakes more than W − 1 earlier requests
// still in service, so a window whose completions overtook fewer than the
// concurrency it ran at shows W, k = max Parallel, and L ← min(L, k);
// while k is known the low probe (which would only lose throughput below
// it) is skipped and the high probe goes to at most max(⌈1.25·k⌉, k + 1).
// It is read only where the service times vary (R̂99 ≥ 3 × the median),
// and it is what holds L at W behind a heavy-tailed service time, whose
// throughput windows are noise. A window at the cap keeps one request on
// deck inside the service (decision limit k + 1, L unchanged) while the
// tail leaves half the SLO, max(R̂99, the latest step's) ≤ SLO/2, so that
// no worker idles from a completion to the next arrival. Estimates knee
// (k; 0: unknown) and deck (1 or 0).
//
// The median test (MedianProbe, off by default; see auto_median.go): a
// low probe whose median service time fell by at least half as much as
// its concurrency cuts L ← L/√b (the base queued inside the service), and
// a high probe whose median rose by at least half as much as its
// concurrency does not raise L. Throughput windows are noise behind a
// heavy-tailed service time; the median is not, and it moves with the
// queue inside the service.
//
// Guardrails, each off by default, each shown in Estimates (the admin
// API's /state and the sluice_estimate metric):
//
//   - MinRate (Envoy admission control's rps_threshold): while the last
//     step's offered rate λ = arrivals/elapsed is below MinRate, the
//     decision opens the gate (GateOff): nothing is shed at low traffic,
//     where a rejection costs more trust than it saves capacity. The
//     windows pause (the one in progress starts again) so that open-gate
//     traffic does not judge a probe. Estimate min_rate_open (1 or 0).
//   - MaxRejectFraction f (Envoy's max_rejection_probability): the
//     decision carries f and the stage admits past the limit any request
//     that would make the rejections of the current step exceed f of its
//     arrivals (a fail-open bound for a controller that misjudges).
//     Estimate max_reject_fraction; the stage counts what it let through.
//   - Warmup D: for D after the first Update (a stage starts, or a reload
//     that changes the stage builds a new controller; an unchanged stage
//     keeps its controller), a high probe's gain is taken at once without
//     a confirming window and the probe ratio starts at 4: from
//     InitialLimit the limit can grow 4× per base and high window, e.g.
//     16 → 64 → 256 within about four windows of a busy service (the
//     fast start asked of concurrency-limits). Estimate warmup_left_s.
//   - MaxHealthyLatency: while R̂99 is above it, no step raises L (a high
//     probe that gains is held, a low probe that loses does not step
//     back); the Little's-law cut and the low probe may still lower it.
//     Estimate latency_guard (1 while it holds the limit down).
type Auto struct {
	cfg     AutoConfig
	limit   float64 // L
	gain    float64 // the high probe's gain a (doubles while growth repeats)
	pending bool    // the last high probe gained: the next gain is growth
	step    int     // position in the cycle: base, high, base, high, base, low
	win     autoWindow
	base    autoWindow // the last judged base window
	rMean   float64    // R̂, s (NaN until known)
	rP99    float64    // R̂99, s
	tail    tailRing   // the latest periods' service p99s, for R̂99
	tailNow float64    // the latest step's tail estimate, s (the deck's)
	rPool   float64    // the pool's p99 with TailPool, s (NaN until known, or off)
	shift   float64    // the median's shift: R̂99ᴾ = rPool·shift (1: none)
	cur     sluice.Decision

	started  time.Time               // the first Update's now (zero before it)
	warmLeft float64                 // s of Warmup left after the last step
	open     bool                    // MinRate holds the gate open
	latGuard bool                    // MaxHealthyLatency holds L from rising
	knee     float64                 // Ŵ, the parallelism the overtakes showed (0: unknown)
	kSeen    [overtakeMemory]float64 // k of the latest windows that read it (overtakeCap)
	kNext    int
	share    float64 // the last judged window's backend share s (overtakes; 0: none yet)
	queue    queueState
	cutFrom  float64 // L before the latest run of Little's-law cuts (0: none; auto_uncut.go)
	cut      bool    // the window just judged made a Little's-law cut
}

// tailMargin is the relative error of R̂99 that a burst's wait leaves
// room for: MaxWait = SLO − (1 + tailMargin)·R̂99 (but at least half of
// SLO − R̂99). A crowd's first second waits about MaxWait, so its p99 is
// about MaxWait + R̂99, and R̂99 is a p99 of a few hundred samples.
const tailMargin = 0.1

// autoWindow accumulates the measurements of one window.
type autoWindow struct {
	limit    float64 // the window's limit
	settled  bool    // the settling part is over: measuring
	elapsed  float64 // s
	done     float64 // successful completions
	inFlight float64 // ∫ n dt, request·s
	samples  float64 // service-time samples
	sumR     float64 // Σ samples·mean service time, s
	p50n     float64 // service-time samples behind sumP50
	sumP50   float64 // Σ samples·median service time of each step, s
	par      float64 // the largest Parallel of its steps (0: none)
	shareSum float64 // Σ completions·BackendShare over the steps that measured it
	shareN   float64 // the completions behind shareSum
	peak     float64 // the largest MaxInFlight of its steps
}

func (w autoWindow) x() float64     { return w.done / w.elapsed }
func (w autoWindow) meanN() float64 { return w.inFlight / w.elapsed }
func (w autoWindow) meanR() float64 { return w.sumR / w.samples }

var _ sluice.Controller = (*Auto)(nil)

// NewAuto returns an auto controller for a validated copy of cfg.
func NewAuto(cfg AutoConfig) (*Auto, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	a := &Auto{cfg: cfg, limit: cfg.InitialLimit, gain: cfg.HighProbe, rMean: math.NaN(), rP99: math.NaN(),
		rPool: math.NaN(), shift: 1}
	a.win.limit = a.windowLimit()
	a.cur = sluice.Decision{Controller: "auto", Kind: sluice.KindConcurrency, Old: a.win.limit, New: a.win.limit,
		MaxWait: cfg.SLO / 2, Acted: true,
		Reason: fmt.Sprintf("initial: limit %g; nothing measured yet, a request may wait up to SLO/2 = %v", cfg.InitialLimit, cfg.SLO/2)}
	return a, nil
}

// Period returns the step period.
func (a *Auto) Period() time.Duration { return a.cfg.Period }

// Current returns the setting in force.
func (a *Auto) Current() sluice.Decision { return a.cur }

// Target returns the SLO (auto is Targeted: the admin API changes it).
func (a *Auto) Target() time.Duration { return a.cfg.SLO }

// SetTarget sets the SLO from the next step on.
func (a *Auto) SetTarget(slo time.Duration) error {
	if err := checkTarget(slo); err != nil {
		return badField("slo", slo, "must be a positive duration such as 250ms")
	}
	if a.cfg.StandingWait >= slo {
		return badField("slo", slo, fmt.Sprintf("must be above standing_wait (%v)", a.cfg.StandingWait))
	}
	a.cfg.SLO = slo
	return nil
}

// Limit returns L, the concurrency limit the probes are taken around.
func (a *Auto) Limit() float64 { return a.limit }

// Estimates returns the controller's estimates for the admin API: the
// limit L, the throughput of the last base window in req/s, and the
// running mean and p99 service times in seconds (NaN while unknown).
func (a *Auto) Estimates() map[string]float64 {
	e := map[string]float64{"limit": a.limit, "throughput_rps": a.base.x(),
		"service_mean_s": a.rMean, "service_p99_s": a.rP99, "cut_from": a.cutFrom}
	if a.cfg.MinRate > 0 {
		e["min_rate_open"] = b2f(a.open)
	}
	if a.cfg.MaxRejectFraction > 0 {
		e["max_reject_fraction"] = a.cfg.MaxRejectFraction
	}
	if a.cfg.Warmup > 0 {
		e["warmup_left_s"] = a.warmLeft
	}
	if a.cfg.MaxHealthyLatency > 0 {
		e["latency_guard"] = b2f(a.latGuard)
	}
	if a.cfg.BurstWindow > 0 {
		e["burst_left_s"] = a.queue.burstLeft
	}
	if a.cfg.TailPool > 0 {
		e["service_p99_pooled_s"] = a.rPool
		e["service_median_shift"] = a.shift
	}
	if a.cfg.kneeFromOvertakes() {
		e["knee"] = a.knee
		e["backend_share"] = a.share
		e["deck"] = a.deck(a.win.limit)
	}
	return e
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// warming reports whether the warm-up is in force.
func (a *Auto) warming() bool { return a.warmLeft > 0 }

// mayRaise reports whether L may rise: neither the latency guard
// (MaxHealthyLatency) nor the tail (tailRoom) holds it.
func (a *Auto) mayRaise() bool {
	return !a.latGuard && !(a.cfg.TailGuard && usable(a.rP99) && a.rP99 > a.tailRoom())
}

// tailRoom is the service-time p99 that leaves a standing queue its wait
// below the SLO: SLO − standing wait, in s.
func (a *Auto) tailRoom() float64 { return a.cfg.SLO.Seconds() - a.standingWait() }

// tailCut is the tail guard, run when a window is judged: a service-time
// p99 above tailRoom leaves a standing queue no room under the SLO, and
// above the service's parallelism the excess of L only queues inside the
// service, where a heavy tail makes it costly (a request behind a long
// one). It cuts L ← L·tailRoom/R̂99, at most by half.
func (a *Auto) tailCut() (string, bool) {
	room := a.tailRoom()
	if !a.cfg.TailGuard || !usable(a.rP99) || a.rP99 <= room || a.limit <= a.cfg.MinLimit {
		return "", false
	}
	old := a.limit
	a.limit = clamp(a.limit/math.Sqrt(a.cfg.LowProbe), a.cfg.MinLimit, a.cfg.MaxLimit)
	return fmt.Sprintf("L %.4g → %.4g: service p99 %s is over SLO − standing wait (%s)", old, a.limit, fmtSec(a.rP99), fmtSec(room)), true
}

// windowLimit returns the limit of the window at the current step.
func (a *Auto) windowLimit() float64 {
	switch a.step {
	case 1, 3:
		return clamp(a.highProbe(math.Ceil(a.limit*a.gain)), a.cfg.MinLimit, a.cfg.MaxLimit)
	case 5:
		return clamp(math.Round(a.limit/a.cfg.LowProbe), a.cfg.MinLimit, a.cfg.MaxLimit)
	}
	return clamp(math.Round(a.limit), a.cfg.MinLimit, a.cfg.MaxLimit)
}

// Update runs one step: it settles or measures the window in progress,
// judges it once it is complete, and sets the limit and the queue policy.
func (a *Auto) Update(now time.Time, m sluice.Measurements) sluice.Decision {
	old := a.cur.New
	if n := m.ServiceSamples; n > 0 && usable(m.ServiceMean) && usable(m.ServiceP99) {
		a.rMean = ewma(a.rMean, m.ServiceMean, 0.3)
		// R̂99 from every completion where the stage measures it: the
		// window's fences drop the long requests that straddle them. The
		// tail guard (a named option) reads the window's samples as it
		// was designed on: it cuts L while the tail is over its room,
		// and every completion's tail, the service's own included, would
		// hold it below the service's parallelism.
		p99 := m.ServiceP99
		if !a.cfg.TailGuard && m.ServiceTailSamples > 0 && usable(m.ServiceTailP99) {
			p99, n = m.ServiceTailP99, m.ServiceTailSamples
		}
		// With the tail guard a rising tail is taken at once, a falling
		// one smoothed: the wait allowed must not trail a service that
		// just got slower.
		est := a.tail.add(p99, n)
		a.tail.addMedian(m.ServiceP50, m.ServiceSamples)
		a.tailNow = est
		if a.cfg.TailPool > 0 {
			a.rPool, a.shift = a.tail.pooledTail(a.cfg.TailPool)
		}
		a.rP99 = ewma(a.rP99, est, 0.3)
		if a.cfg.TailGuard {
			a.rP99 = math.Max(est, a.rP99)
		}
	}
	el := m.Elapsed.Seconds()
	if !(el > 0) || !mathx.Finite(el) {
		el = 0
	}
	if a.started.IsZero() {
		a.started = now
	}
	a.warmLeft = math.Max(0, (a.cfg.Warmup - now.Sub(a.started)).Seconds())
	a.latGuard = a.cfg.MaxHealthyLatency > 0 && usable(a.rP99) && a.rP99 > a.cfg.MaxHealthyLatency.Seconds()
	if a.cfg.MinRate > 0 {
		a.open = el > 0 && m.Arrivals/el < a.cfg.MinRate
		if a.open {
			// Nothing is shed; the window in progress starts again once
			// the gate closes.
			a.win = autoWindow{limit: a.win.limit}
			a.cur = decision(now, "auto", sluice.KindConcurrency, m, old, a.win.limit, false,
				fmt.Sprintf("gate open: offered %s below min_rate %s", fmtRate(m.Arrivals/el), fmtRate(a.cfg.MinRate)))
			a.cur.GateOff, a.cur.MaxWait, a.cur.MaxReject = true, a.cfg.SLO/2, a.cfg.MaxRejectFraction
			return a.cur
		}
	}
	why, fence := "", false
	if w, ok := a.uncut(m); ok {
		why = w
	} else if !a.win.settled {
		// A window starts by settling: the number in service reaches the
		// new limit (requests admitted under the old one leave), for at
		// least one service time and one step.
		a.win.elapsed += el
		settle := a.cfg.Period.Seconds()
		if usable(a.rMean) {
			settle = math.Max(settle, a.rMean)
		}
		drained := !usable(m.MaxInFlight) || m.MaxInFlight <= a.withDeck(a.win.limit)
		if a.win.elapsed >= settle-1e-9 && drained {
			a.win = autoWindow{limit: a.win.limit, settled: true}
			fence = true
			why = fmt.Sprintf("window %g settled; measuring", a.win.limit)
		} else {
			why = fmt.Sprintf("window %g settling", a.win.limit)
		}
	} else {
		a.win.elapsed += el
		if usable(m.InFlight) {
			a.win.inFlight += m.InFlight * el
		}
		ok := m.Completed - math.Max(m.Failed, 0) // successful completions
		if usable(ok) {
			a.win.done += ok
		}
		if usable(m.Parallel) && m.Parallel > a.win.par {
			a.win.par = m.Parallel
		}
		if usable(m.BackendShare) && m.BackendShare > 0 && usable(ok) && ok > 0 {
			a.win.shareSum += ok * m.BackendShare
			a.win.shareN += ok
		}
		if usable(m.MaxInFlight) && m.MaxInFlight > a.win.peak {
			a.win.peak = m.MaxInFlight
		}
		if n := m.ServiceSamples; n > 0 && usable(m.ServiceMean) {
			a.win.samples += n
			a.win.sumR += n * m.ServiceMean
		}
		if n := m.ServiceSamples; n > 0 && usable(m.ServiceP50) {
			a.win.p50n += n
			a.win.sumP50 += n * m.ServiceP50
		}
		minTime := a.cfg.Period.Seconds()
		if usable(a.rMean) {
			minTime = math.Max(minTime, 2*a.rMean)
		}
		full := a.win.done >= float64(a.cfg.MinCompletions) && a.win.elapsed >= minTime-1e-9
		if full || a.win.elapsed >= a.cfg.MaxWindow.Seconds()-1e-9 {
			before := a.limit
			a.cut = false
			why = a.judge()
			if (a.limit < before && !a.cut) || a.limit >= a.cutFrom {
				// A probe that lowered L found less parallelism than
				// the cut's limit assumed (auto_uncut.go).
				a.cutFrom = 0
			}
			a.win = autoWindow{limit: a.windowLimit()}
		} else {
			why = fmt.Sprintf("window %g measuring (%g of %d completions)", a.win.limit, a.win.done, a.cfg.MinCompletions)
		}
	}
	limit := a.withDeck(a.win.limit)
	if limit > a.win.limit {
		why += fmt.Sprintf("; %g on deck above the knee %.3g", limit-a.win.limit, a.knee)
	}
	maxWait, drain, queue := a.queuePolicy(now, m, limit)
	a.cur = decision(now, "auto", sluice.KindConcurrency, m, old, limit, limit != old, why+"; "+queue)
	a.cur.MaxWait, a.cur.Drain, a.cur.Fence, a.cur.MaxReject = maxWait, drain, fence, a.cfg.MaxRejectFraction
	return a.cur
}

// judge ends the window in progress and moves the cycle (and maybe L).
func (a *Auto) judge() string {
	w := a.win
	x, n := w.x(), w.meanN()
	if w.done < 10 || !usable(x) {
		a.step = 0
		return fmt.Sprintf("hold L %.4g: window %g without enough completions (%g)", a.limit, w.limit, w.done)
	}
	if why, cut := a.overtakeCap(w); cut {
		return why
	}
	if why, grew := a.overtakeUnfilled(w); grew {
		return why
	}
	if n < 0.8*w.limit && (a.step == 1 || a.step == 3) && a.base.done > 0 &&
		n > 1.1*a.limit && x/a.base.x() >= 0.9*n/a.base.meanN() && a.mayRaise() {
		// A high probe that demand did not fill, whose throughput grew
		// with the number in service: the service serves all of the
		// demand's concurrency, so the limit takes it at once (in the
		// warm-up, and after a change that gave the service more
		// parallelism; holding the base there turned away what the
		// service could serve for another cycle of probes).
		old := a.limit
		a.limit = clamp(math.Ceil(n), a.cfg.MinLimit, a.cfg.MaxLimit)
		a.step, a.gain, a.pending = 0, a.cfg.HighProbe, false
		return fmt.Sprintf("L %.4g → %.4g: high probe %g was not filled (n̄ %.3g), and %.4g req/s vs %.4g grew with it", old, a.limit, w.limit, n, x, a.base.x())
	}
	if n < 0.8*w.limit {
		// Demand did not fill the window: it says nothing about the
		// service's parallelism.
		a.step, a.gain = 0, a.cfg.HighProbe
		return fmt.Sprintf("hold L %.4g: demand below the limit (n̄ %.3g of %g, %.4g req/s)", a.limit, n, w.limit, x)
	}
	switch a.step {
	case 0, 2, 4:
		if why, cut := a.tailCut(); cut {
			a.step, a.gain, a.pending = 0, a.cfg.HighProbe, false
			return why
		}
		a.base = w
		a.step++
		if a.step == 5 && a.knee > 0 && a.limit/a.cfg.LowProbe < a.knee {
			// The overtakes put the knee above the low probe, which
			// would only lose throughput below it.
			a.step = 0
		}
		// Little's law above the knee: R = L/X. A limit whose service time
		// alone eats more than a quarter of the SLO queues inside the
		// service for nothing: cut it in proportion.
		if r := w.meanR(); w.samples > 0 && r > a.cfg.SLO.Seconds()/4 && a.limit > 2*a.cfg.MinLimit {
			old := a.limit
			a.limit = clamp(a.limit*a.cfg.SLO.Seconds()/(4*r), math.Max(a.cfg.MinLimit, a.limit/2), a.cfg.MaxLimit)
			a.step, a.cut = 0, true
			if a.cutFrom == 0 {
				a.cutFrom = old
			}
			return fmt.Sprintf("L %.4g → %.4g: base %g: service time %s is over SLO/4 (%.4g req/s)", old, a.limit, w.limit, fmtSec(r), x)
		}
		return fmt.Sprintf("base %g: %.4g req/s, n̄ %.3g, R %s", w.limit, x, n, fmtSec(w.meanR()))
	case 1, 3:
		a.step++
		r := x / a.base.x()
		old := a.limit
		if why, grew := a.overtakeGrow(w); grew {
			return why
		}
		if why, held := a.medianHeld(w); held {
			a.gain, a.pending = a.cfg.HighProbe, false
			return why
		}
		if !a.mayRaise() {
			a.gain, a.pending = a.cfg.HighProbe, false
			return fmt.Sprintf("hold L %.4g: high probe %g gave %.4g req/s vs %.4g (×%.3f), but service p99 %s is over max_healthy_latency %v",
				a.limit, w.limit, x, a.base.x(), r, fmtSec(a.rP99), a.cfg.MaxHealthyLatency)
		}
		if r < 1+(a.cfg.HighProbe-1)/2 {
			a.gain, a.pending = a.cfg.HighProbe, false
			return fmt.Sprintf("hold L %.4g: high probe %g gave %.4g req/s vs %.4g at %g (×%.3f)", a.limit, w.limit, x, a.base.x(), a.base.limit, r)
		}
		if !a.pending && !a.warming() {
			// One window's gain may be noise: probe again before growing
			// (not during the warm-up: a fast start).
			a.pending = true
			return fmt.Sprintf("L %.4g: high probe %g gave %.4g req/s vs %.4g at %g (×%.3f): confirm", a.limit, w.limit, x, a.base.x(), a.base.limit, r)
		}
		if r >= 0.9*w.limit/a.base.limit {
			// The whole gain: W is at least the probe. Take it as the new
			// limit and base, and probe twice as far next (slow start).
			a.limit = clamp(math.Max(a.limit, w.limit), a.cfg.MinLimit, a.cfg.MaxLimit)
			a.gain = math.Min(4, a.gain*2)
			a.base, a.step = w, 1
			return fmt.Sprintf("L %.4g → %.4g: high probe %g gave %.4g req/s vs %.4g at %g (×%.3f): grow, next probe ×%g", old, a.limit, w.limit, x, a.base.x(), a.base.limit, r, a.gain)
		}
		// Part of the gain: X ∝ min(n, W) puts the knee at W ≈ r·L_base;
		// the limit goes to √b·W, where the low probe sits just below it.
		a.limit = clamp(math.Max(a.limit, math.Sqrt(a.cfg.LowProbe)*r*a.base.limit), a.cfg.MinLimit, a.cfg.MaxLimit)
		a.gain, a.pending = a.cfg.HighProbe, false
		return fmt.Sprintf("L %.4g → %.4g: high probe %g gave %.4g req/s vs %.4g at %g (×%.3f): knee near %.3g", old, a.limit, w.limit, x, a.base.x(), a.base.limit, r, r*a.base.limit)
	default:
		a.step = 0
		r := x / a.base.x()
		old := a.limit
		loss := 1 - 1/a.cfg.LowProbe // the most the low probe can lose
		if why, cut := a.medianCut(w); cut {
			return why
		}
		switch {
		case r >= 1-loss/4:
			a.limit = clamp(math.Max(a.limit/math.Sqrt(a.cfg.LowProbe), a.knee), a.cfg.MinLimit, a.cfg.MaxLimit)
			return fmt.Sprintf("L %.4g → %.4g: low probe %g kept %.4g req/s vs %.4g at %g (×%.3f): shrink", old, a.limit, w.limit, x, a.base.x(), a.base.limit, r)
		case r < 1-loss*3/4 && a.mayRaise():
			a.limit = clamp(a.limit*math.Sqrt(a.cfg.LowProbe), a.cfg.MinLimit, a.cfg.MaxLimit)
			return fmt.Sprintf("L %.4g → %.4g: low probe %g lost: %.4g req/s vs %.4g at %g (×%.3f): the knee is close, step back", old, a.limit, w.limit, x, a.base.x(), a.base.limit, r)
		}
		return fmt.Sprintf("hold L %.4g: low probe %g gave %.4g req/s vs %.4g at %g (×%.3f)", a.limit, w.limit, x, a.base.x(), a.base.limit, r)
	}
}

// ewma returns a·x + (1−a)·prev, or x when prev is NaN.
func ewma(prev, x, a float64) float64 {
	if math.IsNaN(prev) {
		return x
	}
	return a*x + (1-a)*prev
}

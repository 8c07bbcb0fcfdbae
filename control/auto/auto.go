// SPDX-License-Identifier: Apache-2.0

package auto

import (
	"fmt"
	"math"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/control/internal/ctl"
	"github.com/sluicehq/sluice/internal/fielderr"
	"github.com/sluicehq/sluice/internal/mathx"
)

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
// service (uncut.go). Between windows, Little's law on every 10
// completions, R = ∫n dt / completions, cuts L ← max(X·SLO/4, n̄/2) when
// R is over SLO/4, twice R̂ and R̂99 while R̂ is over SLO/8: a queue
// growing inside a service that just slowed down, which the completions
// show only later (early.go). The thresholds are a fixed fraction of the change
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
//	MaxWait = max((SLO − R̂99)/2, min(R̂, SLO − R̂99)) for an overload's first BurstWindow (queue.go),
//
// where T = R̂99, or with TailPool the pooled estimate R̂99ᴾ and
// min(R̂, SLO − 1.1·T) (tail.go), R̂ is a running mean of the mean
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
// overtake.go): behind W workers serving their queue in order, no
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
// The median test (MedianProbe, off by default; see median.go): a
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
	cfg     Config
	limit   float64 // L
	gain    float64 // the high probe's gain a (doubles while growth repeats)
	pending bool    // the last high probe gained: the next gain is growth
	phase   phase   // position in the cycle: base, high, base, high, base, low
	win     window  // the window in progress
	base    window  // the last judged base window
	est     estimates
	guard   guardrails
	cur     sluice.Decision

	knee    kneeState // the knee from overtakes (overtake.go)
	queue   queueState
	cutFrom float64 // L before the latest run of Little's-law cuts (0: none; uncut.go)
	cut     bool    // the window just judged made a Little's-law cut

	early earlySum // the early cut's sum (early.go)
}

// tailMargin is the relative error of R̂99 that a burst's wait leaves
// room for: MaxWait = SLO − (1 + tailMargin)·R̂99 (but at least half of
// SLO − R̂99). A crowd's first second waits about MaxWait, so its p99 is
// about MaxWait + R̂99, and R̂99 is a p99 of a few hundred samples.
const tailMargin = 0.1

var _ sluice.Controller = (*Auto)(nil)

// New returns an auto controller for a validated copy of cfg.
func New(cfg Config) (*Auto, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	a := &Auto{cfg: cfg, limit: cfg.InitialLimit, gain: cfg.HighProbe, est: newEstimates(), early: earlySum{r: math.NaN()}}
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
	if err := fielderr.PositiveDuration("slo", slo, "250ms"); err != nil {
		return err
	}
	if a.cfg.StandingWait >= slo {
		return fielderr.Invalid("slo", slo, fmt.Sprintf("must be above standing_wait (%v)", a.cfg.StandingWait))
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
		"service_mean_s": a.est.rMean, "service_p99_s": a.est.rP99, "cut_from": a.cutFrom, "little_r_s": a.early.r}
	a.guard.estimates(&a.cfg, e)
	if a.cfg.BurstWindow > 0 {
		e["burst_left_s"] = a.queue.burstLeft
	}
	if a.cfg.TailPool > 0 {
		e["service_p99_pooled_s"] = a.est.rPool
		e["service_median_shift"] = a.est.shift
	}
	if a.cfg.kneeFromOvertakes() {
		e["knee"] = a.knee.w
		e["backend_share"] = a.knee.share
		e["deck"] = a.deck(a.win.limit)
	}
	return e
}

// Update runs one step: it folds the step's service times into the
// estimates, steps the guardrails, settles or measures the window in
// progress and judges it once it is complete, and sets the limit and the
// queue policy.
func (a *Auto) Update(now time.Time, m sluice.Measurements) sluice.Decision {
	old := a.cur.New
	a.est.observe(m, a.cfg.TailGuard, a.cfg.TailPool)
	el := m.Elapsed.Seconds()
	if !(el > 0) || !mathx.Finite(el) {
		el = 0
	}
	a.guard.step(&a.cfg, now, m, el, a.est.rP99)
	if a.guard.open {
		return a.gateOpen(now, m, old, el)
	}
	why, fence := a.advance(m, el)
	return a.decide(now, m, old, why, fence)
}

// gateOpen is the step while MinRate holds the gate open: nothing is
// shed, and the window in progress starts again once the gate closes.
func (a *Auto) gateOpen(now time.Time, m sluice.Measurements, old, el float64) sluice.Decision {
	a.win = window{limit: a.win.limit}
	a.cur = ctl.Decision(now, "auto", sluice.KindConcurrency, m, old, a.win.limit, false,
		fmt.Sprintf("gate open: offered %s below min_rate %s", ctl.FmtRate(m.Arrivals/el), ctl.FmtRate(a.cfg.MinRate)))
	a.cur.GateOff, a.cur.MaxWait, a.cur.MaxReject = true, a.cfg.SLO/2, a.cfg.MaxRejectFraction
	return a.cur
}

// advance moves the window in progress by one step of el seconds: the
// early cut may restart it at a lower limit (early.go), the uncut at a
// higher one, else it settles or measures,
// and a measured window that is complete is judged. It returns the
// reason and whether the window's measurement starts now (the stage's
// fence).
func (a *Auto) advance(m sluice.Measurements, el float64) (why string, fence bool) {
	if why, ok := a.earlyCut(m, el); ok {
		return why, false
	}
	if why, ok := a.uncut(m); ok {
		return why, false
	}
	if !a.win.settled {
		return a.settle(m, el)
	}
	return a.measure(m, el), false
}

// settle runs a step of a window's settling part: the number in service
// reaches the new limit (requests admitted under the old one leave), for
// at least one service time and one step, or MaxWindow has passed. It
// reports whether the window settled (and its measurement starts).
//
// The bound: the number in service may stay above the window's limit for
// good. A stage with several classes lets the highest class past a
// limit that rejects at once (stage.Priority's reserve, L + ⌈0.3·L⌉
// while auto's SLO leaves no time to wait), and under a steady flow of
// that class the peak never comes down to L. A window that waited for it
// froze auto: in virtual time, in graph-hotel's cost-10 (one API's calls
// ten times costlier), the shared backend's limit sat at 4 with 6 calls
// in its worker queue, settling, for the whole 20 s (lab/NOTEBOOK.md,
// graph-hotel).
func (a *Auto) settle(m sluice.Measurements, el float64) (string, bool) {
	a.win.elapsed += el
	settle := a.cfg.Period.Seconds()
	if mathx.Usable(a.est.rMean) {
		settle = math.Max(settle, a.est.rMean)
	}
	drained := !mathx.Usable(m.MaxInFlight) || m.MaxInFlight <= a.withDeck(a.win.limit) ||
		a.win.elapsed >= a.cfg.MaxWindow.Seconds()-1e-9
	if a.win.elapsed >= settle-1e-9 && drained {
		a.win = window{limit: a.win.limit, settled: true}
		return fmt.Sprintf("window %g settled; measuring", a.win.limit), true
	}
	return fmt.Sprintf("window %g settling", a.win.limit), false
}

// measure adds a step to the window in progress and judges it once it
// holds MinCompletions successful completions over at least one period
// and two mean service times, or has run for MaxWindow.
func (a *Auto) measure(m sluice.Measurements, el float64) string {
	a.win.add(m, el)
	minTime := a.cfg.Period.Seconds()
	if mathx.Usable(a.est.rMean) {
		minTime = math.Max(minTime, 2*a.est.rMean)
	}
	full := a.win.done >= float64(a.cfg.MinCompletions) && a.win.elapsed >= minTime-1e-9
	if full || a.win.elapsed >= a.cfg.MaxWindow.Seconds()-1e-9 {
		return a.endWindow()
	}
	return fmt.Sprintf("window %g measuring (%g of %d completions)", a.win.limit, a.win.done, a.cfg.MinCompletions)
}

// endWindow judges the window in progress and starts the next one.
func (a *Auto) endWindow() string {
	before := a.limit
	a.cut = false
	why := a.judge()
	if (a.limit < before && !a.cut) || a.limit >= a.cutFrom {
		// A probe that lowered L found less parallelism than the cut's
		// limit assumed (uncut.go).
		a.cutFrom = 0
	}
	a.win = window{limit: a.windowLimit()}
	return why
}

// decide sets the decision of the step: the window's limit with the deck
// above the knee, and the wait queue's policy.
func (a *Auto) decide(now time.Time, m sluice.Measurements, old float64, why string, fence bool) sluice.Decision {
	limit := a.withDeck(a.win.limit)
	if limit > a.win.limit {
		why += fmt.Sprintf("; %g on deck above the knee %.3g", limit-a.win.limit, a.knee.w)
	}
	maxWait, drain, queue := a.queuePolicy(now, m, limit)
	a.cur = ctl.Decision(now, "auto", sluice.KindConcurrency, m, old, limit, limit != old, why+"; "+queue)
	a.cur.MaxWait, a.cur.Drain, a.cur.Fence, a.cur.MaxReject = maxWait, drain, fence, a.cfg.MaxRejectFraction
	return a.cur
}

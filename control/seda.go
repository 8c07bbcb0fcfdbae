// SPDX-License-Identifier: Apache-2.0

package control

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/mathx"
)

// SEDAConfig configures the SEDA controller. Start from DefaultSEDAConfig;
// Target has no default and must be set.
type SEDAConfig struct {
	// Target is the 90th-percentile response-time target of every class
	// without its own entry in ClassTargets (required unless ClassTargets
	// covers every class).
	Target time.Duration `yaml:"target" json:"target"`
	// Classes is the number of request classes, in priority order (class 0
	// is the highest). Default 1, or len(ClassTargets) when those are set;
	// at most MaxSEDAClasses.
	Classes int `yaml:"classes" json:"classes"`
	// ClassTargets optionally gives each class its own p90 target, highest
	// priority first; a zero entry means Target.
	ClassTargets []time.Duration `yaml:"class_targets" json:"class_targets"`
	// NReq is the number of completions after which the controller runs
	// (default 100).
	NReq int `yaml:"nreq" json:"nreq"`
	// Timeout is the time after which it runs even with fewer completions
	// (default 1s).
	Timeout time.Duration `yaml:"timeout" json:"timeout"`
	// Alpha is the EWMA weight of the previous smoothed p90 (default 0.7).
	Alpha float64 `yaml:"alpha" json:"alpha"`
	// ErrI is the error below which the rate increases (default −0.5).
	ErrI float64 `yaml:"err_i" json:"err_i"`
	// ErrD is the error above which the rate decreases (default 0).
	ErrD float64 `yaml:"err_d" json:"err_d"`
	// AdjI scales the additive increase (default 2).
	AdjI float64 `yaml:"adj_i" json:"adj_i"`
	// AdjD is the multiplicative decrease factor (default 1.2).
	AdjD float64 `yaml:"adj_d" json:"adj_d"`
	// CI is the error at which the increase would be 0 (default −0.1).
	CI float64 `yaml:"c_i" json:"c_i"`
	// RateMin and RateMax bound every class rate, in req/s (defaults 0.05
	// and 5000).
	RateMin float64 `yaml:"rate_min" json:"rate_min"`
	RateMax float64 `yaml:"rate_max" json:"rate_max"`
	// InitialRate is every class's starting rate, in req/s (default
	// 5000 = rate_max: start open and cut on evidence of overload).
	InitialRate float64 `yaml:"initial_rate" json:"initial_rate"`
	// AdjLoD divides the rates of lower classes when a class is over its
	// target (default 10).
	AdjLoD float64 `yaml:"adjlo_d" json:"adjlo_d"`
	// LCThresh is the number of over-target runs, with every lower class
	// already at rate_min, after which a class cuts its own rate (default
	// 20).
	LCThresh int `yaml:"lc_thresh" json:"lc_thresh"`
	// TrackDemand keeps the rate tied to the demand while the token
	// bucket is not limiting anything (default true): an over-target run
	// cuts from the admitted rate of the last interval when that is below
	// the rate, and an under-target run does not raise a rate the
	// admissions stay below 90% of (Voigt & Gunningberg's hits guard). Both
	// only change the rate's value while it admits everything, so admission
	// decisions at that moment are unchanged; they remove the paper's cold
	// start (÷adj_d from rate_max takes dozens of runs to bite) and the
	// slow climb to rate_max during light load. false is the paper's law
	// exactly.
	TrackDemand bool `yaml:"track_demand" json:"track_demand"`
	// DecreaseHoldoff (default true): within one smoothed p90 (cur) after
	// a cut, a class over target cuts again only if its p90 sample is not
	// lower than at the cut. The samples of those runs come from requests
	// admitted before the cut; a falling p90 says the cut is already
	// draining the backlog, and cutting again would divide the rate for the
	// same overload several times. It matters when runs are frequent (nreq
	// samples arrive in well under a response time): without it a backlog
	// that takes seconds to drain is cut for every 100 samples it produces.
	// Nor does a class cut when the run's own p90 sample is within target
	// and only the smoothed value (which remembers the drained backlog) is
	// over it. false is the paper's law exactly.
	DecreaseHoldoff bool `yaml:"decrease_holdoff" json:"decrease_holdoff"`
	// RecoverToServed (default true): the first increase after an
	// overload goes at least to 0.9 × the class's completion rate
	// (response-time samples per second) since the first cut of its own
	// rate in that overload, when that is higher than the additive step
	// gives. The backlog that made the p90 rise drains at the stage's
	// capacity, so this rate measures what the backend can do; without it
	// a deep cut climbs back by adj_i-sized steps (1.8 req/s per run with
	// the paper's values). false is the paper's law exactly.
	RecoverToServed bool `yaml:"recover_to_served" json:"recover_to_served"`
	// RecoverFactor f ≥ 0 (default 0: the paper's additive law): while a
	// class's p90 is below err_i and its rate binds (it admitted at least
	// 0.9 × its rate), the increase is at least multiplicative,
	// rate·f·(c_i − err), so a rate cut to the floor by a stall (a backend
	// that answered nothing for a while) climbs back in a few runs instead
	// of adj_i-sized steps. The quick start sets 2: from err = −0.9 the rate
	// grows ×2.6 per run (×2.8 at most, as err → −1).
	RecoverFactor float64 `yaml:"recover_factor" json:"recover_factor"`
	// DrainedReset (default false: the paper's smoothing): after a cut of
	// its own rate and before its next increase, a class whose run's own
	// p90 sample is below err_i (under (1 + err_i) × target) restarts the
	// smoothed p90 from that sample. The samples that pushed cur up came
	// from a backlog that has now drained; with α = 0.7 cur forgets a
	// 10-second backlog only after several more runs (about 6 s at
	// 100 samples per run), while the rate stays at its cut. The quick
	// start sets it: with recover_factor it brings seda back to full
	// service within seconds after a backend stall.
	DrainedReset bool `yaml:"drained_reset" json:"drained_reset"`
	// LCReset (default true): a class's counter lc restarts at 0 on every
	// run in which the class is not over its target, so lc_thresh counts
	// the over-target runs of one overload: the lag before a higher class
	// cuts its own rate (the paper's Fig. 15) comes back with every new
	// overload. The paper never resets lc: once lc_thresh runs over
	// target, in the stage's whole life, have found every lower class at
	// rate_min, each later such run cuts the class's own rate at once.
	// false is the paper's counter exactly.
	LCReset bool `yaml:"lc_reset" json:"lc_reset"`
	// KeepFlagOverTarget (default true): the flag a higher class's
	// overload sets on a lower class (no increase on its next run) is
	// kept through the lower class's own runs over target and consumed by
	// its next run that is not over target, the first one that could
	// increase. The paper consumes it at the class's next run whatever
	// that run does: a flagged class whose next run is itself over target
	// then loses the flag without it having held anything back, and may
	// increase on the run after, before the higher class's next run flags
	// it again. false is the paper's flag exactly.
	KeepFlagOverTarget bool `yaml:"keep_flag_over_target" json:"keep_flag_over_target"`
	// Degrade configures service degradation (single class only).
	Degrade DegradeConfig `yaml:"degrade" json:"degrade"`
}

// DefaultSEDAConfig returns the parameters of Welsh & Culler's Figure 4 and
// §3.3 with Classes 1, Degrade off, and sluice's refinements TrackDemand,
// DecreaseHoldoff, RecoverToServed, LCReset and KeepFlagOverTarget true
// (see SEDA). PaperSEDAConfig turns them off.
func DefaultSEDAConfig() SEDAConfig {
	return SEDAConfig{Classes: 1, NReq: 100, Timeout: time.Second, Alpha: 0.7, ErrI: -0.5, ErrD: 0,
		AdjI: 2, AdjD: 1.2, CI: -0.1, RateMin: 0.05, RateMax: 5000, InitialRate: 5000,
		AdjLoD: 10, LCThresh: 20, TrackDemand: true, DecreaseHoldoff: true, RecoverToServed: true,
		LCReset: true, KeepFlagOverTarget: true, Degrade: DefaultDegradeConfig()}
}

// PaperSEDAConfig returns DefaultSEDAConfig with every refinement off: the
// paper's law exactly (track_demand, decrease_holdoff, recover_to_served,
// drained_reset, lc_reset and keep_flag_over_target false, recover_factor
// 0).
func PaperSEDAConfig() SEDAConfig {
	c := DefaultSEDAConfig()
	c.TrackDemand, c.DecreaseHoldoff, c.RecoverToServed = false, false, false
	c.RecoverFactor, c.DrainedReset, c.LCReset, c.KeepFlagOverTarget = 0, false, false, false
	return c
}

// classCount returns the effective number of classes.
func (c *SEDAConfig) classCount() int {
	if len(c.ClassTargets) > c.Classes {
		return len(c.ClassTargets)
	}
	return c.Classes
}

// targetOf returns class i's target in seconds.
func (c *SEDAConfig) targetOf(i int) float64 {
	if i < len(c.ClassTargets) && c.ClassTargets[i] > 0 {
		return c.ClassTargets[i].Seconds()
	}
	return c.Target.Seconds()
}

// Validate reports the first invalid field.
func (c *SEDAConfig) Validate() error {
	return firstError(
		c.validateTargets(),
		checkAtLeast("nreq", c.NReq, 1),
		checkPeriod("timeout", c.Timeout),
		invalidIf(!mathx.Finite(c.Alpha) || c.Alpha < 0 || c.Alpha > 0.999999, "alpha", c.Alpha, "must be within [0, 1)"),
		invalidIf(!mathx.Finite(c.ErrI), "err_i", c.ErrI, "must be finite"),
		invalidIf(!mathx.Finite(c.ErrD) || c.ErrD < c.ErrI, "err_d", c.ErrD, fmt.Sprintf("must be finite and ≥ err_i (%g)", c.ErrI)),
		invalidIf(!mathx.Finite(c.CI) || c.CI <= c.ErrI, "c_i", c.CI,
			fmt.Sprintf("must be finite and > err_i (%g) so that increases are positive", c.ErrI)),
		checkPositive("adj_i", c.AdjI),
		invalidIf(!mathx.Finite(c.AdjD) || c.AdjD <= 1, "adj_d", c.AdjD, "must be a finite factor > 1"),
		checkRateBounds("rate_min", c.RateMin, "rate_max", c.RateMax, "initial_rate", c.InitialRate),
		invalidIf(!mathx.Finite(c.AdjLoD) || c.AdjLoD <= 1, "adjlo_d", c.AdjLoD, "must be a finite factor > 1"),
		invalidIf(!mathx.Finite(c.RecoverFactor) || c.RecoverFactor < 0 || c.RecoverFactor > 10, "recover_factor", c.RecoverFactor,
			"must be within [0, 10] (0: the paper's additive increase)"),
		checkAtLeast("lc_thresh", c.LCThresh, 1),
		c.validateDegrade(),
	)
}

// MaxSEDAClasses bounds SEDAConfig.Classes: the controller keeps state per
// class, so a mistyped count (classes: 1000000000) is refused at
// validation instead of being allocated and walked.
const MaxSEDAClasses = 1024

// validateTargets reports the first invalid field of the classes and their
// p90 targets.
func (c *SEDAConfig) validateTargets() error {
	if c.Classes < 1 {
		return badField("classes", c.Classes, "must be ≥ 1")
	}
	if c.Classes > MaxSEDAClasses {
		return badField("classes", c.Classes, fmt.Sprintf("must be ≤ %d", MaxSEDAClasses))
	}
	if len(c.ClassTargets) > 0 && c.Classes > 1 && len(c.ClassTargets) != c.Classes {
		return badField("class_targets", fmt.Sprint(c.ClassTargets), fmt.Sprintf("must have one entry per class (%d)", c.Classes))
	}
	for i, t := range c.ClassTargets {
		if t < 0 {
			return badField(fmt.Sprintf("class_targets[%d]", i), t, "must be a positive duration (or 0 for target)")
		}
	}
	if c.Target < 0 {
		return badField("target", c.Target, "must be a positive duration such as 500ms")
	}
	for i := 0; i < c.classCount(); i++ {
		if c.targetOf(i) <= 0 {
			return badField("target", c.Target, "must be set to a positive duration such as 500ms")
		}
	}
	return nil
}

// validateDegrade reports the first invalid field of degrade when it is
// enabled.
func (c *SEDAConfig) validateDegrade() error {
	if !c.Degrade.Enabled {
		return nil
	}
	if c.classCount() > 1 {
		return badField("degrade.enabled", true, "degradation supports a single class only")
	}
	return c.Degrade.validate()
}

// New validates the configuration and returns a *SEDA, or a *Degrader when
// degradation is enabled.
func (c *SEDAConfig) New() (sluice.Controller, error) {
	if c.Degrade.Enabled {
		return NewDegrader(*c)
	}
	return NewSEDA(*c)
}

// SEDA is the adaptive overload controller of Welsh and Culler, "Adaptive
// Overload Control for Busy Internet Servers" (USITS 2003; docs/algorithms.md
// §5): AIMD control of the 90th-percentile response time of a stage through
// one token bucket per request class.
//
// The paper's law. A run for class c happens after NReq completions or
// Timeout. With samp the p90 of the class's samples since the previous run
// (seconds; the functions that implement each line in parentheses):
//
//	cur = α·cur + (1−α)·samp                       (observe)
//	err = (cur − target_c)/target_c
//	err > err_d: rate = rate/adj_d                 (decrease, cut)
//	err < err_i: rate = rate + (−(err − c_i)·adj_i) (raise, increase)
//
// rates clamped to [rate_min, rate_max]. With several classes (0 is the
// highest priority), class c over target (err > err_d) divides the rate of
// every lower class by adjlo_d; if all lower classes are already at
// rate_min it increments lc_c, and once lc_c ≥ lc_thresh it divides its own
// rate by adj_d. A class over target also flags every lower class so that
// its next run does not increase. Where the paper is silent, sluice reads
// it so: the first run takes cur = samp; the lowest class has no lower
// class to cut, so it divides its own rate at once (a single class is the
// §3.2 controller); a run without a usable p90 sample holds.
//
// Refinements. Each departure from that law is an option of SEDAConfig,
// applied in its own step on top of the law (the step's name in
// parentheses); off is the paper, and PaperSEDAConfig turns them all off.
// With d_c the admitted rate of class c over its last interval
// (Measurements.Admitted/Elapsed):
//
//   - track_demand (default on; cutBase, unusedRate): a cut of class c's
//     rate starts from min(rate_c, d_c), and an increase is skipped while
//     d_c < 0.9·rate_c.
//   - decrease_holdoff (on; holdoff): a class over target that cut a rate
//     less than cur_c seconds ago holds instead of cutting again while its
//     p90 sample is below the one of that cut, and no class cuts on a run
//     whose own p90 sample is within target.
//   - recover_to_served (on; recoverToServed): with s_c class c's samples
//     per second since the first cut of its own rate after its last
//     increase, that next increase is at least 0.9·s_c.
//   - recover_factor f (0: off; recoverFactor): while err < err_i and
//     d_c ≥ 0.9·rate_c, an increase is at least rate·(1 + f·(c_i − err)).
//   - drained_reset (off; drainedReset): after a cut of its own rate and
//     before its next increase, a run whose own sample is below err_i,
//     (samp − target_c)/target_c < err_i, restarts cur = samp.
//   - lc_reset (on; adjust): lc_c = 0 on every run in which class c is not
//     over target.
//   - keep_flag_over_target (on; adjust): a lower class's flag is consumed
//     by its next run that is not over target, not by its very next run.
//
// By priority: with Classes, the paper's own class law above (lower
// classes cut first). A stage that shares one controller among its
// classes sheds the lowest first only when asked (stage.Priority,
// ShedOn), by the bucket's run-ahead.
type SEDA struct {
	cfg     SEDAConfig
	classes []sedaClass
	last    sluice.Decision
}

// sedaClass is the state of one class of a SEDA controller.
type sedaClass struct {
	rate  float64 // token rate, req/s
	cur   float64 // smoothed p90, seconds
	have  bool    // cur has been measured
	lc    int     // runs over target with every lower class at rate_min
	noInc bool    // a higher class was over target: no increase next run
	// demand is the admitted rate over the class's last interval, req/s
	// (NaN until measured).
	demand float64
	// lastCut is when the class last cut a rate (its own or lower ones),
	// cutSamp the p90 sample of that run, samp the latest p90 sample (s).
	lastCut       time.Time
	cutSamp, samp float64
	// served and servedFor count the class's response-time samples and
	// the time they cover (s) since the first cut of its own rate after
	// its last increase; servedFor is negative when there is no cut to
	// recover from.
	served, servedFor float64
}

var _ sluice.Controller = (*SEDA)(nil)
var _ sluice.SampleTriggered = (*SEDA)(nil)

// NewSEDA returns a SEDA controller for a validated copy of cfg.
func NewSEDA(cfg SEDAConfig) (*SEDA, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.ClassTargets = append([]time.Duration(nil), cfg.ClassTargets...)
	s := &SEDA{cfg: cfg, classes: make([]sedaClass, cfg.classCount())}
	for i := range s.classes {
		s.classes[i] = sedaClass{rate: cfg.InitialRate, demand: math.NaN(), servedFor: -1}
	}
	s.last = sluice.Decision{Controller: "seda", Kind: sluice.KindRate, Old: cfg.InitialRate, New: cfg.InitialRate,
		ClassRates: s.ratesCopy(), Reason: fmt.Sprintf("initial: rate %s", fmtRate(cfg.InitialRate))}
	return s, nil
}

func (s *SEDA) ratesCopy() []float64 {
	if len(s.classes) == 1 {
		return nil
	}
	return s.Rates()
}

// Period returns the timeout after which the controller runs without NReq
// completions.
func (s *SEDA) Period() time.Duration { return s.cfg.Timeout }

// TriggerSamples returns NReq.
func (s *SEDA) TriggerSamples() int { return s.cfg.NReq }

// Current returns the last decision (or the initial setting).
func (s *SEDA) Current() sluice.Decision { return s.last }

// Rates returns a copy of the current per-class rates, highest priority
// first.
func (s *SEDA) Rates() []float64 {
	out := make([]float64, len(s.classes))
	for i := range s.classes {
		out[i] = s.classes[i].rate
	}
	return out
}

// Smoothed returns the smoothed p90 of class c in seconds, and whether it
// has been measured.
func (s *SEDA) Smoothed(c int) (float64, bool) { return s.classes[c].cur, s.classes[c].have }

// Update runs the controller for class m.Class with the p90 m.P90RT of its
// samples. Decision.New is that class's new rate; ClassRates holds every
// class's rate when there are several.
func (s *SEDA) Update(now time.Time, m sluice.Measurements) sluice.Decision {
	c := m.Class
	if c < 0 || c >= len(s.classes) {
		s.last = s.decide(now, m, 0, false, fmt.Sprintf("hold: class %d out of range [0, %d)", c, len(s.classes)))
		return s.last
	}
	cl := &s.classes[c]
	old := cl.rate
	if !usable(m.Samples) || m.Samples < 1 {
		s.last = s.decide(now, m, old, false, fmt.Sprintf("hold at %s: no completions since the last run", fmtRate(old)))
		return s.last
	}
	if !usable(m.P90RT) {
		s.last = s.decide(now, m, old, false, fmt.Sprintf("hold at %s: unusable p90 %v", fmtRate(old), m.P90RT))
		return s.last
	}
	cl.noteDemand(m)
	cl.noteServed(m)
	cur, e, reset := s.observe(c, m.P90RT)
	why := s.trigger(m)
	if reset {
		why += ", smoothing restarted (the backlog has drained)"
	}
	obs := fmt.Sprintf("p90 %s (cur %s, target %s, err %+.2f) %s", fmtSec(m.P90RT), fmtSec(cur), fmtSec(s.cfg.targetOf(c)), e, why)
	reason := s.adjust(now, c, e)
	s.last = s.decide(now, m, old, true, obs+": "+reason)
	return s.last
}

// trigger describes why the run happened, for reasons.
func (s *SEDA) trigger(m sluice.Measurements) string {
	if m.Samples >= float64(s.cfg.NReq) {
		return fmt.Sprintf("after %.0f samples", m.Samples)
	}
	return fmt.Sprintf("after %v with %.0f samples", m.Elapsed.Round(time.Millisecond), m.Samples)
}

// noteDemand records the class's admitted rate over the interval of m
// (d_c, for track_demand and recover_factor), when at least one request
// was admitted in it.
func (cl *sedaClass) noteDemand(m sluice.Measurements) {
	if usable(m.Admitted) && m.Admitted >= 1 && m.Elapsed > 0 {
		cl.demand = m.Admitted / m.Elapsed.Seconds()
	}
}

// noteServed adds m's samples and interval to the class's count since
// its last cut, if it has one to recover from (s_c, for
// recover_to_served).
func (cl *sedaClass) noteServed(m sluice.Measurements) {
	if cl.servedFor >= 0 && m.Elapsed > 0 {
		cl.served += m.Samples
		cl.servedFor += m.Elapsed.Seconds()
	}
}

// observe smooths a new p90 sample of class c (seconds) and returns cur,
// err and whether drained_reset restarted the smoothing:
//
//	cur = α·cur + (1−α)·samp   (the first sample: cur = samp)
//	err = (cur − target_c)/target_c
func (s *SEDA) observe(c int, samp float64) (cur, err float64, reset bool) {
	cl := &s.classes[c]
	cl.samp = samp
	t := s.cfg.targetOf(c)
	if s.drainedReset(cl, samp, t) {
		cl.cur = samp
		return samp, (samp - t) / t, true
	}
	if cl.have {
		cl.cur = s.cfg.Alpha*cl.cur + (1-s.cfg.Alpha)*samp
	} else {
		cl.cur, cl.have = samp, true
	}
	return cl.cur, (cl.cur - t) / t, false
}

// drainedReset is the drained_reset refinement (SEDAConfig.DrainedReset;
// off: the paper's smoothing): it reports whether this run restarts the
// smoothed p90 from its own sample samp (s), because the class cut its
// own rate and has not increased since, and samp alone is below err_i,
// (samp − target)/target < err_i. The samples that pushed cur up came
// from a backlog that has drained; with α = 0.7 cur would keep the rate
// at its cut for several more runs.
func (s *SEDA) drainedReset(cl *sedaClass, samp, target float64) bool {
	return s.cfg.DrainedReset && cl.have && cl.servedFor >= 0 && (samp-target)/target < s.cfg.ErrI
}

// adjust runs the law for class c with error e at now and returns the
// reason: a decrease over target (e > err_d), an increase below err_i,
// otherwise the rate is kept. Besides the steps of decrease and raise, two
// refinements act here, on the class's bookkeeping of its priority:
//
//   - the flag: the paper consumes a class's no-increase flag at its next
//     run; keep_flag_over_target keeps it through runs over target, so
//     the next run that could increase is the one it holds back;
//   - lc: the paper never resets the counter; lc_reset restarts it on
//     every run not over target, so lc_thresh counts one overload's runs.
func (s *SEDA) adjust(now time.Time, c int, e float64) string {
	cl := &s.classes[c]
	if e > s.cfg.ErrD {
		if !s.cfg.KeepFlagOverTarget {
			cl.noInc = false
		}
		return s.decrease(now, c)
	}
	flagged := cl.noInc
	cl.noInc = false
	if s.cfg.LCReset {
		cl.lc = 0
	}
	switch {
	case e >= s.cfg.ErrI:
		return fmt.Sprintf("within band: rate kept at %s", fmtRate(cl.rate))
	case flagged:
		return fmt.Sprintf("no increase this run (a higher class was over target): rate kept at %s", fmtRate(cl.rate))
	}
	if why, unused := s.unusedRate(cl); unused {
		return why
	}
	return s.raise(cl, e)
}

// decrease is the paper's response to class c over its target at now:
// flag every lower class; then, while a lower class is above rate_min, cut
// every lower class's rate by adjlo_d; else count lc_c and cut the class's
// own rate by adj_d once lc_c ≥ lc_thresh. The lowest class cuts its own
// rate at once. decrease_holdoff may hold the cut (holdoff); the time and
// p90 sample of every run that reaches the cut are kept for it.
func (s *SEDA) decrease(now time.Time, c int) string {
	cl := &s.classes[c]
	s.markLower(c)
	if why, held := s.holdoff(now, c); held {
		return why
	}
	cl.cutSamp = cl.samp
	if c == len(s.classes)-1 {
		cl.lastCut = now
		old := cl.rate
		from := s.cutOwn(cl)
		return fmt.Sprintf("over target: rate %s → %s (÷%g%s)", fmtRate(old), fmtRate(cl.rate), s.cfg.AdjD, from)
	}
	if s.lowerAboveMin(c) {
		cl.lastCut = now
		return s.cutLower(c)
	}
	cl.lc++
	if cl.lc < s.cfg.LCThresh {
		return fmt.Sprintf("over target, lower classes at rate_min: lc %d/%d, rate kept at %s", cl.lc, s.cfg.LCThresh, fmtRate(cl.rate))
	}
	old := cl.rate
	from := s.cutOwn(cl)
	cl.lastCut = now
	return fmt.Sprintf("over target, lower classes at rate_min, lc %d ≥ %d: rate %s → %s (÷%g%s)",
		cl.lc, s.cfg.LCThresh, fmtRate(old), fmtRate(cl.rate), s.cfg.AdjD, from)
}

// cut is the paper's multiplicative decrease of a rate by a factor:
// rate/by (by = adj_d or adjlo_d), clamped to [rate_min, rate_max].
func (s *SEDA) cut(rate, by float64) float64 { return clamp(rate/by, s.cfg.RateMin, s.cfg.RateMax) }

// increase is the paper's additive increase of a rate at error e < err_i:
// rate + (−(e − c_i)·adj_i), not yet clamped.
func (s *SEDA) increase(rate, e float64) float64 { return rate - (e-s.cfg.CI)*s.cfg.AdjI }

// cutOwn cuts class cl's own rate by adj_d from cutBase and, at the first
// cut of an overload, starts counting what the class serves (s_c). It
// returns cutBase's note for the reason.
func (s *SEDA) cutOwn(cl *sedaClass) string {
	from, note := s.cutBase(cl)
	cl.rate = s.cut(from, s.cfg.AdjD)
	if cl.servedFor < 0 {
		cl.served, cl.servedFor = 0, 0
	}
	return note
}

// cutLower cuts the rate of every class below c by adjlo_d, each from its
// cutBase, and returns the reason.
func (s *SEDA) cutLower(c int) string {
	var b strings.Builder
	for l := c + 1; l < len(s.classes); l++ {
		lower := &s.classes[l]
		from, _ := s.cutBase(lower)
		lower.rate = s.cut(from, s.cfg.AdjLoD)
		fmt.Fprintf(&b, " %d:%.4g", l, lower.rate)
	}
	return fmt.Sprintf("over target: lower classes ÷%g →%s req/s", s.cfg.AdjLoD, b.String())
}

// lowerAboveMin reports whether a class below c has a rate above rate_min.
func (s *SEDA) lowerAboveMin(c int) bool {
	for l := c + 1; l < len(s.classes); l++ {
		if s.classes[l].rate > s.cfg.RateMin {
			return true
		}
	}
	return false
}

// markLower flags every class below c so its next run does not increase.
func (s *SEDA) markLower(c int) {
	for l := c + 1; l < len(s.classes); l++ {
		s.classes[l].noInc = true
	}
}

// cutBase is the rate a cut of class cl starts from: its rate, as in the
// paper, or with the track_demand refinement (SEDAConfig.TrackDemand) its
// admitted rate d_c when that is lower. A bucket that was not binding
// admitted everything; dividing its idle rate (rate_max at the start)
// takes dozens of runs to bite. It returns a note for the reason when the
// cut starts from d_c.
func (s *SEDA) cutBase(cl *sedaClass) (float64, string) {
	if s.cfg.TrackDemand && cl.demand < cl.rate { // false for NaN
		return cl.demand, fmt.Sprintf(" from admitted %s", fmtRate(cl.demand))
	}
	return cl.rate, ""
}

// holdoff is the decrease_holdoff refinement (SEDAConfig.DecreaseHoldoff;
// off: every run over target cuts, as in the paper): class c over target
// holds instead of cutting when its run's own p90 sample is within target
// (only the smoothed value, which remembers the drained backlog, is over
// it), or when it cut less than cur seconds ago and its sample is below
// the one of that cut (the cut is already draining the backlog, and the
// samples still come from requests admitted before it). It returns the
// reason and whether to hold.
func (s *SEDA) holdoff(now time.Time, c int) (string, bool) {
	if !s.cfg.DecreaseHoldoff {
		return "", false
	}
	cl := &s.classes[c]
	if cl.samp <= s.cfg.targetOf(c) {
		return fmt.Sprintf("smoothed p90 over target but this run's p90 %s is within it: no cut (the overload has passed)", fmtSec(cl.samp)), true
	}
	hold := time.Duration(cl.cur * float64(time.Second))
	if since := now.Sub(cl.lastCut); since < hold && cl.samp < cl.cutSamp {
		return fmt.Sprintf("over target, holding: p90 falling since the cut %v ago (%s < %s), within cur %v",
			since.Round(time.Millisecond), fmtSec(cl.samp), fmtSec(cl.cutSamp), hold.Round(time.Millisecond)), true
	}
	return "", false
}

// unusedRate is track_demand's increase guard (SEDAConfig.TrackDemand;
// off: the paper increases below err_i whatever the demand): the rate of
// class cl is not raised while it admits less than 0.9 × its rate
// (d_c < 0.9·rate_c, Voigt & Gunningberg's hits guard), since nobody uses
// it. It returns the reason and whether to keep the rate.
func (s *SEDA) unusedRate(cl *sedaClass) (string, bool) {
	if s.cfg.TrackDemand && cl.demand < 0.9*cl.rate {
		return fmt.Sprintf("below err_i but admitted %s < 0.9 × rate: rate kept at %s (not in use)", fmtRate(cl.demand), fmtRate(cl.rate)), true
	}
	return "", false
}

// raise increases class cl's rate at error e < err_i: the paper's
// additive increase, which recoverToServed and recoverFactor may each
// raise further, clamped to [rate_min, rate_max]. It ends the class's
// count of what it served since its cut, and returns the reason.
func (s *SEDA) raise(cl *sedaClass, e float64) string {
	old := cl.rate
	next := s.increase(old, e)
	next, served := s.recoverToServed(cl, next)
	next, factor := s.recoverFactor(cl, e, next)
	cl.servedFor = -1 // once per cut
	cl.rate = clamp(next, s.cfg.RateMin, s.cfg.RateMax)
	return fmt.Sprintf("below err_i %g: rate %s → %s (+%.4g%s)", s.cfg.ErrI, fmtRate(old), fmtRate(cl.rate), cl.rate-old, served+factor)
}

// recoverToServed is the recover_to_served refinement
// (SEDAConfig.RecoverToServed; off: the paper's additive step): the first
// increase after a cut of the class's own rate goes at least to
// 0.9·s_c, s_c its samples per second since that cut, when that is more
// than next. The backlog that raised the p90 drained at the stage's
// capacity, so s_c measures what the backend can do. It returns the rate
// and a note for the reason.
func (s *SEDA) recoverToServed(cl *sedaClass, next float64) (float64, string) {
	if !s.cfg.RecoverToServed || cl.servedFor <= 0 {
		return next, ""
	}
	if r := 0.9 * cl.served / cl.servedFor; r > next {
		return r, fmt.Sprintf(", first increase since the overload: 0.9 × served %s", fmtRate(cl.served/cl.servedFor))
	}
	return next, ""
}

// recoverFactor is the recover_factor refinement (SEDAConfig.RecoverFactor
// f; 0: the paper's additive step): while the class's rate binds
// (d_c ≥ 0.9·rate_c), an increase at error e is at least
// rate·(1 + f·(c_i − e)), when that is more than next, so a rate cut to
// the floor by a stall climbs back in a few runs. It returns the rate and
// a note for the reason.
func (s *SEDA) recoverFactor(cl *sedaClass, e, next float64) (float64, string) {
	f := s.cfg.RecoverFactor
	binds := cl.demand >= 0.9*cl.rate // false for NaN: nothing admitted yet
	if f <= 0 || !binds {
		return next, ""
	}
	if r := cl.rate * (1 + f*(s.cfg.CI-e)); r > next {
		return r, fmt.Sprintf(", multiplicative recovery ×%.3g", 1+f*(s.cfg.CI-e))
	}
	return next, ""
}

func (s *SEDA) decide(now time.Time, m sluice.Measurements, old float64, acted bool, reason string) sluice.Decision {
	c := m.Class
	if c < 0 || c >= len(s.classes) {
		c = len(s.classes) - 1
	}
	d := decision(now, "seda", sluice.KindRate, m, old, s.classes[c].rate, acted, reason)
	d.Class = c
	d.ClassRates = s.ratesCopy()
	return d
}

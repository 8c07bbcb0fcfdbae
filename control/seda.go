package control

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
)

// SEDAConfig configures the SEDA controller. Start from DefaultSEDAConfig;
// Target has no default and must be set.
type SEDAConfig struct {
	// Target is the 90th-percentile response-time target of every class
	// without its own entry in ClassTargets (required unless ClassTargets
	// covers every class).
	Target time.Duration `yaml:"target" json:"target"`
	// Classes is the number of request classes, in priority order (class 0
	// is the highest). Default 1, or len(ClassTargets) when those are set.
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
	// Degrade configures service degradation (single class only).
	Degrade DegradeConfig `yaml:"degrade" json:"degrade"`
}

// DefaultSEDAConfig returns the parameters of Welsh & Culler's Figure 4 and
// §3.3, one class, degradation off.
func DefaultSEDAConfig() SEDAConfig {
	return SEDAConfig{Classes: 1, NReq: 100, Timeout: time.Second, Alpha: 0.7, ErrI: -0.5, ErrD: 0,
		AdjI: 2, AdjD: 1.2, CI: -0.1, RateMin: 0.05, RateMax: 5000, InitialRate: 5000,
		AdjLoD: 10, LCThresh: 20, TrackDemand: true, DecreaseHoldoff: true, RecoverToServed: true, Degrade: DefaultDegradeConfig()}
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
	if c.Classes < 1 {
		return badField("classes", c.Classes, "must be ≥ 1")
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
	if c.NReq < 1 {
		return badField("nreq", c.NReq, "must be ≥ 1")
	}
	if err := checkPeriod("timeout", c.Timeout); err != nil {
		return err
	}
	if err := checkRange("alpha", c.Alpha, 0, 0.999999); err != nil {
		return badField("alpha", c.Alpha, "must be within [0, 1)")
	}
	if !sluice.Finite(c.ErrI) {
		return badField("err_i", c.ErrI, "must be finite")
	}
	if !sluice.Finite(c.ErrD) || c.ErrD < c.ErrI {
		return badField("err_d", c.ErrD, fmt.Sprintf("must be finite and ≥ err_i (%g)", c.ErrI))
	}
	if !sluice.Finite(c.CI) || c.CI <= c.ErrI {
		return badField("c_i", c.CI, fmt.Sprintf("must be finite and > err_i (%g) so that increases are positive", c.ErrI))
	}
	if err := checkPositive("adj_i", c.AdjI); err != nil {
		return err
	}
	if !sluice.Finite(c.AdjD) || c.AdjD <= 1 {
		return badField("adj_d", c.AdjD, "must be a finite factor > 1")
	}
	if err := checkRateBounds("rate_min", c.RateMin, "rate_max", c.RateMax, "initial_rate", c.InitialRate); err != nil {
		return err
	}
	if !sluice.Finite(c.AdjLoD) || c.AdjLoD <= 1 {
		return badField("adjlo_d", c.AdjLoD, "must be a finite factor > 1")
	}
	if !sluice.Finite(c.RecoverFactor) || c.RecoverFactor < 0 || c.RecoverFactor > 10 {
		return badField("recover_factor", c.RecoverFactor, "must be within [0, 10] (0: the paper's additive increase)")
	}
	if c.LCThresh < 1 {
		return badField("lc_thresh", c.LCThresh, "must be ≥ 1")
	}
	if c.Degrade.Enabled {
		if c.classCount() > 1 {
			return badField("degrade.enabled", true, "degradation supports a single class only")
		}
		if err := c.Degrade.validate(); err != nil {
			return err
		}
	}
	return nil
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
// A run for class c happens after NReq completions or Timeout. With samp
// the p90 of the class's samples since the previous run (seconds):
//
//	cur = α·cur + (1−α)·samp        (the first run takes cur = samp)
//	err = (cur − target_c)/target_c
//	err > err_d: rate = rate/adj_d
//	err < err_i: rate = rate + (−(err − c_i)·adj_i)
//
// rates clamped to [rate_min, rate_max]. With several classes (0 is the
// highest priority), class c over target (err > err_d) divides the rate of
// every lower class by adjlo_d; if all lower classes are already at
// rate_min it increments lc_c, and once lc_c ≥ lc_thresh it divides its own
// rate by adj_d; lc_c resets when class c is not over target. The lowest
// class has no lower class to cut, so it divides its own rate at once (a
// single class is the basic controller). A class over target also flags
// every lower class so that its next run does not increase.
//
// With track_demand (the default), d_c is the admitted rate of class c over
// its last interval (Measurements.Admitted/Elapsed): a cut of class c's rate
// starts from min(rate_c, d_c), and an increase is skipped while
// d_c < 0.9·rate_c. With decrease_holdoff (the default), a class over
// target that cut a rate less than cur_c seconds ago holds instead of
// cutting again while its p90 sample is below the one of that cut, and no
// class cuts on a run whose own p90 sample is within target. With
// recover_to_served (the default), s_c is class c's samples per second
// since the first cut of its own rate after its last increase, and that
// next increase is rate = max(rate + (−(err − c_i)·adj_i), 0.9·s_c).
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

// observe smooths a new p90 sample of class c and returns cur and err.
func (s *SEDA) observe(c int, samp float64) (cur, err float64, reset bool) {
	s.classes[c].samp = samp
	t := s.cfg.targetOf(c)
	if s.cfg.DrainedReset && s.classes[c].have && s.classes[c].servedFor >= 0 && (samp-t)/t < s.cfg.ErrI {
		s.classes[c].cur = samp
		return samp, (samp - t) / t, true
	}
	if s.classes[c].have {
		s.classes[c].cur = s.cfg.Alpha*s.classes[c].cur + (1-s.cfg.Alpha)*samp
	} else {
		s.classes[c].cur, s.classes[c].have = samp, true
	}
	return s.classes[c].cur, (s.classes[c].cur - t) / t, false
}

// Update runs the controller for class m.Class with the p90 m.P90RT of its
// samples. Decision.New is that class's new rate; ClassRates holds every
// class's rate when there are several.
func (s *SEDA) Update(now time.Time, m sluice.Measurements) sluice.Decision {
	c := m.Class
	if c < 0 || c >= len(s.classes) {
		s.last = s.decide(now, m, 0, false, fmt.Sprintf("hold: class %d out of range [0, %d)", c, len(s.classes)))
		return s.last
	}
	old := s.classes[c].rate
	if !usable(m.Samples) || m.Samples < 1 {
		s.last = s.decide(now, m, old, false, fmt.Sprintf("hold at %s: no completions since the last run", fmtRate(old)))
		return s.last
	}
	if !usable(m.P90RT) {
		s.last = s.decide(now, m, old, false, fmt.Sprintf("hold at %s: unusable p90 %v", fmtRate(old), m.P90RT))
		return s.last
	}
	s.noteDemand(c, m)
	s.noteServed(c, m)
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

// noteDemand records class c's admitted rate over the interval of m, when
// at least one request was admitted in it.
func (s *SEDA) noteDemand(c int, m sluice.Measurements) {
	if usable(m.Admitted) && m.Admitted >= 1 && m.Elapsed > 0 {
		s.classes[c].demand = m.Admitted / m.Elapsed.Seconds()
	}
}

// noteServed adds m's samples and interval to class c's count since its
// last cut, if it has one to recover from.
func (s *SEDA) noteServed(c int, m sluice.Measurements) {
	if s.classes[c].servedFor >= 0 && m.Elapsed > 0 {
		s.classes[c].served += m.Samples
		s.classes[c].servedFor += m.Elapsed.Seconds()
	}
}

// cutOwn sets class c's rate after a cut of its own rate and, at the
// first cut of an overload, starts counting what it serves.
func (s *SEDA) cutOwn(c int, rate float64) {
	s.classes[c].rate = rate
	if s.classes[c].servedFor < 0 {
		s.classes[c].served, s.classes[c].servedFor = 0, 0
	}
}

// base returns the rate a cut of class c starts from, and a note for the
// reason when it is the measured demand.
func (s *SEDA) base(c int) (float64, string) {
	if s.cfg.TrackDemand && s.classes[c].demand < s.classes[c].rate { // false for NaN
		return s.classes[c].demand, fmt.Sprintf(" from admitted %s", fmtRate(s.classes[c].demand))
	}
	return s.classes[c].rate, ""
}

// adjust applies the AIMD law for class c with error e at now and returns
// the reason.
func (s *SEDA) adjust(now time.Time, c int, e float64) string {
	lo, hi := s.cfg.RateMin, s.cfg.RateMax
	if e > s.cfg.ErrD {
		s.markLower(c)
		if s.cfg.DecreaseHoldoff && s.classes[c].samp <= s.cfg.targetOf(c) {
			return fmt.Sprintf("smoothed p90 over target but this run's p90 %s is within it: no cut (the overload has passed)", fmtSec(s.classes[c].samp))
		}
		hold := time.Duration(s.classes[c].cur * float64(time.Second))
		if s.cfg.DecreaseHoldoff && now.Sub(s.classes[c].lastCut) < hold && s.classes[c].samp < s.classes[c].cutSamp {
			return fmt.Sprintf("over target, holding: p90 falling since the cut %v ago (%s < %s), within cur %v",
				now.Sub(s.classes[c].lastCut).Round(time.Millisecond), fmtSec(s.classes[c].samp), fmtSec(s.classes[c].cutSamp), hold.Round(time.Millisecond))
		}
		s.classes[c].cutSamp = s.classes[c].samp
		if c == len(s.classes)-1 {
			s.classes[c].lastCut = now
			old := s.classes[c].rate
			b, from := s.base(c)
			s.cutOwn(c, clamp(b/s.cfg.AdjD, lo, hi))
			return fmt.Sprintf("over target: rate %s → %s (÷%g%s)", fmtRate(old), fmtRate(s.classes[c].rate), s.cfg.AdjD, from)
		}
		allMin := true
		for l := c + 1; l < len(s.classes); l++ {
			if s.classes[l].rate > lo {
				allMin = false
			}
		}
		if !allMin {
			s.classes[c].lastCut = now
			var b strings.Builder
			for l := c + 1; l < len(s.classes); l++ {
				from, _ := s.base(l)
				s.classes[l].rate = clamp(from/s.cfg.AdjLoD, lo, hi)
				fmt.Fprintf(&b, " %d:%.4g", l, s.classes[l].rate)
			}
			return fmt.Sprintf("over target: lower classes ÷%g →%s req/s", s.cfg.AdjLoD, b.String())
		}
		s.classes[c].lc++
		if s.classes[c].lc < s.cfg.LCThresh {
			return fmt.Sprintf("over target, lower classes at rate_min: lc %d/%d, rate kept at %s", s.classes[c].lc, s.cfg.LCThresh, fmtRate(s.classes[c].rate))
		}
		old := s.classes[c].rate
		b, from := s.base(c)
		s.cutOwn(c, clamp(b/s.cfg.AdjD, lo, hi))
		s.classes[c].lastCut = now
		return fmt.Sprintf("over target, lower classes at rate_min, lc %d ≥ %d: rate %s → %s (÷%g%s)",
			s.classes[c].lc, s.cfg.LCThresh, fmtRate(old), fmtRate(s.classes[c].rate), s.cfg.AdjD, from)
	}
	s.classes[c].lc = 0
	if s.classes[c].noInc {
		s.classes[c].noInc = false
		if e < s.cfg.ErrI {
			return fmt.Sprintf("no increase this run (a higher class was over target): rate kept at %s", fmtRate(s.classes[c].rate))
		}
	}
	if e < s.cfg.ErrI && s.cfg.TrackDemand && s.classes[c].demand < 0.9*s.classes[c].rate {
		return fmt.Sprintf("below err_i but admitted %s < 0.9 × rate: rate kept at %s (not in use)", fmtRate(s.classes[c].demand), fmtRate(s.classes[c].rate))
	}
	if e < s.cfg.ErrI {
		old := s.classes[c].rate
		next := old - (e-s.cfg.CI)*s.cfg.AdjI
		note := ""
		if s.cfg.RecoverToServed && s.classes[c].servedFor > 0 {
			if r := 0.9 * s.classes[c].served / s.classes[c].servedFor; r > next {
				next = r
				note = fmt.Sprintf(", first increase since the overload: 0.9 × served %s", fmtRate(s.classes[c].served/s.classes[c].servedFor))
			}
		}
		if f := s.cfg.RecoverFactor; f > 0 && s.classes[c].demand >= 0.9*old {
			if r := old * (1 + f*(s.cfg.CI-e)); r > next {
				next = r
				note += fmt.Sprintf(", multiplicative recovery ×%.3g", 1+f*(s.cfg.CI-e))
			}
		}
		s.classes[c].servedFor = -1 // once per cut
		s.classes[c].rate = clamp(next, lo, hi)
		return fmt.Sprintf("below err_i %g: rate %s → %s (+%.4g%s)", s.cfg.ErrI, fmtRate(old), fmtRate(s.classes[c].rate), s.classes[c].rate-old, note)
	}
	return fmt.Sprintf("within band: rate kept at %s", fmtRate(s.classes[c].rate))
}

// markLower flags every class below c so its next run does not increase.
func (s *SEDA) markLower(c int) {
	for l := c + 1; l < len(s.classes); l++ {
		s.classes[l].noInc = true
	}
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

// SPDX-License-Identifier: Apache-2.0

package control

import (
	"fmt"
	"math"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/mathx"
)

const (
	// bbrCoolDown is how long shedding stays on after the last drop made
	// while the CPU condition held (aegis: one second).
	bbrCoolDown = time.Second
	// bbrCPUSample is the interval per which cpu_decay applies (aegis
	// reads the CPU every 500 ms).
	bbrCPUSample = 500 * time.Millisecond
	// bbrMaxLimit caps maxInFlight against corrupt inputs (huge counts or
	// service times); no real stage comes near it.
	bbrMaxLimit = 1e9
)

// BBRConfig configures the bbr controller, after go-kratos/aegis
// ratelimit/bbr (options Window, Bucket, CPUThreshold). Start from
// DefaultBBRConfig.
type BBRConfig struct {
	// Period is the bucket length and the control period (default 100ms).
	Period time.Duration `yaml:"period" json:"period"`
	// Window is how far back buckets count, ≥ period (default 10s, i.e.
	// 100 buckets).
	Window time.Duration `yaml:"window" json:"window"`
	// CPUThreshold is the CPU utilization, in [0, 1], at or above which
	// shedding is on (default 0.8; aegis's 800‰). 0 means always.
	CPUThreshold float64 `yaml:"cpu_threshold" json:"cpu_threshold"`
	// CPUDecay smooths the utilization: per 500 ms,
	// cpu ← cpu·decay + util·(1 − decay), in [0, 1) (default 0.95 as in
	// aegis; 0 uses each period's utilization as it is).
	CPUDecay float64 `yaml:"cpu_decay" json:"cpu_decay"`
}

// DefaultBBRConfig returns aegis's defaults: Period 100ms (one bucket),
// Window 10s (a hundred buckets), CPUThreshold 0.8 and CPUDecay 0.95 (per
// half second).
func DefaultBBRConfig() BBRConfig {
	return BBRConfig{Period: 100 * time.Millisecond, Window: 10 * time.Second, CPUThreshold: 0.8, CPUDecay: 0.95}
}

// Validate reports the first invalid field.
func (c *BBRConfig) Validate() error {
	return firstError(
		checkPeriod("period", c.Period),
		invalidIf(c.Window < c.Period, "window", c.Window, fmt.Sprintf("must be a duration ≥ period (%s) such as 10s", c.Period)),
		invalidIf(!mathx.Finite(c.CPUThreshold) || c.CPUThreshold < 0 || c.CPUThreshold > 1, "cpu_threshold", c.CPUThreshold,
			"must be a utilization within [0, 1] (0: always shed above maxInFlight)"),
		checkWithin("cpu_decay", c.CPUDecay, '[', 0, 1, ')'),
	)
}

// New validates the configuration and returns a controller.
func (c *BBRConfig) New() (sluice.Controller, error) { return NewBBR(*c) }

// BBR is the BBR-style load shedder of go-kratos/aegis
// (ratelimit/bbr/bbr.go; docs/algorithms.md §8): by Little's law the
// service holds at most maxPass·minRT requests in flight at its best, and
// while the CPU is hot, requests beyond that are dropped.
//
// Each Update closes one bucket of the current period: pass = the
// completions of the interval (all of them, failed ones too, as aegis
// counts them; spread over Elapsed when that is longer than the period)
// and rt = the interval's mean service time of successful requests.
// Buckets older than the window drop out. Then, with the period h in
// seconds (1/h buckets per second):
//
//	maxPass     = max(1, largest pass of a bucket in the window)
//	minRT       = smallest rt of a bucket in the window, seconds
//	maxInFlight = ⌊maxPass·minRT/h⌋
//
// aegis drops a request when inFlight > 1 and inFlight > maxInFlight; the
// stage does the same with Decision.New = max(maxInFlight, 1) + 1 (it
// admits while fewer than New are in service), MaxWait −1 (rejected at
// once), while shedding is on:
//
//	shedding = cpu ≥ cpu_threshold  or  now − lastDrop ≤ 1 s
//
// where cpu is Measurements.Utilization smoothed by cpu_decay per 500 ms
// from 0 (aegis's decay-0.95 average, also from 0), and lastDrop is the end
// of the last interval in which the gate, on because of the CPU, rejected
// requests (Measurements.Rejected > 0). Outside shedding the gate is off
// (Decision.GateOff, admit all); New still shows the limit shedding would
// apply. cpu_threshold 0 means the CPU condition always holds.
//
// No CPU sensor: when Utilization is NaN (or ±Inf) the CPU condition is
// taken as met, and the reason says so. sluice often guards a service whose
// CPU it cannot see; there BBR sheds on Little's law alone.
//
// The cool-down is fixed: aegis keeps the time of the first drop of an
// overload only (it stores the drop time when none is set), so after a
// long overload the cool-down has long lapsed and shedding stops the moment
// the CPU dips below the threshold. Here every drop made while the CPU
// condition holds refreshes the drop time, so shedding always runs 1 s past
// the last hot drop. Drops made during the cool-down do not extend it, as
// in aegis (go-zero's adaptive shedder refreshes on those too).
//
// The floor is aegis's, not the + 0.5 rounding its source seems to write
// (and PEER-ALGORITHMS.md copied): aegis v0.2.0 computes
// int64(math.Floor(x) + 0.5), and the conversion truncates the half away,
// so maxInFlight = ⌊x⌋. Measured against aegis itself (tools/peerref,
// docs/experiments.md) the rounded form let one more request in and
// ratcheted up from there. aegis's x is integer arithmetic (whole
// milliseconds); here x gets 1e-9 added before the floor so that a
// product such as 10·0.05/0.1 is not cut to 4 by a binary fraction.
//
// Other departures: aegis v0.2.0 measures RT per request in whole
// milliseconds rounded down (its later master rounds up), and minRT at
// least 1 ms; here service times are seconds as
// measured (a sub-millisecond service gets a proportionally smaller
// maxInFlight). aegis's buckets per second is an integer division; here
// 1/h exactly. Its RT includes failed requests; the runner's service
// times do not. aegis skips the bucket in progress; here the bucket that
// just closed counts, since the decision governs the next one. With no
// service-time sample in the window aegis falls back to minRT = 1 ms,
// which admits only two requests at a hot start; here the gate stays off
// until a bucket has samples (Acted false).
//
// By priority (stage.Priority, on by default): while BBR sheds, a class
// is admitted only below its threshold of the limit, so the lowest class
// is refused first; aegis has no classes.
type BBR struct {
	cfg      BBRConfig
	maxCount int // buckets a window holds
	buckets  []bbrBucket

	cpu      float64
	lastDrop time.Time
	dropped  bool // lastDrop is set
	hot      bool // the decision in force sheds because of the CPU

	cur sluice.Decision
}

// bbrBucket is one period's completions and mean service time.
type bbrBucket struct {
	at   time.Time
	pass float64
	rt   float64 // seconds; NaN without samples
}

var _ sluice.Controller = (*BBR)(nil)

// NewBBR returns a BBR shedder for a validated copy of cfg. It starts with
// the gate off.
func NewBBR(cfg BBRConfig) (*BBR, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	n := int((cfg.Window + cfg.Period - 1) / cfg.Period)
	b := &BBR{cfg: cfg, maxCount: n, buckets: make([]bbrBucket, 0, min(n, 1024))}
	b.cur = sluice.Decision{Controller: "bbr", Kind: sluice.KindConcurrency, Old: 2, New: 2, GateOff: true, MaxWait: -1,
		Reason: "initial: no estimate yet, gate off (2 is aegis's limit without data)"}
	return b, nil
}

// Period returns the bucket length.
func (b *BBR) Period() time.Duration { return b.cfg.Period }

// Current returns the setting in force.
func (b *BBR) Current() sluice.Decision { return b.cur }

// CPU returns the smoothed CPU utilization in [0, 1].
func (b *BBR) CPU() float64 { return b.cpu }

// Estimate returns maxPass, minRT (seconds) and maxInFlight over the
// window; ok is false while no bucket has service-time samples.
func (b *BBR) Estimate() (maxPass, minRT, maxInFlight float64, ok bool) {
	maxPass, minRT = 1, math.Inf(1)
	for _, k := range b.buckets {
		maxPass = math.Max(maxPass, k.pass)
		if !math.IsNaN(k.rt) {
			minRT = math.Min(minRT, k.rt)
		}
	}
	if math.IsInf(minRT, 1) {
		return maxPass, 0, 0, false
	}
	return maxPass, minRT, math.Min(math.Floor(maxPass*minRT/b.cfg.Period.Seconds()+1e-9), bbrMaxLimit), true
}

// Update closes the period's bucket and decides whether to shed.
func (b *BBR) Update(now time.Time, m sluice.Measurements) sluice.Decision {
	old := b.cur.New
	el := m.Elapsed
	if el <= 0 {
		el = b.cfg.Period
	}
	cpuKnown := mathx.Finite(m.Utilization)
	if cpuKnown {
		u := clamp(m.Utilization, 0, 1)
		d := 0.0
		if b.cfg.CPUDecay > 0 {
			d = math.Pow(b.cfg.CPUDecay, float64(el)/float64(bbrCPUSample))
		}
		b.cpu = b.cpu*d + u*(1-d)
	}
	if b.hot && !b.cur.GateOff && usable(m.Rejected) && m.Rejected > 0 {
		b.lastDrop, b.dropped = now, true
	}
	b.addBucket(now, el, m)

	maxPass, minRT, mif, ok := b.Estimate()
	if !ok {
		b.hot = false
		return b.decide(now, m, old, old, false, true,
			fmt.Sprintf("no service-time samples in the last %s: no estimate, gate off", b.cfg.Window))
	}
	limit := math.Max(mif, 1) + 1
	est := fmt.Sprintf("maxInFlight ⌊maxPass %.4g × minRT %s × %.4g/s⌋ = %.0f", maxPass, fmtSec(minRT), 1/b.cfg.Period.Seconds(), mif)

	var cond string
	hot := true
	switch {
	case !cpuKnown:
		cond = "no CPU reading (sensor not bound): CPU condition taken as met"
	case b.cfg.CPUThreshold == 0:
		cond = fmt.Sprintf("CPU %.3f, cpu_threshold 0: always", b.cpu)
	case b.cpu >= b.cfg.CPUThreshold:
		cond = fmt.Sprintf("CPU %.3f ≥ %.3g", b.cpu, b.cfg.CPUThreshold)
	default:
		hot = false
		cond = fmt.Sprintf("CPU %.3f < %.3g", b.cpu, b.cfg.CPUThreshold)
	}
	b.hot = hot
	if !hot {
		if since := now.Sub(b.lastDrop); b.dropped && since <= bbrCoolDown {
			cond += fmt.Sprintf(", last drop %s ago (cool-down %s)", since, bbrCoolDown)
		} else {
			return b.decide(now, m, old, limit, true, true, fmt.Sprintf("%s, no drop in the last %s: gate off (%s)", cond, bbrCoolDown, est))
		}
	}
	return b.decide(now, m, old, limit, true, false,
		fmt.Sprintf("%s: shedding, %s: admit while in service ≤ %.0f (limit %.0f)", cond, est, limit-1, limit))
}

// addBucket records the period's bucket and drops those out of the window.
func (b *BBR) addBucket(now time.Time, el time.Duration, m sluice.Measurements) {
	k := bbrBucket{at: now, rt: math.NaN()}
	if usable(m.Completed) {
		k.pass = m.Completed
		if el > b.cfg.Period {
			k.pass *= float64(b.cfg.Period) / float64(el)
		}
	}
	if usable(m.ServiceSamples) && m.ServiceSamples >= 1 && usable(m.ServiceMean) && m.ServiceMean > 0 {
		k.rt = m.ServiceMean
	}
	cut := now.Add(-b.cfg.Window)
	keep := b.buckets[:0]
	for _, x := range b.buckets {
		if x.at.After(cut) {
			keep = append(keep, x)
		}
	}
	keep = append(keep, k)
	if len(keep) > b.maxCount {
		keep = keep[len(keep)-b.maxCount:]
	}
	b.buckets = keep
}

func (b *BBR) decide(now time.Time, m sluice.Measurements, old, limit float64, acted, gateOff bool, reason string) sluice.Decision {
	d := decision(now, "bbr", sluice.KindConcurrency, m, old, limit, acted, reason)
	d.MaxWait, d.GateOff = -1, gateOff
	b.cur = d
	return d
}

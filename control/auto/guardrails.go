// SPDX-License-Identifier: Apache-2.0

package auto

import (
	"fmt"
	"math"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/control/internal/ctl"
	"github.com/sluicehq/sluice/internal/mathx"
)

// guardrails is the state of auto's guardrails, each off by default (see
// Auto): MinRate's open gate, Warmup's fast start and MaxHealthyLatency's
// latency guard. MaxRejectFraction has no state: the decision carries it
// and the stage applies it. The tail guard (TailGuard) reads the
// estimates alone (mayRaise, tailCut).
type guardrails struct {
	started  time.Time // the first Update's now (zero before it)
	warmLeft float64   // s of Warmup left after the last step
	open     bool      // MinRate holds the gate open
	latGuard bool      // MaxHealthyLatency holds L from rising
}

// step updates the guardrails at now, after a step of el seconds (0 when
// unknown) of measurements m, with R̂99 = rP99 in s: the warm-up left,
// whether R̂99 is over MaxHealthyLatency, and whether the offered rate
// λ = arrivals/el is below MinRate.
func (g *guardrails) step(cfg *Config, now time.Time, m sluice.Measurements, el, rP99 float64) {
	if g.started.IsZero() {
		g.started = now
	}
	g.warmLeft = math.Max(0, (cfg.Warmup - now.Sub(g.started)).Seconds())
	g.latGuard = cfg.MaxHealthyLatency > 0 && mathx.Usable(rP99) && rP99 > cfg.MaxHealthyLatency.Seconds()
	if cfg.MinRate > 0 {
		g.open = el > 0 && m.Arrivals/el < cfg.MinRate
	}
}

// warming reports whether the warm-up is in force.
func (g *guardrails) warming() bool { return g.warmLeft > 0 }

// estimates adds the estimates of the guardrails that are on to e.
func (g *guardrails) estimates(cfg *Config, e map[string]float64) {
	if cfg.MinRate > 0 {
		e["min_rate_open"] = b2f(g.open)
	}
	if cfg.MaxRejectFraction > 0 {
		e["max_reject_fraction"] = cfg.MaxRejectFraction
	}
	if cfg.Warmup > 0 {
		e["warmup_left_s"] = g.warmLeft
	}
	if cfg.MaxHealthyLatency > 0 {
		e["latency_guard"] = b2f(g.latGuard)
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// mayRaise reports whether L may rise: neither the latency guard
// (MaxHealthyLatency) nor the tail (tailRoom) holds it.
func (a *Auto) mayRaise() bool {
	return !a.guard.latGuard && !(a.cfg.TailGuard && mathx.Usable(a.est.rP99) && a.est.rP99 > a.tailRoom())
}

// tailRoom is the service-time p99 that leaves a standing queue its wait
// below the SLO: SLO − standing wait, in s.
func (a *Auto) tailRoom() float64 { return a.cfg.SLO.Seconds() - a.standingWait() }

// tailCut is the tail guard, run when a base window is judged: a
// service-time p99 above tailRoom leaves a standing queue no room under
// the SLO, and above the service's parallelism the excess of L only
// queues inside the service, where a heavy tail makes it costly (a
// request behind a long one). It cuts L ← L/√LowProbe.
func (a *Auto) tailCut() (string, bool) {
	room := a.tailRoom()
	if !a.cfg.TailGuard || !mathx.Usable(a.est.rP99) || a.est.rP99 <= room || a.limit <= a.cfg.MinLimit {
		return "", false
	}
	old := a.limit
	a.limit = mathx.Clamp(a.limit/math.Sqrt(a.cfg.LowProbe), a.cfg.MinLimit, a.cfg.MaxLimit)
	return fmt.Sprintf("L %.4g → %.4g: service p99 %s is over SLO − standing wait (%s)", old, a.limit, ctl.FmtSec(a.est.rP99), ctl.FmtSec(room)), true
}

// SPDX-License-Identifier: Apache-2.0

package auto

import (
	"fmt"
	"math"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/control/internal/ctl"
	"github.com/sluicehq/sluice/internal/mathx"
)

// The Little's-law cut comes back when its cause is gone.
//
// A base window whose mean service time R exceeds SLO/4 cuts L in
// proportion, L ← L·(SLO/4)/R: by Little's law such a limit only queues
// inside the service. But a service can be slow without queueing inside:
// a backend whose capacity dropped, or, at a hop of a chain, a
// downstream that is slow or a host whose cores are busy. Live, through
// a capacity drop to a third in the chain of sluice proxies, the front
// proxy's L went 10.7 → 5.0 in six cuts; when the backend came back its
// service time fell from about 100 ms to 25 ms, and L stayed at 5, just
// under the demand (about 5–6 in service), refusing 10–30 % of some
// seconds until the probes had grown it again, seconds later
// (docs/experiments.md, graph-recover). The probes are slow to grow L on
// purpose (a gain needs two windows), and a high probe that the demand
// does not fill says nothing.
//
// So the cut is two-sided, up to the limit it cut from: auto keeps the
// limit L₀ before the first of a run of cuts, and every step whose tail
// estimate T (the largest per-step p99 over the latest steps that hold
// at least 56 samples, the one R̂99 is a running mean of) is below SLO/4
// raises
//
//	L ← min(L₀, n̄·(SLO/4)/T)
//
// where n̄ is the step's mean number in service: even the slowest of the
// latest requests were faster than the mean that made the cut, and the
// new limit is the largest at which the cut would not fire again even if
// every request took T and the time grew in proportion to the number in
// service (a saturated service, R ∝ n). So a service that is fast only
// because the demand fell (few in service) gets nothing back: its limit
// does not bind, and the cut may have been right. A tail is what makes
// the test safe behind a heavy-tailed service: a step's mean of 20
// lognormal σ 1.5 samples falls below half the true mean one time in
// eight, while the p99 of 56 samples is about their largest, above the
// mean they average to; the service must really have become faster. The
// window in progress restarts at the new limit. A probe that lowers L
// (evidence that the service's parallelism is below what L₀ assumed)
// forgets L₀, and so does L reaching it by any way. The estimate
// cut_from (L₀; 0: none) is in Estimates.
//
// It raises L only where the cut lowered it, and only while the latency
// guard (MaxHealthyLatency) and the tail guard let L rise.

// uncut raises L back towards the limit the Little's-law cut lowered it
// from, when the step's tail estimate shows the cause is gone (see
// above); it reports the reason and whether it did.
func (a *Auto) uncut(m sluice.Measurements) (string, bool) {
	quarter := a.cfg.SLO.Seconds() / 4
	t := a.est.tailNow
	if a.cutFrom <= a.limit || !(m.ServiceSamples > 0) || !mathx.Usable(t) || t <= 0 || t >= quarter || !a.mayRaise() || a.earlyHolds() {
		return "", false
	}
	n := m.InFlight
	if !mathx.Usable(n) || n <= 0 {
		return "", false
	}
	to := math.Min(a.cutFrom, n*quarter/t)
	if to < a.limit+0.5 {
		return "", false
	}
	old := a.limit
	a.limit = mathx.Clamp(to, a.cfg.MinLimit, a.cfg.MaxLimit)
	if a.limit >= a.cutFrom {
		a.cutFrom = 0
	}
	a.restart()
	a.win = window{limit: a.windowLimit()}
	return fmt.Sprintf("L %.4g → %.4g: service p99 %s (latest steps) is below SLO/4 at %.3g in service: the Little's-law cut is undone",
		old, a.limit, ctl.FmtSec(t), n), true
}

// SPDX-License-Identifier: Apache-2.0

package auto

import (
	"fmt"
	"math"

	"github.com/sluicehq/sluice/internal/mathx"
)

// The knee from overtakes (Config.Knee "overtakes", a named option,
// off by default).
//
// A service of W workers that serves its queue in order lets a request
// that queued inside it take a worker when all but W − 1 of the requests
// ahead of it have left. Counted when a request leaves service, the
// number of earlier requests still in service is therefore at most
// min(n, W) − 1 for n in service, and a short request among many reaches
// it (Measurements.Parallel is a step's largest count plus one). Over a
// window
//
//	k = max Parallel = min(n, W)   (up to sampling),
//
// so a window whose k stays below the concurrency it ran at,
// k < 0.9·min(L_w, n̄), shows the knee: Ŵ = k, and L ← min(L, Ŵ), with k
// the largest of the latest three windows that read it (a window of a few
// hundred completions may miss the rare overtake of W − 1). This
// reads W in one window at any L above it, with no probe below the
// knee: the throughput ratio needs a probe on each side of W and is
// noise behind a heavy-tailed service time (a window of 200 lognormal
// σ 1.5 service times has a coefficient of variation of 0.2), which is
// how L drifts above W and queues requests inside the service, where
// each one adds 1/X to everyone's time.
//
// While Ŵ is known: the low probe, which would only lose throughput
// below it, is skipped when L/b < Ŵ, and a shrink never goes below Ŵ;
// the high probe goes no further than max(⌈1.25·Ŵ⌉, Ŵ + 1), enough to
// see the service grow. A window that ran above Ŵ with k ≥ 0.9·min(L_w,
// n̄) forgets Ŵ (the service grew), and a high probe whose k reached its
// concurrency takes it at once, filled (L ← L_probe, the probe's gain
// doubling) or not (L ← k): the service ran it all in parallel.
//
// k means something only when the service times vary: with equal ones
// no request overtakes another whatever W is. It is read only while
// R̂99 ≥ 3 × the window's median service time (exponential service:
// 6.6; lognormal σ 1.5: 32; uniform 10–30 ms: 1.5). A service that
// shares its workers (processor sharing) lets a short request overtake
// every one: k = n, and the probes judge alone.
//
// A service of several servers (a proxy's pool of backends, each with its
// own workers and queue) is not one ordered queue: requests sent to a fast
// server overtake a slow one's whatever their workers. The stage counts
// overtakes among the requests of the same server (stage.Ticket.SentTo),
// and Parallel is the sum over the servers, Σ min(n_s, W_s): the workers
// of the whole service, at which the limit keeps no request waiting
// inside a server.
//
// The stage orders requests by when they reached the service and
// forgives orders closer than KneeTolerance (stage/overtake.go): live,
// the order a proxy sees differs from the workers' by a millisecond or
// so, and each such swap would read as one overtake more than W allows.
//
// k counts the requests in the service, not the time a request holds
// its slot outside it: the proxy's own time before it writes the request
// and after the answer's first byte. So where the proxy measures it
// (Measurements.BackendShare: the share s of the time in service from the
// request's write to its answer's first byte), k and the cap are read in
// slots: by Little's law n̄·s of n̄ in service are in the service, and its
// workers are full at n̄ = W/s. The test becomes k/s < 0.9·min(L_w, n̄),
// and Ŵ = k/s. In virtual time and in the middleware s is not measured
// and taken as 1.
//
// A cap at W also leaves a worker idle through the service's own
// turnaround, from a completion to the next request's arrival, which no
// queue inside the service hides: where that is a large part of the
// service time the cap costs throughput (with the backend, the proxy and
// the load generator each in a process of its own on two busy cores, 4
// workers of exponential 10 ms service gave 352–370 req/s a second in a
// crowd at the cap of 4, 367–399 with the limit held at 5 and 375–413 at
// 6). So a window at the cap keeps one request on deck inside the
// service: the decision's limit is Ŵ + 1 while L stays Ŵ (the probes and
// the overtake test still read the window at Ŵ), and the deck request
// takes the first worker to free. It waits there for at most the
// shortest residual of Ŵ service times, which behind a heavy tail can be
// long, so the deck is kept only while the tail leaves half the SLO:
// max(R̂99, the latest step's estimate) ≤ SLO/2 (deckTail). The latest
// step's estimate and not R̂99 alone, because R̂99 is a running mean: a
// deck earlier held to a mean service time of room above R̂99 stayed on
// through a lognormal capacity halving until R̂99 caught up, and put that
// phase's p99 at 255 ms against 245 without it (live, 2026-11-28). At
// SLO 250 ms, 10 ms mean: exponential (p99 46 ms; 92 halved) keeps the
// deck, lognormal σ 1.5 (106; 212 halved) and Pareto α 1.5 (72; 144
// halved) keep it until their service halves. Estimate deck (1 or 0).
//
// It is off by default:
// live, seeds 1–3 of three heavy-tailed services met all but one or two of
// the adaptive figure's checks per run without the deck (docs/experiments.md,
// 2026-11-27 20:20 – 11-28 00:17), and the other figures that use auto are
// to be rerun with it before it becomes the default.

// Bounds of the overtake test.
const (
	// overtakeFill: a window shows the knee when k < overtakeFill × its
	// concurrency.
	overtakeFill = 0.9
	// overtakeSpread: k is read while R̂99 ≥ overtakeSpread × median.
	overtakeSpread = 3
	// overtakeProbe: while Ŵ is known, the high probe goes to at most
	// max(⌈overtakeProbe·Ŵ⌉, Ŵ + 1).
	overtakeProbe = 1.25
	// overtakeMinShare bounds the backend's share s of the time in
	// service from below: the cap is at most k/overtakeMinShare.
	overtakeMinShare = 0.2
	// overtakeMemory: the knee is the largest k of the latest
	// overtakeMemory windows that read it.
	overtakeMemory = 3
	// deckTail: a request is on deck above the knee while the service's
	// tail, max(R̂99, the latest step's), is at most deckTail × the SLO.
	deckTail = 0.5
)

// Knee values of Config.
const (
	KneeOvertakes = "overtakes"
	KneeProbes    = "probes"
)

// kneeFromOvertakes reports whether auto reads the knee from overtakes.
func (c *Config) kneeFromOvertakes() bool { return c.Knee == KneeOvertakes }

// overtakes returns the window's k = max Parallel / s and the
// concurrency it ran at, min(L_w, n̄), when the overtake test may read
// them; s is the backend's share of the time in service (see
// backendShare).
func (a *Auto) overtakes(w window) (k, n float64, ok bool) {
	if !a.cfg.kneeFromOvertakes() || !(w.par > 0) || w.done < 10 || w.p50n == 0 || !mathx.Usable(a.est.rP99) ||
		!(a.est.rP99 >= overtakeSpread*w.sumP50/w.p50n) {
		return 0, 0, false
	}
	n = w.meanN()
	if n < 0.8*w.limit {
		// Demand did not fill the window: its peak in service is what
		// the overtakes are held to.
		n = w.peak
	}
	return w.par / w.backendShare(), math.Min(w.limit, n), true
}

// backendShare is the window's s = Σ BackendShare·completions /
// Σ completions, within [overtakeMinShare, 1]; 1 when not measured.
func (w window) backendShare() float64 {
	if !(w.shareN > 0) {
		return 1
	}
	return min(max(w.shareSum/w.shareN, overtakeMinShare), 1)
}

// deck returns how many requests auto keeps on deck inside the service
// above the knee for a window at limit: 1 while Ŵ is known, the window
// sits at the cap (limit ≤ round(Ŵ)) and the service's tail leaves half
// the SLO, max(R̂99, the latest step's estimate) ≤ deckTail·SLO; else 0.
// The latest step's estimate, not R̂99 alone, so that a tail that grows
// (a capacity halving) takes the deck away at the step it shows, not as
// the running mean catches up.
func (a *Auto) deck(limit float64) float64 {
	if a.knee.w <= 0 || limit > math.Round(a.knee.w) || !mathx.Usable(a.est.rP99) {
		return 0
	}
	if tail := math.Max(a.est.rP99, a.est.tailNow); !(tail <= deckTail*a.cfg.SLO.Seconds()) {
		return 0
	}
	return 1
}

// withDeck returns the decision's limit for a window at limit: limit plus
// the deck, within MaxLimit (window limits are clamped to it).
func (a *Auto) withDeck(limit float64) float64 {
	return math.Min(limit+a.deck(limit), a.cfg.MaxLimit)
}

// highProbe bounds a high probe's limit hi while the knee is known.
func (a *Auto) highProbe(hi float64) float64 {
	if a.knee.w > 0 {
		// Ŵ = k/s is fractional where the backend's share s < 1: the
		// probe is held to the workers it read, rounded (4.03 → 5, not 6).
		w := math.Max(math.Round(a.knee.w), 1)
		hi = math.Min(hi, math.Max(math.Ceil(overtakeProbe*w), w+1))
	}
	return hi
}

// kneeState is the knee from overtakes: Ŵ and what it is read from.
type kneeState struct {
	w     float64                 // Ŵ, the parallelism the overtakes showed (0: unknown)
	seen  [overtakeMemory]float64 // k of the latest windows that read it
	next  int                     // where the next window's k goes in seen
	share float64                 // the last judged window's backend share s (0: none yet)
}

// remember records a window's k and returns the largest k of the latest
// overtakeMemory windows: a window of a few hundred completions may miss
// the rare overtake of W − 1 (a light-bodied tail such as Pareto's: most
// requests near the shortest), and one that misses it would read the
// knee one low.
func (s *kneeState) remember(k float64) float64 {
	s.seen[s.next] = k
	s.next = (s.next + 1) % overtakeMemory
	for _, v := range s.seen {
		k = math.Max(k, v)
	}
	return k
}

// overtakeCap runs on every judged window: a window whose completions
// overtook fewer than its concurrency shows the knee, Ŵ = k, and caps L
// at it; one that ran above Ŵ without showing it forgets Ŵ.
func (a *Auto) overtakeCap(w window) (string, bool) {
	a.knee.share = w.backendShare()
	k, n, ok := a.overtakes(w)
	if !ok {
		return "", false
	}
	k = a.knee.remember(k)
	if !(k < overtakeFill*n) {
		if a.knee.w > 0 && w.limit > a.knee.w {
			a.knee.w = 0
		}
		return "", false
	}
	a.knee.w = k
	if k >= a.limit {
		return "", false
	}
	old := a.limit
	a.limit = mathx.Clamp(k, a.cfg.MinLimit, a.cfg.MaxLimit)
	a.restart()
	return fmt.Sprintf("L %.4g → %.4g: window %g: its completions overtook at most %g of the %.3g in service, %.0f%% of whose time was in the backend: the service runs %.3g slots in parallel", old, a.limit, w.limit, w.par-1, n, 100*a.knee.share, k), true
}

// overtakeGrow judges a filled high probe whose completions overtook as
// many as it ran: the service ran it all in parallel, L takes it at once
// and the next probe goes twice as far.
func (a *Auto) overtakeGrow(w window) (string, bool) {
	k, n, ok := a.overtakes(w)
	if !ok || !(k >= overtakeFill*n) || !(w.limit > a.limit) || !a.mayRaise() {
		return "", false
	}
	old := a.limit
	a.limit = mathx.Clamp(w.limit, a.cfg.MinLimit, a.cfg.MaxLimit)
	a.gain = math.Min(4, a.gain*2)
	a.base, a.phase, a.pending = w, phaseHigh1, false
	return fmt.Sprintf("L %.4g → %.4g: high probe %g: its completions overtook %g: the service ran it all in parallel; next probe ×%g", old, a.limit, w.limit, w.par-1, a.gain), true
}

// overtakeUnfilled judges a high probe that demand did not fill (n̄ <
// 0.8·L_w), whose completions overtook as many as were in service: the
// service ran the demand's concurrency in parallel, and L ← k.
func (a *Auto) overtakeUnfilled(w window) (string, bool) {
	k, n, ok := a.overtakes(w)
	if !ok || !a.phase.isHigh() || !(w.meanN() < 0.8*w.limit) || !(k > a.limit) ||
		!(k >= overtakeFill*n) || !a.mayRaise() {
		return "", false
	}
	old := a.limit
	a.limit = mathx.Clamp(math.Min(k, w.limit), a.cfg.MinLimit, a.cfg.MaxLimit)
	a.restart()
	return fmt.Sprintf("L %.4g → %.4g: high probe %g was not filled (n̄ %.3g), and its completions overtook %g", old, a.limit, w.limit, n, w.par-1), true
}

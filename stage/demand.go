// SPDX-License-Identifier: Apache-2.0

package stage

import "github.com/sluicehq/sluice"

// DemandRatio is the stage's offered load over the capacity its
// controller grants, measured over the stage's last control period: the
// number an autoscaler scales on (sluice_demand_ratio). Above 1 the stage
// is refusing or queueing work that more capacity would serve; below 1 it
// has headroom. With the sums over the classes of the last period —
// offered O and admitted A requests, its length T in seconds, and the
// mean response time W̄ in seconds of its samples —
//
//	concurrency limit L:  D = (O/T)·W̄ / L   (Little's law: the offered
//	                                         concurrency over the limit;
//	                                         (in-flight + queued) / L when
//	                                         the period had no sample)
//	rate limit r (req/s): D = (O/T) / r     (r summed over the classes of a
//	                                         class-aware rate)
//	any other gate, or a gate switched off: D = O / A, 1 when nothing was
//	                                         refused (a drop probability p
//	                                         gives 1/(1−p))
//
// and D = 0 when nothing was offered. ok is false before the first
// control period, when there is nothing to measure yet.
func (st State) DemandRatio() (d float64, ok bool) {
	var o, a, samples, wsum, elapsed float64
	for _, c := range st.Classes {
		l := c.Last
		if l == nil {
			continue
		}
		ok = true
		o += l.Offered
		a += l.Admitted
		samples += float64(l.Samples)
		wsum += float64(l.Samples) * l.MeanMS / 1e3
		elapsed = max(elapsed, l.Elapsed.Seconds())
	}
	if !ok {
		return 0, false
	}
	if o == 0 {
		return 0, true
	}
	switch {
	case st.GateOff:
	case st.Kind == sluice.KindConcurrency.String() && st.InFlightLimited != nil && st.InFlightLimited.Limit > 0:
		lim := float64(st.InFlightLimited.Limit)
		if samples == 0 || elapsed <= 0 {
			return float64(st.InFlightLimited.InFlight+st.InFlightLimited.Queued) / lim, true
		}
		return o / elapsed * (wsum / samples) / lim, true
	case st.Kind == sluice.KindRate.String() && elapsed > 0:
		r := st.Setting
		if len(st.ClassRates) > 0 {
			r = 0
			for _, cr := range st.ClassRates {
				r += cr
			}
		}
		if r > 0 {
			return o / elapsed / r, true
		}
	}
	if a == 0 {
		// Everything refused: the ratio is unbounded; report the offered
		// count, so that it is large and still finite.
		return o, true
	}
	return o / a, true
}

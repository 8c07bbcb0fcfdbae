// SPDX-License-Identifier: Apache-2.0

package figure

import (
	"fmt"
	"math"
	"time"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/optimize/convex/lp"
)

// GoodputBoundAt returns the most user requests per second that any
// controller could complete at time t of scenario s, whatever it
// admits: the linear program
//
//	maximise Σ_a x_a  subject to  Σ_a x_a·w_ak ≤ n_k for every service k,
//	                              0 ≤ x_a ≤ λ_a(t) for every API a,
//
// where x_a is the rate of API a served (requests/s), w_ak the CPU time
// one of its requests takes at service k then (seconds, with the
// scenario's factors), n_k the service's servers (instances × workers)
// and λ_a(t) what the streams offer. Unlike CapacityAt, which shares the
// services' time fairly among the APIs, the bound favours whatever
// completes most requests per CPU second: it serves the cheap API first,
// and is what a goodput counted in requests can reach at the most. It
// ignores queueing and latency, so no run can beat it; a request sent in
// one second and served in the next moves at most the deadline's worth
// of work across a second's edge. Solved by gonum's simplex (standard
// form, slack basis).
func (c HotelParams) GoodputBoundAt(g *HotelGraph, s HotelScenario, streams []HotelStream, t time.Duration) (float64, error) {
	nA, nS := len(g.APIs), len(g.Services)
	offered := make([]float64, nA)
	for _, st := range streams {
		offered[st.API] += st.Rate.At(t)
	}
	// Columns: x_a (nA), the services' slacks (nS), the offers' slacks
	// (nA). Rows: the services, then the offers.
	cols := 2*nA + nS
	a := mat.NewDense(nS+nA, cols, nil)
	b := make([]float64, nS+nA)
	cost := make([]float64, cols)
	basis := make([]int, nS+nA)
	for i := range nA {
		cost[i] = -1
		w := g.demand(i, func(svc int) float64 { return s.Factor(g, i, svc, t) })
		for k, v := range w {
			a.Set(k, i, v)
		}
		a.Set(nS+i, i, 1)
		a.Set(nS+i, nA+nS+i, 1)
		b[nS+i] = offered[i]
		basis[nS+i] = nA + nS + i
	}
	for k, sv := range g.Services {
		a.Set(k, nA+k, 1)
		b[k] = float64(sv.Instances * sv.Workers)
		basis[k] = nA + k
	}
	f, _, err := lp.Simplex(cost, a, b, 1e-10, basis)
	if err != nil {
		return 0, fmt.Errorf("graph %s, %s at %v: the goodput bound's linear program: %w", g.Name, s.Name, t, err)
	}
	return -f, nil
}

// stormBound returns the mean of GoodputBoundAt over the seconds the
// storm goodput counts (the event and HotelStormSettle after it),
// sampled at each second's middle as the capacity series is.
func (c HotelParams) stormBound(g *HotelGraph, s HotelScenario, streams []HotelStream) (float64, error) {
	from, to := s.stormWindow()
	sum := 0.0
	for i := from; i < to; i++ {
		v, err := c.GoodputBoundAt(g, s, streams, time.Duration(i)*time.Second+time.Second/2)
		if err != nil {
			return 0, err
		}
		sum += v
	}
	return sum / float64(max(to-from, 1)), nil
}

// stormWindow returns the seconds, [from, to), over which the storm
// goodput and its bound are averaged: from the event's start to
// HotelStormSettle after its end, within the run's seconds.
func (s HotelScenario) stormWindow() (from, to int) {
	n := int(math.Ceil(s.Stop.Seconds()))
	return int(s.Start / time.Second), min(int((s.End+HotelStormSettle)/time.Second), n)
}

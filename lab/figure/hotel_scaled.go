// SPDX-License-Identifier: Apache-2.0

package figure

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"
)

// HotelGraphScaled returns the hotel graph grown to n services and m
// instances, for the scale on paper (virtual time only). The hotel's
// shape is kept and repeated: K = ⌊2(n−1)/7⌋ families, each with its own
// search, geo and reservation services, and R = n − 1 − 3K shared rate
// backends, family k's on rate k mod R (so that two families share most
// rates); one frontend (the entry) for all. Each family has the hotel's
// three APIs (search_k, reserve_k, prefetch_k) with the hotel's work at
// every step, and the families share the load equally.
//
// The m instances (one worker each) go to the services in proportion to
// the work they get per request over a target utilization at C — 1 for
// the rate backends, 0.3 for the others — so that, as in the hotel, the
// shared backends are the bottleneck and every other service has
// headroom; every service gets at least one instance.
func HotelGraphScaled(n, m int) (*HotelGraph, error) {
	if n < 5 || m < n {
		return nil, fmt.Errorf("scaled graph: %d services and %d instances: want ≥ 5 services and at least one instance each", n, m)
	}
	small := HotelGraphSmall()
	k := 2 * (n - 1) / 7
	r := n - 1 - 3*k
	g := &HotelGraph{Name: fmt.Sprintf("hotel×%d", k), Entry: 0}
	g.Services = append(g.Services, HotelService{Name: "frontend", Instances: 1, Workers: 1})
	rates := make([]int, r)
	for j := range r {
		rates[j] = len(g.Services)
		g.Services = append(g.Services, HotelService{Name: "rate" + strconv.Itoa(j), Instances: 1, Workers: 1, Shared: true})
	}
	for f := range k {
		idx := map[int]int{HotelFrontend: 0, HotelRate: rates[f%r]}
		for _, s := range []int{HotelSearch, HotelGeo, HotelReservation} {
			idx[s] = len(g.Services)
			g.Services = append(g.Services, HotelService{Name: small.Services[s].Name + strconv.Itoa(f), Instances: 1, Workers: 1})
		}
		var remap func(st HotelStep) HotelStep
		remap = func(st HotelStep) HotelStep {
			out := HotelStep{Service: idx[st.Service], Work: st.Work}
			for _, c := range st.Calls {
				out.Calls = append(out.Calls, remap(c))
			}
			return out
		}
		for _, a := range small.APIs {
			g.APIs = append(g.APIs, HotelAPI{Name: a.Name + strconv.Itoa(f), Low: a.Low, Heavy: a.Heavy,
				Share: a.Share / float64(k), Root: remap(a.Root)})
		}
	}
	// Instances in proportion to each service's work at the high mix over
	// its target utilization.
	mix := make([]float64, len(g.APIs))
	for i, a := range g.APIs {
		if !a.Low {
			mix[i] = a.Share
		}
	}
	weight := make([]float64, len(g.Services))
	for a, share := range mix {
		if share == 0 {
			continue
		}
		for s, w := range g.demand(a, func(int) float64 { return 1 }) {
			target := 0.3
			if g.Services[s].Shared {
				target = 1
			}
			weight[s] += share * w / target
		}
	}
	var sum float64
	for _, w := range weight {
		sum += w
	}
	left := m
	for s := range g.Services {
		g.Services[s].Instances = max(1, int(math.Floor(float64(m)*weight[s]/sum)))
		left -= g.Services[s].Instances
	}
	// What rounding left over goes to the services with the most work
	// per instance, one at a time.
	for left != 0 {
		per := func(s int) float64 { return weight[s] / float64(g.Services[s].Instances) }
		order := make([]int, len(g.Services))
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(a, b int) int {
			pa, pb := per(a), per(b)
			switch {
			case pa > pb:
				return -1
			case pa < pb:
				return 1
			}
			return 0
		})
		if left > 0 {
			g.Services[order[0]].Instances++
			left--
			continue
		}
		for i := len(order) - 1; i >= 0; i-- {
			if s := order[i]; g.Services[s].Instances > 1 {
				g.Services[s].Instances--
				left++
				break
			}
		}
	}
	return g, g.Validate()
}

// Instances returns the total number of instances of g.
func (g *HotelGraph) Instances() int {
	n := 0
	for _, s := range g.Services {
		n += s.Instances
	}
	return n
}

// Work returns the work of API api's steps at service svc, summed.
func (g *HotelGraph) Work(api, svc int) time.Duration {
	return time.Duration(g.demand(api, func(int) float64 { return 1 })[svc] * float64(time.Second))
}

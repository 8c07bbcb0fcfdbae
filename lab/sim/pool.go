// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"fmt"
	"math"
)

// Pool is a Station that spreads jobs over member stations as the
// proxy's `least-in-flight` balance does: each job goes to the member
// with the fewest jobs in system, ties broken in rotation. A member's
// jobs have their work multiplied by its scale (1 at first), so that one
// member can become slower than the others, as a backend of a pool does.
type Pool struct {
	members []Station
	weights []float64
	scales  []float64
	next    int
}

var _ Station = (*Pool)(nil)

// NewPool returns a pool of members; weights[i] > 0 is member i's share
// of the pool's capacity in Busy (for FIFO members, their servers).
func NewPool(members []Station, weights []float64) (*Pool, error) {
	if len(members) == 0 {
		return nil, fmt.Errorf("pool: no members")
	}
	if len(weights) != len(members) {
		return nil, fmt.Errorf("pool: %d weights for %d members", len(weights), len(members))
	}
	scales := make([]float64, len(members))
	for i, w := range weights {
		if members[i] == nil {
			return nil, fmt.Errorf("pool: member %d is nil", i)
		}
		if !(w > 0) || math.IsInf(w, 0) {
			return nil, fmt.Errorf("pool: weight %d = %g: want a positive number", i, w)
		}
		scales[i] = 1
	}
	return &Pool{members: members, weights: weights, scales: scales}, nil
}

// SetScale multiplies the work of the jobs submitted to member i from now
// on by f (> 0).
func (p *Pool) SetScale(i int, f float64) error {
	if i < 0 || i >= len(p.members) {
		return fmt.Errorf("pool: member %d of %d", i, len(p.members))
	}
	if !(f > 0) || math.IsInf(f, 0) {
		return fmt.Errorf("pool: scale %g: want a positive number", f)
	}
	p.scales[i] = f
	return nil
}

// Submit hands j to the member with the fewest jobs in system, scanning
// from the one after the last chosen, and tells j's request which
// (Request.OnRoute).
func (p *Pool) Submit(j *Job) {
	n := len(p.members)
	best, bestN := -1, 0
	for k := range n {
		i := (p.next + k) % n
		if m := p.members[i].InSystem(); best < 0 || m < bestN {
			best, bestN = i, m
		}
	}
	p.next = (best + 1) % n
	j.Work *= p.scales[best]
	if j.Req != nil {
		j.Req.routed(best)
	}
	p.members[best].Submit(j)
}

// InSystem returns the jobs waiting or in service at all members.
func (p *Pool) InSystem() int {
	n := 0
	for _, m := range p.members {
		n += m.InSystem()
	}
	return n
}

// Waiting returns the jobs waiting at all members.
func (p *Pool) Waiting() int {
	n := 0
	for _, m := range p.members {
		n += m.Waiting()
	}
	return n
}

// Busy returns the members' busy times weighted by their weights: the
// pool's utilization over an interval is the difference of two readings
// over the interval's length.
func (p *Pool) Busy() float64 {
	var b, w float64
	for i, m := range p.members {
		b += p.weights[i] * m.Busy()
		w += p.weights[i]
	}
	return b / w
}

// Backlog returns the work not yet served at all members.
func (p *Pool) Backlog() float64 {
	var b float64
	for _, m := range p.members {
		b += m.Backlog()
	}
	return b
}

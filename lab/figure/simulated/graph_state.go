// SPDX-License-Identifier: Apache-2.0

package simulated

import (
	"time"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/lab/figure"
	"github.com/sluicehq/sluice/stage"
)

// hopProbe is a sluice element of the chain whose state is sampled: a
// client side's destination or a hop's stage.
type hopProbe struct {
	name string
	dest *client.Dest
	st   *stage.Stage
}

// stateEvery is how often the chain's state is sampled.
const stateEvery = 100 * time.Millisecond

func (ch *chainSim) probeDest(name string, d *client.Dest) {
	ch.probes = append(ch.probes, hopProbe{name: name, dest: d})
}

func (ch *chainSim) probeStage(name string, st *stage.Stage) {
	ch.probes = append(ch.probes, hopProbe{name: name, st: st})
}

// sample records every probe's state now. It changes nothing the chain
// decides: a destination's window only moves to now, as its next
// decision would move it.
func (ch *chainSim) sample() {
	now := ch.e.Now()
	for _, p := range ch.probes {
		s := figure.NaNState(now, p.name)
		if p.dest != nil {
			s.ThrottleP = p.dest.ThrottleProbability(ch.e.Time())
			s.Forgets = float64(p.dest.Counts().Forgets)
		}
		if p.st != nil {
			s = figure.StageState(now, p.name, p.st.State(0))
		}
		ch.run.State = append(ch.run.State, s)
	}
}

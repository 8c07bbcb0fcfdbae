// SPDX-License-Identifier: Apache-2.0

package dist

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// Alternate switches between two arrival processes at fixed offsets:
// Processes[0] until Switches[0], Processes[1] until Switches[1],
// Processes[0] again, and so on. At a switch the process now in force
// starts afresh from the switch's offset (a constant rate's next arrival
// is one gap after it; a Poisson process is memoryless), so arrivals
// never straddle a switch. It compares two processes under the same
// conditions, for example constant and Poisson arrivals at one rate
// while a controller keeps its state (sluice-lab experiment voigt-sweep).
//
// Build it with NewAlternate; it is immutable and, when both processes
// are, safe for concurrent use.
type Alternate struct {
	procs    [2]Arrivals
	switches []time.Duration
}

var _ Arrivals = Alternate{}

// NewAlternate returns the process that starts with first, switches to
// second at switches[0], back at switches[1], and so on; switches must be
// strictly increasing and > 0, and neither process nil.
func NewAlternate(first, second Arrivals, switches ...time.Duration) (Alternate, error) {
	if first == nil || second == nil {
		return Alternate{}, fmt.Errorf("alternate: both arrival processes are required")
	}
	prev := time.Duration(0)
	for i, s := range switches {
		if s <= prev {
			return Alternate{}, fmt.Errorf("alternate: switch %d at %v is not after %v", i+1, s, prev)
		}
		prev = s
	}
	return Alternate{procs: [2]Arrivals{first, second}, switches: slices.Clone(switches)}, nil
}

// In returns which process is in force at offset t: 0 (the first) or 1.
func (a Alternate) In(t time.Duration) int {
	n, _ := slices.BinarySearch(a.switches, t+1) // switches ≤ t
	return n % 2
}

// Next returns the next arrival after t of the process in force at t, or,
// if that falls at or after the next switch, of the following process
// started at the switch.
func (a Alternate) Next(r *rand.Rand, t time.Duration) time.Duration {
	for {
		n, _ := slices.BinarySearch(a.switches, t+1)
		next := a.procs[n%2].Next(r, t)
		if n == len(a.switches) || next < a.switches[n] {
			return next
		}
		t = a.switches[n] // the next process, from the switch on
	}
}

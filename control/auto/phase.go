// SPDX-License-Identifier: Apache-2.0

package auto

import "fmt"

// phase is auto's position in its cycle of windows,
//
//	base → high probe → base → high probe → base → low probe → base …
//
// Each window is judged by its phase: a base window measures the
// throughput X at L (and may cut L: the tail guard, Little's law), a high
// probe at a·L and a low probe at L/b are compared with the base just
// before them (see Auto). Growth goes from a high probe to the next high
// probe (the probe becomes the base), and anything that changes L outside
// the probes' own verdicts starts the cycle again (restart).
type phase uint8

// The phases of the cycle, in order.
const (
	phaseBase1 phase = iota // the cycle's first base window
	phaseHigh1              // its first high probe, a·L
	phaseBase2              // the base after it
	phaseHigh2              // the second high probe
	phaseBase3              // the base before the low probe
	phaseLow                // the low probe, L/b
	phases                  // the number of phases
)

// String names the phase as the cycle's diagram does.
func (p phase) String() string {
	switch p {
	case phaseBase1, phaseBase2, phaseBase3:
		return fmt.Sprintf("base %d", p/2+1)
	case phaseHigh1, phaseHigh2:
		return fmt.Sprintf("high probe %d", p/2+1)
	case phaseLow:
		return "low probe"
	}
	return fmt.Sprintf("phase(%d)", uint8(p))
}

// isBase reports whether the phase is a base window.
func (p phase) isBase() bool { return p == phaseBase1 || p == phaseBase2 || p == phaseBase3 }

// isHigh reports whether the phase is a high probe.
func (p phase) isHigh() bool { return p == phaseHigh1 || p == phaseHigh2 }

// next returns the phase that follows p in the cycle.
func (p phase) next() phase { return (p + 1) % phases }

// restart starts the cycle again from its first base window, with the
// high probe's gain back at HighProbe and no gain awaiting confirmation.
func (a *Auto) restart() { a.phase, a.gain, a.pending = phaseBase1, a.cfg.HighProbe, false }

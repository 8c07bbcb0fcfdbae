// SPDX-License-Identifier: Apache-2.0

package auto

import "testing"

// The cycle is base, high, base, high, base, low, and back to the first
// base; each phase has a name.
func TestPhaseCycle(t *testing.T) {
	want := []string{"base 1", "high probe 1", "base 2", "high probe 2", "base 3", "low probe"}
	p := phaseBase1
	for i, name := range want {
		if p.String() != name {
			t.Errorf("phase %d: %q, want %q", i, p, name)
		}
		if p.isBase() == p.isHigh() && p != phaseLow || p == phaseLow && (p.isBase() || p.isHigh()) {
			t.Errorf("%s: base %v, high %v", p, p.isBase(), p.isHigh())
		}
		p = p.next()
	}
	if p != phaseBase1 {
		t.Errorf("after the low probe: %s, want base 1", p)
	}
	if got := phases.String(); got != "phase(6)" {
		t.Errorf("out of range: %q", got)
	}
}

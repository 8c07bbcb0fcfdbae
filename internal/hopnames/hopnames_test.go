// SPDX-License-Identifier: Apache-2.0

package hopnames

import (
	"testing"

	"github.com/sluicehq/sluice"
)

// Empty names get their defaults; a name given is kept.
func TestSetDefaults(t *testing.T) {
	p, tn, to := "", "X-Who", ""
	SetDefaults(&p, &tn, &to)
	if p != sluice.PriorityHeader || tn != "X-Who" || to != sluice.TimeoutHeader {
		t.Errorf("got %q %q %q", p, tn, to)
	}
}

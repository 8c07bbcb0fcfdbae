// SPDX-License-Identifier: Apache-2.0

package figure

import (
	"math"
	"testing"
	"time"

	"github.com/sluicehq/sluice/lab/dist"
)

// Each variant parses and has the requested mean; the Pareto variant is
// capped at 50× it, and the lognormal has σ 1.5.
func TestAdaptiveService(t *testing.T) {
	for _, k := range AdaptiveServiceKinds {
		spec, err := AdaptiveService(k, 10*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		d, err := dist.ParseDuration(spec)
		if err != nil {
			t.Fatalf("%s: %q: %v", k, spec, err)
		}
		if m := d.Mean(); math.Abs(m-0.010) > 1e-6 {
			t.Errorf("%s: %q has mean %v, want 10ms", k, spec, m)
		}
		t.Logf("%s: %s", k, spec)
		switch k {
		case "pareto":
			c, ok := d.(dist.Capped)
			if !ok || math.Abs(c.Max-0.5) > 1e-9 {
				t.Errorf("pareto: %q is not capped at 500ms: %#v", spec, d)
			}
		case "lognormal":
			if l, ok := d.(dist.LogNormal); !ok || l.Sigma() != 1.5 {
				t.Errorf("lognormal: %q: %#v", spec, d)
			}
		}
	}
	if _, err := AdaptiveService("weibull", time.Millisecond); err == nil {
		t.Error("an unknown kind was accepted")
	}
}

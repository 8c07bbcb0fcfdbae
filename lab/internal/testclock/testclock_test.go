// SPDX-License-Identifier: Apache-2.0

package testclock

import (
	"testing"
	"time"
)

// Ms keeps the fraction of a millisecond; T0 is the start of 2026 in UTC.
func TestMsAndT0(t *testing.T) {
	if got := Ms(2.25); got != 2250*time.Microsecond {
		t.Errorf("Ms(2.25) = %v, want 2.25ms", got)
	}
	if got := Ms(-3); got != -3*time.Millisecond {
		t.Errorf("Ms(-3) = %v, want -3ms", got)
	}
	if want := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC); !T0.Equal(want) || T0.Location() != time.UTC {
		t.Errorf("T0 = %v, want %v", T0, want)
	}
}

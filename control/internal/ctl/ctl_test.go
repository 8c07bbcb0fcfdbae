// SPDX-License-Identifier: Apache-2.0

package ctl

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/fielderr"
)

func TestDecision(t *testing.T) {
	now := time.Unix(10, 0)
	m := sluice.Measurements{Class: 2, Arrivals: 5}
	d := Decision(now, "x", sluice.KindConcurrency, m, 3, 4, true, "why")
	if d.At != now || d.Controller != "x" || d.Class != 2 || d.Old != 3 || d.New != 4 || !d.Acted || d.Reason != "why" || d.Inputs != m {
		t.Errorf("Decision = %+v", d)
	}
}

func TestFormats(t *testing.T) {
	if got := FmtRate(1234.5678); got != "1235 req/s" {
		t.Errorf("FmtRate = %q", got)
	}
	if got := FmtSec(0.0123456789); got != "12.346ms" {
		t.Errorf("FmtSec = %q", got)
	}
}

func TestChecks(t *testing.T) {
	if err := CheckPeriod("period", 0); fielderr.Path(err) != "period" {
		t.Errorf("CheckPeriod(0) = %v", err)
	}
	if err := CheckPeriod("period", time.Second); err != nil {
		t.Errorf("CheckPeriod(1s) = %v", err)
	}
}

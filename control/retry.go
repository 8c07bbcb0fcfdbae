// SPDX-License-Identifier: Apache-2.0

package control

import (
	"time"

	"github.com/sluicehq/sluice"
)

// Retry-After from the controllers' state (sluice.RetryAdvisor). The
// adaptive controllers that set a rate or a drop probability once per
// control period answer the time to their next adjustment: until then
// the setting that refused the request stands, so a retry sooner meets
// the same gate (a token that frees up is most likely taken by the
// arrivals that keep coming). The fixed settings (static-rate,
// static-concurrency), Voigt's P/PD rates and the concurrency limits
// (auto, gradient2, envoy-gradient, bbr) do not implement it: the stage
// answers the time to the class's next token or the drain time of the
// queue ahead.

// RetryAfter: SEDA's rate stands until its next step (its period, or
// sooner after nreq samples): the time to the next adjustment.
func (s *SEDA) RetryAfter(now time.Time, r sluice.RetryState) time.Duration {
	return r.NextStep.Sub(now)
}

// RetryAfter: as SEDA's.
func (d *Degrader) RetryAfter(now time.Time, r sluice.RetryState) time.Duration {
	return r.NextStep.Sub(now)
}

// RetryAfter: Andersson & Kihl's rate stands until the next control
// period: the time to the next adjustment.
func (k *Kihl) RetryAfter(now time.Time, r sluice.RetryState) time.Duration {
	return r.NextStep.Sub(now)
}

// RetryAfter: Yaksha's drop probability stands until the next control
// period: the time to the next adjustment.
func (y *Yaksha) RetryAfter(now time.Time, r sluice.RetryState) time.Duration {
	return r.NextStep.Sub(now)
}

var (
	_ sluice.RetryAdvisor = (*SEDA)(nil)
	_ sluice.RetryAdvisor = (*Degrader)(nil)
	_ sluice.RetryAdvisor = (*Kihl)(nil)
	_ sluice.RetryAdvisor = (*Yaksha)(nil)
)

// RetryAfter: as Kihl's.
func (a *kihlAuto) RetryAfter(now time.Time, r sluice.RetryState) time.Duration {
	return r.NextStep.Sub(now)
}

var _ sluice.RetryAdvisor = (*kihlAuto)(nil)

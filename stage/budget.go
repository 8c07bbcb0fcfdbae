// SPDX-License-Identifier: Apache-2.0

package stage

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/control"
)

// Static reports whether the stage's controller is a static baseline
// with a setting to change from outside (static-rate or
// static-concurrency), and the kind of that setting.
func (s *Stage) Static() (sluice.Kind, bool) {
	st, ok := s.ctrl.Unwrap().(*control.Static)
	if !ok {
		return sluice.KindNone, false
	}
	k := st.Current().Kind
	return k, k == sluice.KindRate || k == sluice.KindConcurrency
}

// SetStatic puts value into force at now as the setting of a static-rate
// (req/s) or static-concurrency (requests in flight) stage, with reason
// as the decision's explanation, and records the decision in the stage's
// history. It is how a runner outside the stage (cluster mode: this
// instance's part of a global budget) changes a fixed budget; the
// request path is untouched (the token bucket's rate or the concurrency
// limit change as a controller decision would change them, and waiters a
// larger limit lets in are granted at once). Any other controller, or a
// value control.Static.Set refuses, is an error and changes nothing.
// Safe for concurrent use with the request path and Step.
func (s *Stage) SetStatic(now time.Time, value float64, reason string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.ctrl.Unwrap().(*control.Static)
	if !ok {
		return fmt.Errorf("stage %q: controller %s has no fixed budget to set", s.name, s.ctrl.Current().Controller)
	}
	d, err := st.Set(now, value, reason)
	if err != nil {
		return fmt.Errorf("stage %q: %w", s.name, err)
	}
	if err := s.gates.Apply(now, d); err != nil {
		return fmt.Errorf("stage %q: %w", s.name, err)
	}
	s.ctrl.History.Add(d)
	if s.conc != nil {
		s.applyLimit(now, d)
	}
	return nil
}

// Counts returns the requests offered to the stage's gate and admitted by
// it since the stage was built, every class together, including the
// period that is still running. A runner that needs the stage's demand
// (cluster mode) differences two readings. The two counts are read
// consistently with Step's collection (under the stage's lock), so no
// period is counted twice or missed; each may lag the request path by
// the requests deciding at that instant.
func (s *Stage) Counts() (offered, admitted uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, cs := range s.classes {
		offered += cs.offered.Load() + uint64(max(cs.rec.Arrivals(), 0))
		admitted += cs.admitted.Load() + uint64(max(cs.rec.Admitted(), 0))
	}
	return offered, admitted
}

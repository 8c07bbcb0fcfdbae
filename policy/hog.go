// SPDX-License-Identifier: Apache-2.0

package policy

import (
	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/stage"
)

// compileHog checks a stage's hog rule and returns the stage's.
func compileHog(p string, s *StageConfig, ctrl control.Config) (stage.Hog, error) {
	h := s.Hog
	if h.MaxServiceTime < 0 {
		return stage.Hog{}, fieldErr(p+".hog.max_service_time", "%v must be a positive duration such as 2s (0: no limit)", h.MaxServiceTime)
	}
	if h.MinServiceTime < 0 {
		return stage.Hog{}, fieldErr(p+".hog.min_service_time", "%v must be a positive duration such as 500ms", h.MinServiceTime)
	}
	if h.OverShare && !s.Tenants.Fair {
		return stage.Hog{}, fieldErr(p+".hog.over_share", "needs tenants.fair: true (the share is the fair queue's)")
	}
	if h.OverShare && h.MinServiceTime == 0 && !hasTarget(ctrl) {
		return stage.Hog{}, fieldErr(p+".hog.min_service_time", "must be set: controller %s has no response-time target to default to", s.Controller)
	}
	if !h.OverShare && h.MinServiceTime != 0 {
		return stage.Hog{}, fieldErr(p+".hog.min_service_time", "is for over_share: set over_share: true")
	}
	return stage.Hog{MaxService: h.MaxServiceTime, OverShare: h.OverShare, MinService: h.MinServiceTime}, nil
}

// hasTarget reports whether ctrl's controller has a response-time target
// (control.Targeted: auto's SLO, seda's p90, yaksha's mean).
func hasTarget(ctrl control.Config) bool {
	c, err := ctrl.New()
	if err != nil {
		return false
	}
	_, ok := c.(control.Targeted)
	return ok
}

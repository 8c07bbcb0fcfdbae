package proxy

import (
	"errors"
	"log/slog"
	"time"

	"github.com/sluicehq/sluice/monitor"
	"github.com/sluicehq/sluice/policy"
)

func policySetDefaults(c *policy.Config) { c.SetDefaults() }

func policyValidate(c *policy.Config) error { return c.Validate() }

// fieldPath extracts the field path, message and (when the policy knows
// it) line of a validation error of this package or of package policy.
func fieldPath(err error) (path, msg string, line int, ok bool) {
	var fe *FieldError
	if errors.As(err, &fe) {
		return fe.Path, fe.Msg, 0, true
	}
	var pe *policy.FieldError
	if errors.As(err, &pe) {
		return pe.Path, pe.Msg, pe.Line, true
	}
	return "", "", 0, false
}

// buildPolicy builds the admission policy of cfg. With prev, stages whose
// configuration is unchanged are carried over with their controller
// state. queue reads the backend pool's wait queue length; it is the
// queue sensor of every stage but those with their own concurrency limit
// (static-concurrency), which report their own wait queue.
//
// util, when not nil, is the utilization sensor of the stages whose
// controller needs one (kihl, voigt-cpu, voigt-queue).
func buildPolicy(cfg policy.Config, prev *policy.Policy, logger *slog.Logger, queue func() float64,
	util monitor.UtilizationSource) (*policy.Policy, error) {
	opts := policy.Options{Now: time.Now(), Logger: logger, Previous: prev, Queue: map[string]func() float64{},
		Utilization: map[string]monitor.UtilizationSource{}}
	for _, st := range cfg.Stages {
		if st.Controller != "static-concurrency" {
			opts.Queue[st.Name] = queue
		}
		switch st.Controller {
		case "kihl", "voigt-cpu", "voigt-queue":
			if util != nil {
				opts.Utilization[st.Name] = util
			}
		}
	}
	return policy.New(cfg, opts)
}

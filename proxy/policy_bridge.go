package proxy

import (
	"errors"
	"log/slog"
	"time"

	"github.com/sluicehq/sluice/control"
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
// (static-concurrency), which report their own wait queue, and those
// bound to a bandwidth rule, which read the rule's sensor.
//
// A stage bound to a resource rule (ov.byStage) gets the rule's sensor: a
// cpu rule's utilization, a bandwidth rule's normalised queue; a kihl
// stage with tuning: auto gets the auto-tuning controller. Other stages
// whose controller needs a utilization (kihl, voigt-cpu, voigt-queue)
// get the top-level utilization sensor when there is one.
func buildPolicy(cfg policy.Config, prev *policy.Policy, logger *slog.Logger, queue func() float64,
	ov *overload) (*policy.Policy, error) {
	opts := policy.Options{Now: time.Now(), Logger: logger, Previous: prev, Queue: map[string]func() float64{},
		Utilization: map[string]monitor.UtilizationSource{}, Controllers: map[string]control.Config{}}
	var ctrls map[string]control.Config
	for _, st := range cfg.Stages {
		if rule := ov.byStage[st.Name]; rule != nil {
			if rule.cfg.Resource == ResourceBandwidth {
				opts.Queue[st.Name] = rule.sensor.queue
				continue
			}
			opts.Queue[st.Name] = queue
			opts.Utilization[st.Name] = rule.sensor
			if rule.tune != nil {
				if ctrls == nil {
					var err error
					if ctrls, err = cfg.StageControllers(); err != nil {
						return nil, err
					}
				}
				if kc, ok := ctrls[st.Name].(*control.KihlConfig); ok {
					rule.tune.Gains(time.Now()) // a fixed σ resolves now
					opts.Controllers[st.Name] = &control.KihlAutoConfig{Base: *kc, Tune: rule.tune}
				}
			}
			continue
		}
		if st.Controller != "static-concurrency" {
			opts.Queue[st.Name] = queue
		}
		switch st.Controller {
		case "kihl", "voigt-cpu", "voigt-queue":
			if ov.util != nil {
				opts.Utilization[st.Name] = ov.util
			}
		}
	}
	return policy.New(cfg, opts)
}

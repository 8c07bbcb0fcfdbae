// SPDX-License-Identifier: Apache-2.0

package control

import (
	"math"
	"testing"
	"time"
)

// Each bad config is rejected with an error that names exactly the field.
func TestValidateNamesField(t *testing.T) {
	cases := []struct {
		name, field string
		cfg         Config
	}{
		{"kihl period", "period", func() Config { c := DefaultKihlConfig(); c.Period = 0; return &c }()},
		{"kihl rho_ref", "rho_ref", func() Config { c := DefaultKihlConfig(); c.RhoRef = 1.5; return &c }()},
		{"kihl rho_ref NaN", "rho_ref", func() Config { c := DefaultKihlConfig(); c.RhoRef = math.NaN(); return &c }()},
		{"kihl k", "k", func() Config { c := DefaultKihlConfig(); c.K = -20; return &c }()},
		{"kihl ti", "ti", func() Config { c := DefaultKihlConfig(); c.Ti = 0; return &c }()},
		{"kihl max_rate", "max_rate", func() Config { c := DefaultKihlConfig(); c.MaxRate = math.Inf(1); return &c }()},
		{"kihl initial_integral", "initial_integral", func() Config { c := DefaultKihlConfig(); c.InitialIntegral = -1; return &c }()},
		{"yaksha tref missing", "tref", func() Config { c := DefaultYakshaConfig(); return &c }()},
		{"yaksha period", "period", func() Config { c := DefaultYakshaConfig(); c.Tref = time.Second; c.Period = -1; return &c }()},
		{"yaksha static needs lambda0", "lambda0", func() Config {
			c := DefaultYakshaConfig()
			c.Tref, c.SelfTuning = time.Second, false
			return &c
		}()},
		{"yaksha lambda0 negative", "lambda0", func() Config { c := DefaultYakshaConfig(); c.Tref = time.Second; c.Lambda0 = -3; return &c }()},
		{"yaksha pole", "pole", func() Config { c := DefaultYakshaConfig(); c.Tref = time.Second; c.Pole = 0.1; return &c }()},
		{"yaksha tune_window", "tune_window", func() Config { c := DefaultYakshaConfig(); c.Tref = time.Second; c.TuneWindow = 0; return &c }()},
		{"yaksha smoothing", "smoothing", func() Config { c := DefaultYakshaConfig(); c.Tref = time.Second; c.Smoothing = 1; return &c }()},
		{"yaksha max_drop", "max_drop", func() Config { c := DefaultYakshaConfig(); c.Tref = time.Second; c.MaxDrop = 0; return &c }()},
		{"seda target missing", "target", func() Config { c := DefaultSEDAConfig(); return &c }()},
		{"seda classes", "classes", func() Config { c := DefaultSEDAConfig(); c.Target = time.Second; c.Classes = 0; return &c }()},
		{"seda classes huge", "classes", func() Config { c := DefaultSEDAConfig(); c.Target = time.Second; c.Classes = 1_000_000_000; return &c }()},
		{"seda class_targets length", "class_targets", func() Config {
			c := DefaultSEDAConfig()
			c.Target, c.Classes, c.ClassTargets = time.Second, 3, []time.Duration{time.Second, time.Second}
			return &c
		}()},
		{"seda class_targets negative", "class_targets[1]", func() Config {
			c := DefaultSEDAConfig()
			c.Target, c.ClassTargets = time.Second, []time.Duration{time.Second, -time.Second}
			return &c
		}()},
		{"seda nreq", "nreq", func() Config { c := DefaultSEDAConfig(); c.Target = time.Second; c.NReq = 0; return &c }()},
		{"seda timeout", "timeout", func() Config { c := DefaultSEDAConfig(); c.Target = time.Second; c.Timeout = 0; return &c }()},
		{"seda alpha", "alpha", func() Config { c := DefaultSEDAConfig(); c.Target = time.Second; c.Alpha = 1; return &c }()},
		{"seda err_d", "err_d", func() Config { c := DefaultSEDAConfig(); c.Target = time.Second; c.ErrD = -0.9; return &c }()},
		{"seda c_i", "c_i", func() Config { c := DefaultSEDAConfig(); c.Target = time.Second; c.CI = -0.7; return &c }()},
		{"seda adj_i", "adj_i", func() Config { c := DefaultSEDAConfig(); c.Target = time.Second; c.AdjI = 0; return &c }()},
		{"seda adj_d", "adj_d", func() Config { c := DefaultSEDAConfig(); c.Target = time.Second; c.AdjD = 1; return &c }()},
		{"seda rate_min", "rate_min", func() Config { c := DefaultSEDAConfig(); c.Target = time.Second; c.RateMin = 0; return &c }()},
		{"seda rate_max", "rate_max", func() Config { c := DefaultSEDAConfig(); c.Target = time.Second; c.RateMax = 0.01; return &c }()},
		{"seda initial_rate", "initial_rate", func() Config { c := DefaultSEDAConfig(); c.Target = time.Second; c.InitialRate = 6000; return &c }()},
		{"seda adjlo_d", "adjlo_d", func() Config { c := DefaultSEDAConfig(); c.Target = time.Second; c.AdjLoD = 0.5; return &c }()},
		{"seda lc_thresh", "lc_thresh", func() Config { c := DefaultSEDAConfig(); c.Target = time.Second; c.LCThresh = 0; return &c }()},
		{"degrade classes", "degrade.enabled", func() Config {
			c := DefaultSEDAConfig()
			c.Target, c.Classes, c.Degrade.Enabled = time.Second, 2, true
			return &c
		}()},
		{"degrade quality_min", "degrade.quality_min", func() Config {
			c := DefaultSEDAConfig()
			c.Target, c.Degrade.Enabled, c.Degrade.QualityMin = time.Second, true, 1
			return &c
		}()},
		{"degrade quality_down", "degrade.quality_down", func() Config {
			c := DefaultSEDAConfig()
			c.Target, c.Degrade.Enabled, c.Degrade.QualityDown = time.Second, true, 0.9
			return &c
		}()},
		{"degrade quality_up", "degrade.quality_up", func() Config {
			c := DefaultSEDAConfig()
			c.Target, c.Degrade.Enabled, c.Degrade.QualityUp = time.Second, true, 0
			return &c
		}()},
		{"voigt-cpu util_ref", "util_ref", func() Config { c := DefaultVoigtCPUConfig(); c.UtilRef = 0.9e3; return &c }()},
		{"voigt-cpu kp", "kp", func() Config { c := DefaultVoigtCPUConfig(); c.Kp = 0; return &c }()},
		{"voigt-cpu min_rate", "min_rate", func() Config { c := DefaultVoigtCPUConfig(); c.MinRate = -10; return &c }()},
		{"voigt-cpu initial_rate", "initial_rate", func() Config { c := DefaultVoigtCPUConfig(); c.InitialRate = 5; return &c }()},
		{"voigt-queue q_ref", "q_ref", func() Config { c := DefaultVoigtQueueConfig(); c.QRef = 0; return &c }()},
		{"voigt-queue kd", "kd", func() Config { c := DefaultVoigtQueueConfig(); c.Kd = -0.25; return &c }()},
		{"voigt-queue max_rate", "max_rate", func() Config { c := DefaultVoigtQueueConfig(); c.MaxRate = 1; return &c }()},
		{"voigt-queue util_ref", "util_ref", func() Config { c := DefaultVoigtQueueConfig(); c.UtilRef = -1; return &c }()},
		{"static-rate rate", "rate", func() Config { c := DefaultStaticRateConfig(); return &c }()},
		{"static-concurrency limit", "limit", func() Config { c := DefaultStaticConcurrencyConfig(); return &c }()},
		{"none period", "period", func() Config { c := DefaultNoneConfig(); c.Period = 0; return &c }()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { checkFieldError(t, tc.cfg, tc.field) })
	}
}

// Validation never changes a config value (no silent clamping).
func TestValidateDoesNotMutate(t *testing.T) {
	c := DefaultSEDAConfig()
	c.Target, c.InitialRate = time.Second, 1e9
	before := c
	_ = c.Validate()
	if c.InitialRate != before.InitialRate || c.RateMax != before.RateMax {
		t.Fatal("Validate changed the config")
	}
	for _, name := range Names() {
		cfg, _ := NewConfig(name)
		if cfg == nil {
			t.Fatalf("%s: nil config", name)
		}
	}
}

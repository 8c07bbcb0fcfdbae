// SPDX-License-Identifier: Apache-2.0

package policytest

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/metrictest"
)

// A policy file is read strictly and built.
func TestNew(t *testing.T) {
	p := New(t, "stages: [{name: api, controller: static-rate, params: {rate: 10}}]")
	if p.Stage("api") == nil {
		t.Fatal("the stage was not built")
	}
}

// Running's policy steps its controllers, and its control loop ends with
// the test (synctest.Test fails on a goroutine left blocked).
func TestRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := Running(t, "stages: [{name: api, controller: static-rate, params: {rate: 10}}]")
		time.Sleep(3 * time.Second)
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(p.Collector())
		steps := metrictest.Metric(t, reg, "sluice_controller_decisions_total", map[string]string{"stage": "api"}).GetCounter().GetValue()
		t.Logf("stage api: %v steps in 3 s", steps)
		if steps < 1 {
			t.Errorf("stage api took %v steps in 3 s, want its control loop running", steps)
		}
	})
}

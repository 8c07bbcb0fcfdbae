// SPDX-License-Identifier: Apache-2.0

package policy

import (
	"math"
	"net/http/httptest"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/control"
)

func TestStageControllersAndReplacement(t *testing.T) {
	var cfg Config
	src := `
stages:
  - name: pi
    controller: kihl
    params: {rho_ref: 0.7, period: 500ms}
  - name: cgi
    controller: voigt-cpu
`
	if err := yaml.Unmarshal([]byte(src), &cfg); err != nil {
		t.Fatal(err)
	}
	ctrls, err := cfg.StageControllers()
	if err != nil {
		t.Fatal(err)
	}
	k, ok := ctrls["pi"].(*control.KihlConfig)
	if !ok || k.RhoRef != 0.7 || k.Period != 500*time.Millisecond || k.K != 20 {
		t.Fatalf("pi: %#v", ctrls["pi"])
	}
	if v, ok := ctrls["cgi"].(*control.VoigtCPUConfig); !ok || v.UtilRef != 90 {
		t.Fatalf("cgi: %#v", ctrls["cgi"])
	}
	if _, ok := ctrls[ImplicitStage]; ok || len(ctrls) != 2 {
		t.Errorf("StageControllers = %v, want the two configured stages", ctrls)
	}
	if len(cfg.Stages[0].Params.Content) == 0 || cfg.Stages[0].Burst != 0 {
		t.Error("StageControllers modified its receiver")
	}
	bad := Config{Stages: []StageConfig{{Name: "x", Controller: "nope"}}}
	if _, err := bad.StageControllers(); err == nil {
		t.Error("an unknown controller compiled")
	}

	// Options.Controllers replaces the compiled configuration.
	repl := *k
	repl.K = 33
	p, err := New(cfg, Options{Controllers: map[string]control.Config{"pi": &repl}})
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest("GET", "/", nil)
	if st, _ := p.Classify(req); st.Name() != "pi" {
		t.Fatalf("classified into %s", st.Name())
	}
	d := p.Stage("pi").Controller().Update(time.Now(), measurementsAt(0.2))
	// u = K·(ρ_ref − ρ) + I = 33·0.5 + 0.
	if want := 33 * 0.5 / 0.5; math.Abs(d.New-want) > 1e-9 {
		t.Errorf("replaced controller: rate %v (%s), want %v from K 33", d.New, d.Reason, want)
	}
}

// measurementsAt is one 500 ms period at utilization rho with arrivals
// well above any admission count (the gate binds).
func measurementsAt(rho float64) sluice.Measurements {
	return sluice.Measurements{Elapsed: 500 * time.Millisecond, Utilization: rho, Arrivals: 1000, Admitted: 10, Completed: 10}
}

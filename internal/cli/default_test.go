// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"context"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/control/auto"
	"github.com/sluicehq/sluice/policy"
	"github.com/sluicehq/sluice/proxy"
	"github.com/sluicehq/sluice/stage"
)

// One default everywhere: a file that says nothing about control
// (examples/minimal.yaml), a stage written in a file without a
// controller, the quick start told nothing but where to listen and
// proxy, and the middleware's policy given no stage or a stage without a
// controller all run the same controller with the same parameters,
// decoded and defaulted; so does a stage of the stage API built without
// one.
func TestOneDefaultController(t *testing.T) {
	want, err := control.NewConfig(stage.DefaultController)
	if err != nil {
		t.Fatal(err)
	}
	ac, ok := want.(*auto.Config)
	if !ok || ac.SLO != 500*time.Millisecond {
		t.Fatalf("the default is %T %+v, want auto with its 500ms SLO", want, want)
	}

	file, err := proxy.LoadFile("../../examples/minimal.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(file.Stages) != 0 {
		t.Fatalf("examples/minimal.yaml has %d stages, want none: the implicit stage runs the default", len(file.Stages))
	}
	fromFile := implicitController(t, file.Config)
	withStage, err := proxy.Parse("stage.yaml", []byte("listeners: [{addr: 127.0.0.1:0}]\nbackends: {servers: [{url: http://127.0.0.1:1}]}\nstages: [{name: all, match: {path_prefix: /}}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	fromFileStage := stageController(t, withStage.Config, "all")
	if withStage.Config.ImplicitController() != policy.ImplicitController {
		t.Errorf("with stages, requests no stage matches run %q, want %q", withStage.Config.ImplicitController(), policy.ImplicitController)
	}

	quick := quickStart(t)
	fromQuickStart := stageController(t, quick.Config, quick.Stages[0].Name)

	// The middleware: a policy built in Go from a stage with a name and a
	// match only, defaults filled by policy.New.
	pol, err := policy.New(policy.Config{Stages: []policy.StageConfig{{Name: "all", Match: policy.MatchConfig{PathPrefix: "/"}}}},
		policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fromMiddleware := stageController(t, pol.Config(), "all")
	empty, err := policy.New(policy.Config{}, policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fromEmptyMiddleware := implicitController(t, empty.Config())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go pol.Run(ctx)
	rec := httptest.NewRecorder()
	sluice.Middleware(pol)(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})).ServeHTTP(rec, httptest.NewRequest("GET", "/x", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("the middleware answered %d", rec.Code)
	}

	for name, got := range map[string]control.Config{"file without stages": fromFile, "file stage": fromFileStage,
		"quick start": fromQuickStart, "middleware stage": fromMiddleware, "middleware without stages": fromEmptyMiddleware} {
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: stage controller %T %+v, want %T %+v", name, got, got, want, want)
		}
	}

	// The stages that run: auto at the default SLO, in the middleware's
	// policy and from stage.New without a controller.
	direct, err := stage.New(stage.Options{Name: "db"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for name, st := range map[string]*stage.Stage{"middleware": pol.Stage("all"), "stage.New": direct,
		"middleware without stages": empty.Stage(policy.ImplicitStage)} {
		a, ok := st.Controller().Unwrap().(*auto.Auto)
		if !ok {
			t.Errorf("%s: controller %T, want *auto.Auto", name, st.Controller().Unwrap())
			continue
		}
		if a.Target() != ac.SLO || a.Period() != ac.Period {
			t.Errorf("%s: SLO %v, period %v; want %v, %v", name, a.Target(), a.Period(), ac.SLO, ac.Period)
		}
	}
	if st := pol.Stage("all").State(0); st.Controller != "auto" {
		t.Errorf("the middleware's stage reports controller %q", st.Controller)
	}
}

// quickStart returns the proxy configuration of sluice proxy --listen
// 127.0.0.1:0 --backend http://127.0.0.1:1 with the flags args added.
func quickStart(t *testing.T, args ...string) *proxy.Config {
	t.Helper()
	cmd := NewProxyCmd()
	if err := cmd.ParseFlags(append([]string{"--listen", "127.0.0.1:0", "--backend", "http://127.0.0.1:1"}, args...)); err != nil {
		t.Fatal(err)
	}
	f := &proxyFlags{listen: "127.0.0.1:0", backends: []string{"http://127.0.0.1:1"}}
	fl := cmd.Flags()
	f.controller, _ = fl.GetString("controller")
	f.slo, _ = fl.GetDuration("slo")
	f.admin, _ = fl.GetString("admin")
	f.buffering, _ = fl.GetBool("response-buffering")
	quick, err := f.quickStart(cmd)
	if err != nil {
		t.Fatal(err)
	}
	return quick
}

// implicitController returns the controller configuration the implicit
// stage of cfg runs, at its defaults.
func implicitController(t *testing.T, cfg policy.Config) control.Config {
	t.Helper()
	c, err := control.NewConfig(cfg.ImplicitController())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// stageController returns the decoded controller configuration of the
// stage named name in cfg (defaults filled).
func stageController(t *testing.T, cfg policy.Config, name string) control.Config {
	t.Helper()
	ctrls, err := cfg.StageControllers()
	if err != nil {
		t.Fatal(err)
	}
	c, ok := ctrls[name]
	if !ok {
		t.Fatalf("no stage %q", name)
	}
	return c
}

// The one call for the common case, policy.Auto(slo), is the quick start
// told only an SLO: the same policy, stage for stage, whether --slo is
// given or left at its default.
func TestAutoIsTheQuickStart(t *testing.T) {
	for _, slo := range []time.Duration{0, 250 * time.Millisecond} {
		var args []string
		if slo != 0 {
			args = []string{"--slo", slo.String()}
		}
		quick := quickStart(t, args...)
		short := policy.Auto(slo)
		short.SetDefaults()
		if err := short.Validate(); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(quick.Config, short) {
			t.Errorf("--slo %v: the quick start's policy\n%+v\npolicy.Auto's\n%+v", slo, quick.Config, short)
		}
		want, err := quick.Config.StageControllers()
		if err != nil {
			t.Fatal(err)
		}
		got, err := short.StageControllers()
		if err != nil {
			t.Fatal(err)
		}
		wantSLO := slo
		if slo == 0 {
			wantSLO = 500 * time.Millisecond
		}
		if !reflect.DeepEqual(got, want) || got[policy.AutoStage].(*auto.Config).SLO != wantSLO {
			t.Errorf("--slo %v: controllers %+v, want %+v", slo, got[policy.AutoStage], want[policy.AutoStage])
		}
	}
}

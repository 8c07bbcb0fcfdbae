// SPDX-License-Identifier: Apache-2.0

package policy

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/control/auto"
)

// typedStage returns a stage named api with the controller c given in Go.
func typedStage(c control.Config) Config {
	return Config{Classes: ClassesConfig{Order: []string{"gold", "bronze"}},
		Stages: []StageConfig{{Name: "api", Match: MatchConfig{PathPrefix: "/api/"}, Control: c}}}
}

// yamlStage is typedStage written as a file has it.
func yamlStage(t *testing.T, controller, params string) Config {
	return parse(t, "classes: {order: [gold, bronze]}\nstages:\n  - name: api\n    match: {path_prefix: /api/}\n    controller: "+
		controller+"\n    params: "+params+"\n")
}

// A controller configured in Go and the same one written in YAML compile
// to the same configuration, for every controller with parameters of its
// own.
func TestTypedControllerEqualsYAML(t *testing.T) {
	ac := auto.DefaultConfig()
	ac.SLO, ac.TailGuard = 250*time.Millisecond, true
	seda := control.DefaultSEDAConfig()
	seda.Target, seda.TrackDemand = 100*time.Millisecond, false
	yaksha := control.DefaultYakshaConfig()
	yaksha.Tref = 200 * time.Millisecond
	rate := control.DefaultStaticRateConfig()
	rate.Rate = 300
	for _, c := range []struct {
		ctrl           control.Config
		name, params   string
		wantController string
	}{
		{&ac, "auto", "{slo: 250ms, tail_guard: true}", "auto"},
		{&seda, "seda", "{target: 100ms, track_demand: false}", "seda"},
		{&yaksha, "yaksha", "{tref: 200ms}", "yaksha"},
		{&rate, "static-rate", "{rate: 300}", "static-rate"},
	} {
		sameInGoAndYAML(t, c.ctrl, c.name, c.params)
		p, err := New(typedStage(c.ctrl), Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Config().Stages[0].Controller; got != c.wantController {
			t.Errorf("%s: the defaulted stage names controller %q", c.name, got)
		}
	}
	// seda's classes come from classes.order either way, and the Go value
	// is not changed by it.
	typed, err := controllersOf(typedStage(&seda))
	if err != nil {
		t.Fatal(err)
	}
	if got := typed["api"].(*control.SEDAConfig).Classes; got != 2 || seda.Classes != 1 {
		t.Errorf("seda classes: compiled %d (want 2), the caller's value %d (want 1, untouched)", got, seda.Classes)
	}
}

// A bad controller setting is the same *sluice.FieldError, at the same
// path, whether it was given in Go or in YAML; the Go path's errors of its
// own name the stage's fields too.
func TestTypedControllerErrors(t *testing.T) {
	badSLO := auto.DefaultConfig()
	badSLO.SLO = -time.Second
	goErr := fieldErrOf(t, typedStage(&badSLO))
	yamlErr := fieldErrOf(t, yamlStage(t, "auto", "{slo: -1s}"))
	if goErr.Path != "stages[0].params.slo" || goErr.Path != yamlErr.Path || goErr.Msg != yamlErr.Msg {
		t.Errorf("in Go %q, in YAML %q: want the same error at stages[0].params.slo", goErr, yamlErr)
	}

	seda := control.DefaultSEDAConfig()
	seda.Target, seda.Classes = time.Second, 3
	sedaTargets := control.DefaultSEDAConfig()
	sedaTargets.Target, sedaTargets.ClassTargets = time.Second, []time.Duration{time.Second}
	withParams := typedStage(&badSLO)
	withParams.Stages[0].Params = yaml.Node{Kind: yaml.MappingNode}
	_ = withParams.Stages[0].Params.Encode(map[string]string{"slo": "1s"})
	otherName := typedStage(&badSLO)
	otherName.Stages[0].Controller = "seda"
	for _, c := range []struct {
		name      string
		cfg       Config
		path, msg string
	}{
		{"sparse literal, invalid", typedStage(&auto.Config{SLO: -time.Second}), "stages[0].params.slo", "-1s"},
		{"seda classes", typedStage(&seda), "stages[0].params.classes", "is set from classes.order"},
		{"seda class targets", typedStage(&sedaTargets), "stages[0].params.class_targets", "class_targets (by class name)"},
		{"params too", withParams, "stages[0].params", "give the controller's parameters one way"},
		{"another controller named", otherName, "stages[0].controller", `"seda", but Control holds the configuration of auto`},
		{"unregistered type", typedStage(&control.KihlAutoConfig{}), "stages[0].controller", "*control.KihlAutoConfig is not the configuration of a registered controller"},
		{"nil pointer", typedStage((*auto.Config)(nil)), "stages[0].controller", "nil *auto.Config"},
	} {
		fe := fieldErrOf(t, c.cfg)
		if fe.Path != c.path || !strings.Contains(fe.Msg, c.msg) {
			t.Errorf("%s: %v, want %s: …%s…", c.name, fe, c.path, c.msg)
		}
	}
}

func controllersOf(c Config) (map[string]control.Config, error) { return c.StageControllers() }

// fieldErrOf defaults a copy of c and returns its validation error, which
// must be a *sluice.FieldError.
func fieldErrOf(t *testing.T, c Config) *sluice.FieldError {
	t.Helper()
	cc := c.clone()
	cc.SetDefaults()
	var fe *sluice.FieldError
	if err := cc.Validate(); !errors.As(err, &fe) {
		t.Fatalf("Validate: %v (%T), want a *sluice.FieldError", err, err)
	}
	return fe
}

// A stage configured in Go writes out as YAML (the proxy's GET /config)
// that reads back into the same controller: its name, and as params the
// fields that differ from the defaults.
func TestTypedControllerMarshalsAsParams(t *testing.T) {
	seda := control.DefaultSEDAConfig()
	seda.Target, seda.TrackDemand = 100*time.Millisecond, false
	cfg := typedStage(&seda)
	out, err := yaml.Marshal(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "controller: seda") || !strings.Contains(string(out), "track_demand: false") ||
		strings.Contains(string(out), "alpha:") {
		t.Errorf("YAML of a Go stage lacks its controller and changed params, or has defaults:\n%s", out)
	}
	back, err := Parse("out.yaml", out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	want, err := cfg.StageControllers()
	if err != nil {
		t.Fatal(err)
	}
	got, err := back.StageControllers()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("read back %+v, want %+v", got["api"], want["api"])
	}
}

// Parse and Load read a policy file strictly and name the file, line and
// field of every error, as the proxy's loader does.
func TestParseAndLoad(t *testing.T) {
	src := "stages:\n  - name: api\n    controller: seda\n    params:\n      target: -1s\n"
	for _, c := range []struct {
		src, want string
	}{
		{src, "policy.yaml:5: stages[0].params.target: "},
		{"stages:\n  - name: api\n    contoller: seda\n", `policy.yaml:3: stages[0].contoller: unknown field "contoller"`},
		{"reject:\n  retry_after: 2\n", `policy.yaml:2: reject.retry_after: 2 has no unit`},
		{"", "policy.yaml: the file is empty: write {} for the default policy"},
		{"reject: {status: 200}\n", "policy.yaml:1: reject.status: 200 must be an HTTP error status"},
	} {
		_, err := Parse("policy.yaml", []byte(c.src))
		var ce *ConfigError
		if !errors.As(err, &ce) || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%q: %v (%T), want a *ConfigError starting %q", c.src, err, err, c.want)
		}
	}
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, []byte("stages: [{name: api, params: {slo: 250ms}}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Stages[0].Controller != "auto" || cfg.Reject.Status != DefaultRejectStatus {
		t.Errorf("Load did not default the configuration: %+v", cfg.Stages[0])
	}
	if _, err := Load(path + ".missing"); err == nil || !strings.HasPrefix(err.Error(), path+".missing: ") {
		t.Errorf("a missing file: %v", err)
	}
	if cfg, err := Parse("empty.yaml", []byte("{}\n")); err != nil || cfg.ImplicitController() != DefaultController {
		t.Errorf("{}: %v, %+v", err, cfg)
	}
}

// Wrap with Auto serves a handler behind auto at the SLO it is told, and
// an invalid policy starts nothing.
func TestWrapAuto(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h, pol, err := Wrap(ctx, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) }),
		Auto(250*time.Millisecond), Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/x")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	a, ok := pol.Stage(AutoStage).Controller().Unwrap().(*auto.Auto)
	if !ok || a.Target() != 250*time.Millisecond {
		t.Errorf("stage %q runs %T, want auto at 250ms", AutoStage, pol.Stage(AutoStage).Controller().Unwrap())
	}
	if _, _, err := Wrap(ctx, h, Auto(-time.Second), Options{}); !strings.Contains(fmtErr(err), "stages[0].params.slo") {
		t.Errorf("Auto(-1s): %v, want an error at stages[0].params.slo", err)
	}
}

func fmtErr(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// sameInGoAndYAML fails t unless the stage of ctrl given in Go compiles
// to the controller configuration of the stage with controller name and
// params in YAML.
func sameInGoAndYAML(t *testing.T, ctrl control.Config, name, params string) {
	t.Helper()
	typed, err := controllersOf(typedStage(ctrl))
	if err != nil {
		t.Fatalf("%s in Go: %v", name, err)
	}
	fromYAML, err := controllersOf(yamlStage(t, name, params))
	if err != nil {
		t.Fatalf("%s in YAML: %v", name, err)
	}
	if !reflect.DeepEqual(typed["api"], fromYAML["api"]) {
		t.Errorf("%s: in Go %+v, in YAML %+v", name, typed["api"], fromYAML["api"])
	}
}

// A Go literal with only the fields that matter is the controller's
// defaults with those changed, as the same params in YAML are.
func TestTypedSparseLiteral(t *testing.T) {
	for _, c := range []struct {
		ctrl         control.Config
		name, params string
	}{
		{&control.StaticConcurrencyConfig{Limit: 8}, "static-concurrency", "{limit: 8}"},
		{&control.StaticRateConfig{Rate: 300}, "static-rate", "{rate: 300}"},
		{&control.SEDAConfig{Target: time.Second, TrackDemand: true, DecreaseHoldoff: true, RecoverToServed: true, LCReset: true, KeepFlagOverTarget: true,
			Degrade: control.DegradeConfig{Admission: true}}, "seda", "{target: 1s}"},
	} {
		sameInGoAndYAML(t, c.ctrl, c.name, c.params)
	}
	if _, err := New(typedStage(&auto.Config{SLO: 250 * time.Millisecond}), Options{}); err != nil {
		t.Errorf("auto told only an SLO: %v", err)
	}
}

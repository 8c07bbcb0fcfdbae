// SPDX-License-Identifier: Apache-2.0

package control

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/control/auto"
)

// What each registered controller says it needs. A new controller fails
// this test until its needs are decided here: the proxy wires a stage from
// them alone.
func TestNeedsOfEveryController(t *testing.T) {
	want := map[string]Needs{
		"auto":               {},
		"bbr":                {Utilization: NeedOptional}, // the CPU condition reads the runtime's utilization when one is configured (docs/config.md, bbr)
		"envoy-gradient":     {},
		"gradient2":          {},
		"kihl":               {Utilization: NeedRequired, Resources: []Resource{ResourceCPU}, PriorityOptIn: true},
		"none":               {},
		"seda":               {PriorityOptIn: true},
		"static-concurrency": {OwnQueue: true, SplitBudget: true},
		"static-rate":        {SplitBudget: true, Quota: true},
		"voigt-cpu":          {Utilization: NeedRequired, Resources: []Resource{ResourceCPU}, PriorityOptIn: true},
		"voigt-queue":        {Utilization: NeedOptional, Resources: []Resource{ResourceBandwidth}, PriorityOptIn: true},
		"yaksha":             {PriorityOptIn: true},
	}
	for _, name := range Names() {
		cfg, err := NewConfig(name)
		if err != nil {
			t.Fatal(err)
		}
		w, ok := want[name]
		if !ok {
			t.Errorf("%s: its needs are not decided in this test", name)
			continue
		}
		got := NeedsOf(cfg)
		if got.Utilization != w.Utilization || got.OwnQueue != w.OwnQueue || got.SplitBudget != w.SplitBudget ||
			got.PriorityOptIn != w.PriorityOptIn || !slices.Equal(got.Resources, w.Resources) {
			t.Errorf("%s: needs %+v, want %+v", name, got, w)
		}
	}
	if n := NeedsOf(nil); n.Utilization != NeedNone || n.OwnQueue || n.SplitBudget || n.Resources != nil {
		t.Errorf("NeedsOf(nil) = %+v, want the zero Needs", n)
	}
	kc := DefaultKihlConfig()
	if got := NeedsOf(&KihlAutoConfig{Base: kc}); got.Utilization != NeedRequired || !got.Binds(ResourceCPU) {
		t.Errorf("kihl with auto tuning: needs %+v, want kihl's", got)
	}
	if got := NamesWhereText(func(n Needs) bool { return n.Binds(ResourceCPU) }); got != "kihl or voigt-cpu" {
		t.Errorf("controllers a cpu rule binds: %q", got)
	}
	if got := NamesWhereText(func(n Needs) bool { return n.SplitBudget }); got != "static-concurrency or static-rate" {
		t.Errorf("controllers with a budget to split: %q", got)
	}
	for _, c := range []struct {
		in   []string
		want string
	}{{nil, "(none)"}, {[]string{"a"}, "a"}, {[]string{"a", "b", "c"}, "a, b or c"}} {
		if got := orList(c.in); got != c.want {
			t.Errorf("orList(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// The needs are what the controllers do, checked on the controllers
// themselves: one that requires a utilization holds without one and
// responds to one; one a rule binds responds to that rule's sensor; one
// with a budget to split has the fixed-budget config cluster mode splits
// (cluster.PolicyTargets takes exactly these two types).
func TestNeedsMatchBehaviour(t *testing.T) {
	t0 := time.Unix(1000, 0)
	step := func(cfg Config, m sluice.Measurements) (before, after float64) {
		c, err := cfg.New()
		if err != nil {
			t.Fatal(err)
		}
		before = c.Current().New
		m.Elapsed = c.Period()
		return before, c.Update(t0.Add(c.Period()), m).New
	}
	base := sluice.Measurements{Arrivals: 500, Admitted: 500, Completed: 500, Utilization: math.NaN(), Queue: math.NaN(),
		MeanRT: 0.1, P90RT: 0.2}
	with := func(util, queue float64) sluice.Measurements {
		m := base
		m.Utilization, m.Queue = util, queue
		return m
	}
	for _, name := range Names() {
		cfg, _ := NewConfig(name)
		n := NeedsOf(cfg)
		if n.Utilization == NeedRequired {
			if b, a := step(cfg, base); a != b {
				t.Errorf("%s: requires a utilization but moved without one: %v → %v", name, b, a)
			}
			_, idle := step(cfg, with(0.1, math.NaN()))
			_, hot := step(cfg, with(1, math.NaN()))
			if !(hot < idle) {
				t.Errorf("%s: requires a utilization but sets %v at utilization 1 and %v at 0.1", name, hot, idle)
			}
		}
		if n.Binds(ResourceBandwidth) {
			_, short := step(cfg, with(math.NaN(), 0))
			_, long := step(cfg, with(math.NaN(), 1e6))
			if !(long < short) {
				t.Errorf("%s: a bandwidth rule binds it but it sets %v on a long queue and %v on an empty one", name, long, short)
			}
		}
		switch cfg.(type) {
		case *StaticRateConfig, *StaticConcurrencyConfig:
			if !n.SplitBudget {
				t.Errorf("%s: a fixed budget that does not say cluster mode may split it", name)
			}
		default:
			if n.SplitBudget {
				t.Errorf("%s: says it has a budget to split but cluster mode splits only static-rate and static-concurrency", name)
			}
		}
	}
}

// What each controller says of itself for the dashboard: the statistic
// its target holds and its most restrictive setting.
func TestObjectiveAndFloorOfEveryController(t *testing.T) {
	type want struct {
		objective string
		floor     float64
		hasFloor  bool
	}
	wants := map[string]want{
		"auto":               {"target", auto.DefaultConfig().MinLimit, true},
		"bbr":                {"", 0, false},
		"envoy-gradient":     {"", 0, false},
		"gradient2":          {"", 0, false},
		"kihl":               {"", 0, true},
		"none":               {"", 0, false},
		"seda":               {"p90", DefaultSEDAConfig().RateMin, true},
		"static-concurrency": {"", 0, false},
		"static-rate":        {"", 0, false},
		"voigt-cpu":          {"", DefaultVoigtCPUConfig().MinRate, true},
		"voigt-queue":        {"", DefaultVoigtQueueConfig().MinRate, true},
		"yaksha":             {"mean", DefaultYakshaConfig().MaxDrop, true},
	}
	ready := func(cfg Config) {
		// Those that need a target or a budget before they can be built.
		switch c := cfg.(type) {
		case *SEDAConfig:
			c.Target = time.Second
		case *YakshaConfig:
			c.Tref = time.Second
		case *StaticConcurrencyConfig:
			c.Limit = 10
		case *StaticRateConfig:
			c.Rate = 10
		}
	}
	for _, name := range Names() {
		cfg, _ := NewConfig(name)
		w, ok := wants[name]
		if !ok {
			t.Errorf("%s: not decided in this test", name)
			continue
		}
		if f, has := FloorOf(cfg); f != w.floor || has != w.hasFloor {
			t.Errorf("%s: floor %v %v, want %v %v", name, f, has, w.floor, w.hasFloor)
		}
		ready(cfg)
		c, err := cfg.New()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := ObjectiveOf(c); got != w.objective {
			t.Errorf("%s: objective %q, want %q", name, got, w.objective)
		}
	}
	sc := DefaultSEDAConfig()
	sc.Target, sc.Degrade.Enabled = time.Second, true
	d := build(t, sc, nil, NewDegrader)
	if got := ObjectiveOf(d); got != "p90" {
		t.Errorf("degrader: objective %q, want p90", got)
	}
}

// SPDX-License-Identifier: Apache-2.0

// Package simulated is the simulator's driver of the paper figures
// (package figure): for each figure, a run in the virtual time of package
// sim that puts its requests through the proxy's own admission stages
// (stage.Stage: controller, gates, monitors, trigger and censoring,
// driven by sim.Stage exactly as the proxy and the middleware drive them
// live), and produces a figure.Result with package report:
// summary.json, timeseries.csv and PNG plots drawn like the paper's
// figure.
//
// A scenario is a figure's name, its typed parameters with defaults and
// documentation (figure.Params), and a run function. Parameters are
// declared like flags and can be overridden by name with Prepared.Set
// ("ti=0.1", the CLI's --set). A run is deterministic: the same
// parameters and seed give byte-identical files.
//
// Adding a scenario takes the figure's Spec in package figure, one file
// here that defines its setup function, and its line in the map of
// registry.go (there is no init-time self-registration).
//
// Nothing in this package is safe for concurrent use except that distinct
// Prepared runs are independent and may run on different goroutines.
package simulated

import (
	"fmt"

	"github.com/sluicehq/sluice/lab/figure"
)

// Params are a scenario's typed parameters (figure.Params).
type Params = figure.Params

// Scenario is the simulated driver of one figure.
type Scenario struct {
	// Name is the figure's name (kihl-step).
	Name string
	// Description is the figure's one line for the simulator (its
	// figure.Spec's Sim), filled in by All and Lookup.
	Description string
	// Setup declares the scenario's parameters on ps, each bound to a
	// variable of a fresh configuration, and returns the function that
	// runs the scenario with those variables. Setup is called once per
	// prepared run; the returned function reads the variables after the
	// --set overrides have been applied.
	Setup func(ps *Params) RunFunc
}

// RunFunc runs a prepared scenario with the given environment.
type RunFunc func(env Env) (*figure.Result, error)

// Env is what a run gets besides its parameters.
type Env struct {
	// Scenario is the scenario's name.
	Scenario string
	// Seed seeds every random stream of the run (sim.New(seed)).
	Seed uint64
	// Params are the run's parameters, for the summary's echo.
	Params *Params
}

// newResult starts the result of a run with its summary.
func newResult(env Env) *figure.Result {
	return figure.NewResult(env.Scenario, figure.Sim, env.Seed)
}

// Prepared is a scenario with its parameters declared and possibly
// overridden, ready to run.
type Prepared struct {
	Scenario Scenario
	Params   *Params
	run      RunFunc
}

// ParamError reports parameters that are each valid but inconsistent
// together (a warm-up longer than the run). It is a configuration error of
// the caller, like a bad --set value.
type ParamError struct{ Err error }

func (e *ParamError) Error() string { return e.Err.Error() }
func (e *ParamError) Unwrap() error { return e.Err }

// paramErrorf returns a *ParamError with a formatted message.
func paramErrorf(format string, args ...any) error {
	return &ParamError{Err: fmt.Errorf(format, args...)}
}

// Prepare looks up the named scenario and declares its parameters with
// their defaults. An unknown name is an error listing the valid ones.
func Prepare(name string) (*Prepared, error) {
	s, err := Lookup(name)
	if err != nil {
		return nil, err
	}
	return prepare(s)
}

func prepare(s Scenario) (*Prepared, error) {
	ps := figure.NewParams(s.Name)
	run := s.Setup(ps)
	if err := ps.Err(); err != nil {
		return nil, err
	}
	if run == nil {
		return nil, fmt.Errorf("scenario %s: Setup returned no run function", s.Name)
	}
	return &Prepared{Scenario: s, Params: ps, run: run}, nil
}

// Set applies "key=value" overrides in order; see Params.Set for the
// errors.
func (p *Prepared) Set(assignments ...string) error { return p.Params.SetAll(assignments) }

// Run runs the scenario with the given seed.
func (p *Prepared) Run(seed uint64) (*figure.Result, error) {
	res, err := p.run(Env{Scenario: p.Scenario.Name, Seed: seed, Params: p.Params})
	if err != nil {
		return nil, fmt.Errorf("scenario %s: %w", p.Scenario.Name, err)
	}
	if len(res.Checks) > 0 {
		// The figure's expectations, checked on this run as the live
		// experiment checks them on its own.
		met, total := res.Passed()
		res.Summary.Set("expectations_met", float64(met))
		res.Summary.Set("expectations_total", float64(total))
		res.AddTable("expectations.csv", figure.ChecksTable(res.Checks))
	}
	if err := res.Bundle.Validate(); err != nil {
		return nil, fmt.Errorf("scenario %s: %w", p.Scenario.Name, err)
	}
	return res, nil
}

// Lookup returns the named scenario; an unknown name is an error listing
// the valid ones.
func Lookup(name string) (Scenario, error) {
	spec, err := figure.Lookup(name, figure.Sim)
	if err != nil {
		return Scenario{}, err
	}
	setup, ok := registry[name]
	if !ok {
		return Scenario{}, fmt.Errorf("figure %s has no simulated driver registered", name)
	}
	return Scenario{Name: name, Description: spec.Sim, Setup: setup}, nil
}

// All returns every scenario, in the figure registry's order.
func All() []Scenario { return figure.Drivers(figure.Sim, Lookup) }

// Names returns the names of the figures with a simulated driver, in the
// figure registry's order.
func Names() []string { return figure.Names(figure.Sim) }

// Package scenario holds the simulator's named experiments: one per figure
// or table of the papers in docs/algorithms.md, each driving the proxy's
// own admission stages (stage.Stage: controller, gates, monitors, trigger
// and censoring) through sim.Stage in the virtual time of package sim,
// exactly as the proxy and the middleware drive them live, and producing
// a result folder with
// package report: summary.json, timeseries.csv and PNG plots drawn like the
// paper's figure.
//
// A scenario is a name, a one-line description, typed parameters with
// defaults and documentation, and a run function. Parameters are declared
// like flags (see Params) and can be overridden by name with
// Prepared.Set ("ti=0.1", the CLI's --set). A run is deterministic: the
// same parameters and seed give byte-identical files.
//
// Adding a scenario takes one file that defines a func() Scenario, plus
// its line in the registry list of registry.go (there is no init-time
// self-registration).
//
// Nothing in this package is safe for concurrent use except that distinct
// Prepared runs are independent and may run on different goroutines.
package scenario

import (
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/report"
)

// Mode is the mode recorded in the summary of every simulator run; the live
// experiments write "live".
const Mode = "sim"

// Scenario is one named experiment.
type Scenario struct {
	// Name is the scenario's name on the command line (kihl-step).
	Name string
	// Description is one line saying what the scenario reproduces.
	Description string
	// Setup declares the scenario's parameters on ps, each bound to a
	// variable of a fresh configuration, and returns the function that
	// runs the scenario with those variables. Setup is called once per
	// prepared run; the returned function reads the variables after the
	// --set overrides have been applied.
	Setup func(ps *Params) RunFunc
}

// RunFunc runs a prepared scenario with the given environment.
type RunFunc func(env Env) (*Result, error)

// Env is what a run gets besides its parameters.
type Env struct {
	// Scenario is the scenario's name.
	Scenario string
	// Seed seeds every random stream of the run (sim.New(seed)).
	Seed uint64
	// Params are the run's parameters, for the summary's echo.
	Params *Params
}

// Result is the outcome of a run: the bundle of files to write and the
// names of the metrics worth printing in a human summary.
type Result struct {
	// Bundle holds summary.json, the CSV tables and the figures.
	*report.Bundle
	// Key lists the headline metrics, in print order.
	Key []string
}

// newResult starts the result of a run with its summary.
func newResult(env Env) *Result {
	return &Result{Bundle: report.NewBundle(report.NewSummary(env.Scenario, Mode, env.Seed))}
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
	ps := newParams(s.Name)
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
func (p *Prepared) Run(seed uint64) (*Result, error) {
	res, err := p.run(Env{Scenario: p.Scenario.Name, Seed: seed, Params: p.Params})
	if err != nil {
		return nil, fmt.Errorf("scenario %s: %w", p.Scenario.Name, err)
	}
	if err := res.Bundle.Validate(); err != nil {
		return nil, fmt.Errorf("scenario %s: %w", p.Scenario.Name, err)
	}
	return res, nil
}

// Lookup returns the named scenario; an unknown name is an error listing
// the valid ones.
func Lookup(name string) (Scenario, error) {
	for _, s := range All() {
		if s.Name == name {
			return s, nil
		}
	}
	return Scenario{}, fmt.Errorf("unknown scenario %q (valid: %s)", name, strings.Join(Names(), ", "))
}

// All returns every registered scenario, in registry order.
func All() []Scenario {
	out := make([]Scenario, len(registry))
	for i, mk := range registry {
		out[i] = mk()
	}
	return out
}

// Names returns the registered scenario names, in registry order.
func Names() []string {
	var names []string
	for _, s := range All() {
		names = append(names, s.Name)
	}
	return names
}

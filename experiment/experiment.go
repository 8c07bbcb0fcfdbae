// Package experiment runs the papers' experiments live, on real sockets:
// a testbed backend, the sluice proxy with the experiment's configuration
// and the load generator, all on 127.0.0.1, once without admission control
// and once (or more) with it. Each run writes a report folder: summary.json
// with the same metric names as the simulator scenario of the same name
// (package scenario), CSV time series, PNG plots drawn like the paper's
// figures, expectations.csv and a self-contained report.html that states,
// for every expectation of the paper, whether this run met it and with
// which measured numbers.
//
// Live runs are time-compressed so that each takes at most three minutes
// (one with Options.Quick): service times, targets, think times and
// control periods are scaled by the same factor, recorded in the summary
// as time_scale (live seconds per paper second), so the metrics in
// milliseconds are live milliseconds and compare to the live target
// (target_ms, tref_ms) in the same summary.
//
// Adding an experiment takes one file that defines a func() Experiment,
// plus its line in the registry list in experiment.go (there is no init-time
// self-registration).
//
// An experiment run uses wall-clock time, real sockets and goroutines; it
// is not deterministic. Report generation (RenderHTML) is: the same Doc
// always gives the same bytes. Distinct runs must not overlap in time on
// one machine (they would share its CPUs).
package experiment

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sluicehq/sluice/report"
)

// Mode is the mode recorded in the summary of every live run; the
// simulator writes "sim".
const Mode = "live"

// Experiment is one named live experiment.
type Experiment struct {
	// Name is the experiment's name on the command line; it equals the
	// simulator scenario whose metric names it reuses.
	Name string
	// Paper names the paper and figure the experiment reproduces.
	Paper string
	// Description is one line saying what the experiment does.
	Description string
	// Run performs the experiment. It must honour ctx (Ctrl-C), report
	// progress through env, and return the bundle, the checks of the
	// paper's expectations and a description of the setup.
	Run func(ctx context.Context, env *Env) (*Result, error)
}

// registry lists the experiments in the order --list shows them.
var registry = []func() Experiment{
	sedaSpike,
	sedaClasses,
	sedaDegradation,
	yakshaLoadSweep,
	yakshaWorkloadShift,
	kihlStep,
	kihlDistribution,
	lijaminEpochs,
	voigtSweep,
	voigtStep,
	voigtBandwidth,
	peers,
	adaptiveExperiment,
}

// All returns every registered experiment, in registry order.
func All() []Experiment {
	out := make([]Experiment, len(registry))
	for i, mk := range registry {
		out[i] = mk()
	}
	return out
}

// Names returns the registered experiment names, in registry order.
func Names() []string {
	var names []string
	for _, e := range All() {
		names = append(names, e.Name)
	}
	return names
}

// Lookup returns the named experiment; an unknown name is an error listing
// the valid ones.
func Lookup(name string) (Experiment, error) {
	for _, e := range All() {
		if e.Name == name {
			return e, nil
		}
	}
	return Experiment{}, fmt.Errorf("unknown experiment %q (valid: %s)", name, strings.Join(Names(), ", "))
}

// Options configure one run of an experiment. The zero value runs the full
// experiment with seed 0, writes nothing and prints no progress.
type Options struct {
	// Quick runs the shortened form (at most about a minute).
	Quick bool
	// Seed seeds the load generator and the backends' random draws.
	Seed uint64
	// Out is the report folder; empty writes nothing (Outcome.Result still
	// holds everything).
	Out string
	// Progress receives one line per phase and per second of load; nil
	// discards them.
	Progress io.Writer
	// AdminAddr, when set, is the admin listener (host:port) of the
	// proxies the demo starts one after the other, so that its live
	// dashboard (/ui) stays at one address; empty picks a free port for
	// each proxy.
	AdminAddr string
	// Executable is the sluice binary started for child processes (the
	// pinned backend of the Kihl experiments); empty means the running
	// executable (os.Executable).
	Executable string
	// Now, when non-nil, replaces time.Now for the report's date (tests).
	Now func() time.Time
}

// Result is what an experiment's Run returns.
type Result struct {
	// Bundle holds summary.json, the CSV tables and the figures.
	*report.Bundle
	// Checks are the paper's expectations, each evaluated on this run.
	Checks []Check
	// Setup describes the run in a few sentences: backend, load, time
	// compression, controller parameters.
	Setup []string
	// Key lists the headline metrics, in print order.
	Key []string
}

// Outcome is a finished run: the result, where it was written and how long
// it took.
type Outcome struct {
	Experiment Experiment
	*Result
	// Dir is the report folder ("" when Options.Out was empty).
	Dir string
	// Files are the paths written.
	Files []string
	// Elapsed is the wall-clock time of the run.
	Elapsed time.Duration
}

// Passed returns the number of checks met and the number of checks.
func (r *Result) Passed() (met, total int) {
	for _, c := range r.Checks {
		if c.Pass {
			met++
		}
	}
	return met, len(r.Checks)
}

// Run looks up the named experiment, runs it, and writes its report folder
// to opts.Out (summary.json, CSVs, PNGs, expectations.csv, report.html).
// An unknown name is an error listing the valid names.
func Run(ctx context.Context, name string, opts Options) (*Outcome, error) {
	e, err := Lookup(name)
	if err != nil {
		return nil, err
	}
	return RunExperiment(ctx, e, opts)
}

// RunExperiment runs e with opts and writes its report folder.
func RunExperiment(ctx context.Context, e Experiment, opts Options) (*Outcome, error) {
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	env := newEnv(e.Name, opts)
	started := now()
	env.Phasef("%s: %s", e.Name, e.Description)
	res, err := e.Run(ctx, env)
	if err != nil {
		return nil, fmt.Errorf("experiment %s: %w", e.Name, err)
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("experiment %s: interrupted: %w", e.Name, ctx.Err())
	}
	elapsed := time.Since(env.start)
	met, total := res.Passed()
	res.Summary.Set("expectations_met", float64(met))
	res.Summary.Set("expectations_total", float64(total))
	res.Summary.Set("quick", b2f(opts.Quick))
	res.Summary.Set("wall_time_s", elapsed.Seconds())
	if err := res.Bundle.Validate(); err != nil {
		return nil, fmt.Errorf("experiment %s: %w", e.Name, err)
	}
	out := &Outcome{Experiment: e, Result: res, Elapsed: elapsed}
	if opts.Out == "" {
		return out, nil
	}
	doc, err := NewDoc(e, res, DocInfo{Date: started, Machine: MachineDescription(), Quick: opts.Quick, Elapsed: elapsed})
	if err != nil {
		return nil, fmt.Errorf("experiment %s: %w", e.Name, err)
	}
	files, err := WriteReport(opts.Out, res, doc)
	if err != nil {
		return nil, fmt.Errorf("experiment %s: %w", e.Name, err)
	}
	out.Dir, out.Files = opts.Out, files
	return out, nil
}

// WriteReport writes the bundle, expectations.csv and report.html into
// dir and returns the paths written.
func WriteReport(dir string, res *Result, doc *Doc) ([]string, error) {
	res.AddTable("expectations.csv", checksTable(res.Checks))
	files, err := res.Bundle.Write(dir)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "report.html")
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := RenderHTML(f, doc); err != nil {
		f.Close()
		return nil, fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	return append(files, path), nil
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

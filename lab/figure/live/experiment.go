// SPDX-License-Identifier: Apache-2.0

// Package live is the live driver of the paper figures (package figure):
// it runs each figure's experiment on real sockets, a testbed backend, the
// sluice proxy with the experiment's configuration and the load
// generator, all on 127.0.0.1, once without admission control and once
// (or more) with it. Each run writes a report folder: summary.json with
// the same metric names as the simulated driver of the same figure
// (package figure/simulated), CSV time series, PNG plots drawn like the
// paper's figures, expectations.csv and a self-contained report.html that
// states, for every expectation of the paper, whether this run met it and
// with which measured numbers.
//
// Live runs are time-compressed so that each takes at most three minutes
// (one with Options.Quick): service times, targets, think times and
// control periods are scaled by the same factor, recorded in the summary
// as time_scale (live seconds per paper second), so the metrics in
// milliseconds are live milliseconds and compare to the live target
// (target_ms, tref_ms) in the same summary.
//
// Adding an experiment takes the figure's Spec in package figure, one file
// here that defines its run function, and its line in the registry map in
// experiment.go (there is no init-time self-registration).
//
// An experiment run uses wall-clock time, real sockets and goroutines; it
// is not deterministic. Report generation (RenderHTML) is: the same Doc
// always gives the same bytes. Distinct runs must not overlap in time on
// one machine (they would share its CPUs).
package live

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/sluicehq/sluice/lab/figure"
)

// Experiment is the live driver of one figure.
type Experiment struct {
	// Name is the figure's name on the command line; the simulator's
	// driver of the same figure writes the same metric names.
	Name string
	// Paper names the paper and figure the experiment reproduces, and
	// Description says in one line what it does (the figure.Spec's Paper
	// and Live), filled in by All and Lookup.
	Paper, Description string
	// Run performs the experiment. It must honour ctx (Ctrl-C), report
	// progress through env, and return the bundle, the checks of the
	// paper's expectations and a description of the setup.
	Run func(ctx context.Context, env *Env) (*figure.Result, error)
}

// registry maps each figure with a live driver to its run; the order of
// listings is the figure registry's (package figure).
var registry = map[string]func(ctx context.Context, env *Env) (*figure.Result, error){
	"kihl-step":             runKihlStep,
	"kihl-distribution":     runKihlDistribution,
	"yaksha-load-sweep":     runYakshaSweep,
	"yaksha-workload-shift": runYakshaShift,
	"seda-spike":            runSEDASpike,
	"seda-classes":          runSEDAClasses,
	"seda-degradation":      runSEDADegradation,
	"voigt-sweep":           runVoigtSweep,
	"voigt-step":            runVoigtStep,
	"voigt-bandwidth":       runVoigtBandwidth,
	"lijamin-epochs":        runLiJaminEpochs,
	"adaptive":              runAdaptive,
	"graph":                 runGraph,
	"graph-crowd":           runGraphCrowd,
	"graph-recover":         runGraphRecover,
	"tenants":               runTenants,
	"graph-hotel":           runGraphHotel,
	"peers":                 runPeers,
	"cluster":               runCluster,
	"costly":                runCostly,
}

// All returns every registered experiment, in the figure registry's order.
func All() []Experiment { return figure.Drivers(figure.Live, Lookup) }

// Names returns the names of the figures with a live driver, in the
// figure registry's order.
func Names() []string { return figure.Names(figure.Live) }

// Lookup returns the named experiment; an unknown name is an error listing
// the valid ones.
func Lookup(name string) (Experiment, error) {
	spec, err := figure.Lookup(name, figure.Live)
	if err != nil {
		return Experiment{}, err
	}
	run, ok := registry[name]
	if !ok {
		return Experiment{}, fmt.Errorf("figure %s has no live driver registered", name)
	}
	return Experiment{Name: name, Paper: spec.Paper, Description: spec.Live, Run: run}, nil
}

// Options configure one run of an experiment. The zero value runs the full
// experiment with seed 0, writes nothing and prints no progress.
type Options struct {
	// Quick runs the shortened form (at most about a minute).
	Quick bool
	// Service is the adaptive experiment's service-time variant
	// (figure.AdaptiveServiceKinds; empty: exponential); other
	// experiments ignore it.
	Service string
	// Transport is the chain figures' protocol (graph, graph-crowd,
	// graph-recover):
	// "http" (empty) or "grpc" (every hop a gRPC service, the rows
	// figure.GraphGRPCRows); other experiments ignore it.
	Transport string
	// AutoMedianProbe turns on auto's median_probe option in the adaptive
	// experiment's auto row; other experiments ignore it.
	AutoMedianProbe bool
	// AutoKnee sets auto's knee option in the adaptive experiment's auto
	// row (auto.KneeProbes or auto.KneeOvertakes; empty: auto's
	// default); other experiments ignore it.
	AutoKnee string
	// AutoBurstWindow sets auto's burst_window option in the adaptive
	// experiment's auto row (0: auto's default, off); other experiments
	// ignore it.
	AutoBurstWindow time.Duration
	// AutoTailPool sets auto's tail_pool option in the adaptive
	// experiment's auto row (0: auto's default, off); other experiments
	// ignore it.
	AutoTailPool int
	// BackendProcess runs the adaptive experiment's backends as child
	// processes (`sluice-lab testbed queue --control`) rather than in the
	// lab's process, beside its load generator and the sluice rows'
	// proxy (`sluice-lab experiment` sets it unless told
	// --backend-process=false); other experiments ignore it.
	BackendProcess bool
	// ProxyProcess runs the adaptive experiment's sluice rows' proxy as a
	// child process (`sluice-lab proxy --config FILE`, the product's proxy
	// command) rather than in the lab's process beside its load
	// generator, as nginx and HAProxy run; its stage is sampled over the
	// admin listener's /state (`sluice-lab experiment` sets it unless
	// told --proxy-process=false). Other experiments ignore it.
	ProxyProcess bool
	// Rows, when set, runs only these rows of the peers, the adaptive,
	// the graph-hotel or the costly experiment (its system names), each
	// still on a fresh backend, proxy and load generator (graph-hotel:
	// fresh service processes); the checks about the rows left out report
	// n/a (peers) or are not made (adaptive: the comparisons with nginx
	// and HAProxy need both; graph-hotel: the comparison with the peers).
	// Other experiments ignore it.
	Rows []string
	// PolicerKernel is where the Voigt CPU experiments' (voigt-sweep,
	// voigt-step) connection policer enforces its rate, the proxy's
	// policer.kernel: "auto" (empty: the default, SYNs dropped in the
	// kernel when it can), "on" or "off" (the user-space reset at
	// accept); other experiments ignore it.
	PolicerKernel string
	// CGIWork is what a request's CPU demand is on the CGI backend of the
	// CPU experiments (voigt-sweep, voigt-step, kihl-step,
	// kihl-distribution): CGIWorkCPUTime (empty: the default) or
	// CGIWorkCount; other experiments ignore it.
	CGIWork string
	// Sets are "key=value" parameters of the experiments that take them
	// (graph-hotel: figure.DeclareHotel's, as sluice-lab sim --set;
	// costly: factors, warm, length, throttle_scope); other experiments
	// ignore them.
	Sets []string
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

// Outcome is a finished run: the result, where it was written and how long
// it took.
type Outcome struct {
	Experiment Experiment
	*figure.Result
	// Dir is the report folder ("" when Options.Out was empty).
	Dir string
	// Files are the paths written.
	Files []string
	// Elapsed is the wall-clock time of the run.
	Elapsed time.Duration
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
func WriteReport(dir string, res *figure.Result, doc *Doc) ([]string, error) {
	res.AddTable("expectations.csv", figure.ChecksTable(res.Checks))
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

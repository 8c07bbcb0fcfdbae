// SPDX-License-Identifier: Apache-2.0

package live

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/sluicehq/sluice/lab/dist"
	"github.com/sluicehq/sluice/lab/figure"
	"github.com/sluicehq/sluice/lab/loadgen"
	"github.com/sluicehq/sluice/lab/report"
	"github.com/sluicehq/sluice/lab/testbed"
	"github.com/sluicehq/sluice/policy"
)

// mainStage is the name of the stage every experiment's proxy controls.
const mainStage = "site"

// proxied describes one controlled or uncontrolled run: a fresh backend,
// the proxy in front of it with an admission policy, and the load.
type proxied struct {
	// newBackend builds the backend (a fresh one per run, so that no work
	// left over from a previous run slows this one).
	newBackend func() (testbed.Backend, error)
	// maxConcurrency bounds the proxy's upstream connections.
	maxConcurrency int
	// policy is the proxy configuration's admission part.
	policy policy.Config
	// phase is the load; its target and proxy are filled in.
	phase phase
}

// run serves the backend, starts the proxy, runs the load and stops both.
func (p *proxied) run(ctx context.Context, env *Env) (*phaseResult, error) {
	be, err := p.newBackend()
	if err != nil {
		return nil, fmt.Errorf("%s: backend: %w", p.phase.name, err)
	}
	srv, err := serveHTTP(be)
	if err != nil {
		be.Close()
		return nil, fmt.Errorf("%s: backend: %w", p.phase.name, err)
	}
	px, err := startProxy(ctx, proxyConfig(srv.URL, p.maxConcurrency, p.policy, ""))
	if err != nil {
		srv.Close()
		be.Close()
		return nil, fmt.Errorf("%s: %w", p.phase.name, err)
	}
	ph := p.phase
	ph.target, ph.proxy, ph.stageName = px.URL, px, mainStage
	res, runErr := ph.run(ctx, env)
	err = errors.Join(runErr, px.Close(), srv.Close(), be.Close())
	if err != nil {
		return nil, err
	}
	return res, nil
}

// closedLoad is a closed-loop load of one URL.
func closedLoad(name string, seed uint64, users dist.Schedule, thinkMean time.Duration, retry time.Duration,
	timeout, length time.Duration, classes []loadgen.Weighted) (loadgen.Config, error) {
	w, err := loadgen.NewURLs(name, "url", []loadgen.Weighted{{Name: "/page", Weight: 1}})
	if err != nil {
		return loadgen.Config{}, err
	}
	var think dist.Dist = dist.Deterministic{}
	if thinkMean > 0 {
		e, err := dist.NewExponential(thinkMean.Seconds())
		if err != nil {
			return loadgen.Config{}, err
		}
		think = e
	}
	return loadgen.Config{Mode: loadgen.ModeClosed, Duration: length, Seed: seed, Timeout: timeout, Workload: w,
		Users: users, Think: think, RetryWait: retry, Classes: classes}, nil
}

// stepSchedule is a piecewise-constant schedule from (start, value) pairs.
func stepSchedule(pairs ...float64) (dist.Schedule, error) {
	var segs []dist.Segment
	for i := 0; i+1 < len(pairs); i += 2 {
		segs = append(segs, dist.Segment{Start: time.Duration(pairs[i] * float64(time.Second)), Rate: pairs[i+1]})
	}
	return dist.NewSchedule(segs...)
}

// settingAt returns the controller setting sampled last at or before t
// (NaN before the first sample).
func settingAt(states []stateSample, t time.Duration, f func(s *stateSample) float64) float64 {
	v := math.NaN()
	for i := range states {
		if states[i].t > t {
			break
		}
		v = f(&states[i])
	}
	return v
}

// newSummary starts the summary of a live run.
func newSummary(env *Env) *report.Summary {
	return report.NewSummary(env.Name, string(figure.Live), env.Seed)
}

// finish ends a run that has been planned and run: a new Result whose
// summary analyse fills with the figure's metrics, then render writes
// its tables, plots, checks and setup.
func finish(env *Env, analyse func(*report.Summary), render func(*figure.Result) error) (*figure.Result, error) {
	res := figure.NewResult(env.Name, figure.Live, env.Seed)
	analyse(res.Summary)
	if err := render(res); err != nil {
		return nil, err
	}
	return res, nil
}

// queueBackend returns a constructor of the emulated-server backend.
func queueBackend(cfg testbed.QueueConfig) func() (testbed.Backend, error) {
	return func() (testbed.Backend, error) { return testbed.NewQueue(cfg) }
}

// scaled multiplies a paper duration by the time scale.
func scaled(d time.Duration, scale float64) time.Duration {
	return time.Duration(float64(d) * scale)
}

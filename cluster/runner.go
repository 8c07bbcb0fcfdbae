// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/internal/mathx"
	"github.com/sluicehq/sluice/policy"
	"github.com/sluicehq/sluice/share"
	"github.com/sluicehq/sluice/stage"
)

// StageTarget is a stage whose fixed budget is global: a static-rate or
// static-concurrency stage and its configured budget for the whole
// cluster.
type StageTarget struct {
	Stage  *stage.Stage
	Global float64
}

// Targets are what a runner splits: this instance's global-budget stages
// and its client shares (nil without them).
type Targets struct {
	Stages []StageTarget
	Shares *share.Shares
}

// Options are a runner's inputs that are not configuration.
type Options struct {
	// Previous is the runner of the configuration being replaced (a
	// reload), or nil: its core's knowledge of the cluster carries over
	// (NewCore). The caller stops Previous.
	Previous *Runner
	// Logger receives mode changes (warnings when falling back, info when
	// synced again) and failed applications; nil: slog.Default().
	Logger *slog.Logger
	// Registerer, when set and Metrics is nil, gets the runner's metrics
	// (NewMetrics); nil with Metrics nil: none.
	Registerer prometheus.Registerer
	// Metrics, when set, receive the runner's syncs and view: metrics
	// registered once (NewMetrics) and handed to every runner of a
	// process that reloads, in place of Registerer.
	Metrics *Metrics
}

// Runner is the live driver of cluster mode: a goroutine (Run) that every
// sync period reads the targets' counts, exchanges reports with the
// other instances through Redis (bounded by Config.Timeout) and puts the
// core's assignment into force. No request waits for it. Stop it by
// ending Run's context; Run then closes the Redis connections (and, after
// SetLeaving, first tells the others it left).
type Runner struct {
	cfg     Config
	core    *Core
	store   *Store
	targets Targets
	kinds   []sluice.Kind
	log     *slog.Logger
	m       *Metrics
	leaving atomic.Bool

	mu   sync.Mutex // serialises Sync and Prime
	last Assignment
}

// NewRunner gives cfg its defaults (SetDefaults, on a copy: a zero field
// means its default), validates it and the targets and returns a
// runner with its Redis client; it does not connect yet. Call Prime
// before serving, then Run.
func NewRunner(cfg Config, t Targets, opts Options) (*Runner, error) {
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &Runner{cfg: cfg, targets: t, log: opts.Logger, m: opts.Metrics}
	if r.log == nil {
		r.log = slog.Default()
	}
	for _, st := range t.Stages {
		k, ok := st.Stage.Static()
		if !ok {
			return nil, fmt.Errorf("cluster: stage %q has no fixed budget to split (static-rate or static-concurrency)", st.Stage.Name())
		}
		if !mathx.Finite(st.Global) || st.Global <= 0 {
			return nil, fmt.Errorf("cluster: stage %q: global budget %g is invalid", st.Stage.Name(), st.Global)
		}
		r.kinds = append(r.kinds, k)
	}
	var prev *Core
	if opts.Previous != nil {
		prev = opts.Previous.core
	}
	r.core = NewCore(cfg, prev)
	if r.m == nil && opts.Registerer != nil {
		m, err := NewMetrics(opts.Registerer)
		if err != nil {
			return nil, err
		}
		r.m = m
	}
	s, err := NewStore(cfg)
	if err != nil {
		return nil, err
	}
	r.store = s
	return r, nil
}

// Config returns the runner's configuration.
func (r *Runner) Config() Config { return r.cfg }

// View returns the cluster as this instance sees it.
func (r *Runner) View() View { return r.core.View() }

// Last returns the assignment in force.
func (r *Runner) Last() Assignment {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

// local reads the targets' counts.
func (r *Runner) local() Local {
	var l Local
	for i, st := range r.targets.Stages {
		off, adm := st.Stage.Counts()
		l.Stages = append(l.Stages, LocalStage{Name: st.Stage.Name(), Kind: r.kinds[i], Global: st.Global, Offered: off, Admitted: adm})
	}
	if sh := r.targets.Shares; sh != nil {
		snap := sh.Snapshot()
		cfg := sh.Config()
		ls := &LocalShares{Total: float64(cfg.TotalBandwidth)}
		for i, c := range snap.Clients {
			share := cfg.OthersShare()
			if i < len(cfg.Clients) {
				share = cfg.Clients[i].Share
			}
			ls.Clients = append(ls.Clients, LocalClient{Name: c.Name, Share: share, Arrivals: c.Arrivals, Bytes: c.Bytes, Measured: c.Measured})
		}
		l.Shares = ls
	}
	return l
}

// Prime puts the parts of the core's current mode into force at now
// without a sync (1/N of every budget before the first sync), so that no
// stage enforces a whole global budget while the first exchange runs.
func (r *Runner) Prime(now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.apply(now, r.core.Prime(r.local()))
}

// Sync runs one sync at now: read, exchange (bounded by Config.Timeout),
// plan, apply. It returns the assignment put into force.
func (r *Runner) Sync(ctx context.Context, now time.Time) Assignment {
	r.mu.Lock()
	defer r.mu.Unlock()
	rep := r.core.Report(now, r.local())
	xctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	start := time.Now()
	x, err := r.store.Exchange(xctx, rep)
	took := time.Since(start)
	cancel()
	if err != nil && ctx.Err() != nil {
		// Stopped (a reload or a shutdown), not a Redis failure: keep
		// the parts in force and say nothing.
		return r.last
	}
	var ne net.Error
	if err != nil && (errors.Is(xctx.Err(), context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()) {
		err = fmt.Errorf("no answer within %v: %w", r.cfg.Timeout, err)
	}
	a := r.core.Plan(now, x, err)
	r.m.observe(err == nil, took)
	if a.Changed {
		switch a.Mode {
		case ModeFallback:
			r.log.Warn("cluster: Redis unreachable; enforcing 1/N of every global budget locally until it returns",
				"instance", r.cfg.Instance, "instances", a.Instances, "err", a.Reason)
		case ModeSynced:
			r.log.Info("cluster: in sync", "instance", r.cfg.Instance, "instances", a.Instances)
		}
	}
	r.apply(now, a)
	return a
}

// apply puts a into force; r.mu is held.
func (r *Runner) apply(now time.Time, a Assignment) {
	r.last = a
	for i, sp := range a.Stages {
		if i >= len(r.targets.Stages) {
			break
		}
		if err := r.targets.Stages[i].Stage.SetStatic(now, sp.Part, sp.Reason); err != nil {
			r.log.Error("cluster: cannot apply a stage's part", "stage", sp.Name, "part", sp.Part, "err", err)
		}
	}
	if a.Shares != nil && r.targets.Shares != nil {
		if err := r.targets.Shares.SetAllocations(a.Shares.Total, a.Shares.Alloc); err != nil {
			r.log.Error("cluster: cannot apply the shares' part", "err", err)
		}
		if err := r.targets.Shares.HoldActive(a.Shares.Held); err != nil {
			r.log.Error("cluster: cannot hold the clients active", "err", err)
		}
	}
	r.m.setView(r)
}

// Close closes the Redis connections of a runner whose Run was never
// started (Run closes them itself when it returns).
func (r *Runner) Close() error { return r.store.Close() }

// SetLeaving makes Run tell the others this instance left when its
// context ends (a shutdown, not a reload).
func (r *Runner) SetLeaving() { r.leaving.Store(true) }

// Run syncs at once and then every Config.Period until ctx ends; then,
// after SetLeaving, it publishes its leaving (bounded by Config.Timeout),
// and it closes the Redis connections. It returns when all of that is
// done.
func (r *Runner) Run(ctx context.Context) {
	defer r.store.Close()
	r.Sync(ctx, time.Now())
	tick := time.NewTicker(r.cfg.Period)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			if r.leaving.Load() {
				lctx, cancel := context.WithTimeout(context.Background(), r.cfg.Timeout)
				if err := r.store.Leave(lctx, r.core.Last()); err != nil {
					r.log.Warn("cluster: could not announce the shutdown; the others stop counting this instance when its heartbeat expires", "err", err)
				}
				cancel()
			}
			return
		case now := <-tick.C:
			if ctx.Err() == nil {
				r.Sync(ctx, now)
			}
		}
	}
}

// PolicyTargets returns the targets of an admission policy: every
// static-rate and static-concurrency stage of pol, except those named in
// local, with the budget its configuration gives it (read as the whole
// cluster's), and shares (nil without client shares). The proxy builds
// its runner's targets this way; a service with the middleware does the
// same with its own policy.
func PolicyTargets(pol *policy.Policy, shares *share.Shares, local []string) (Targets, error) {
	cfg := pol.Config()
	ctrls, err := cfg.StageControllers()
	if err != nil {
		return Targets{}, err
	}
	t := Targets{Shares: shares}
	for _, sc := range cfg.Stages {
		if slices.Contains(local, sc.Name) {
			continue
		}
		var global float64
		switch c := ctrls[sc.Name].(type) {
		case *control.StaticRateConfig:
			global = c.Rate
		case *control.StaticConcurrencyConfig:
			global = float64(c.Limit)
		default:
			continue
		}
		st := pol.Stage(sc.Name)
		if st == nil {
			return Targets{}, fmt.Errorf("cluster: the policy has no stage %q", sc.Name)
		}
		t.Stages = append(t.Stages, StageTarget{Stage: st, Global: global})
	}
	return t, nil
}

// SPDX-License-Identifier: Apache-2.0

package simulated

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/sluicehq/sluice/control/auto"
	"github.com/sluicehq/sluice/lab/dist"
	"github.com/sluicehq/sluice/lab/figure"
	"github.com/sluicehq/sluice/lab/sim"
	"github.com/sluicehq/sluice/monitor"
	"github.com/sluicehq/sluice/stage"
)

// costly: two APIs share a CPU-bound leaf service behind an entry hop, one
// of them 10× (and 50×) costlier per request, at 8× the leaf's capacity.
// Every hop is a sluice stage told only the SLO (auto); the leaf's stage
// queues its tenants (tenants.key: path, one tenant per API) fairly by the
// row's cost measure; the client's deadline travels with each call, and a
// call whose deadline passes, or that the leaf's hog rule names, is
// cancelled through its context at every hop: the work it had left at
// the leaf is not done (sim.PS.Cancel). figure.CostlyChecks holds the
// service_time row to the cost-fair shares and to the wasted work.

type costlyParams struct {
	cores, entryCores float64
	light, entryWork  time.Duration
	overload, lightLd float64
	slo, deadline     time.Duration
	warm, length      time.Duration
	factors           []float64
	service           string
	tailGuard         bool
	entryTailGuard    bool
	minCompletions    int
	rows              []string
	leafMedian        bool
	budget            float64
	leafShare         bool
	leafLimit         float64
}

func costlyScenario(ps *Params) RunFunc {
	var c costlyParams
	ps.Float(&c.cores, "cores", 4, 0.5, 256, "the leaf's CPU cores (processor sharing, one core per call at most)")
	ps.Duration(&c.light, "light", time.Millisecond, time.Microsecond, time.Minute, "the light API's mean CPU time at the leaf (exponential)")
	ps.Floats(&c.factors, "factors", []float64{10, 50}, 1, 1000, "the costly API's cost ÷ the light one's, one run each")
	ps.Choice(&c.service, "service", "exp", []string{"exp", "det"}, "the calls' CPU time: exponential or deterministic about each API's mean")
	ps.Bool(&c.tailGuard, "tail_guard", true, "auto's tail guard at the leaf (auto.tail_guard): the costly API's calls are the tail")
	ps.Bool(&c.entryTailGuard, "entry_tail_guard", true, "auto's tail guard at the entry hop too")
	ps.Int(&c.minCompletions, "min_completions", 200, 1, 1000000, "auto's throughput window at every hop (auto.min_completions)")
	ps.Float(&c.overload, "overload", 8, 0, 1000, "offered CPU demand of both APIs at the leaf, × its capacity")
	ps.Float(&c.lightLd, "light_load", 0.4, 0, 1000, "the light API's part of it, × capacity (the costly one sends the rest)")
	ps.Float(&c.entryCores, "entry_cores", 2, 0.5, 256, "the entry hop's CPU cores")
	ps.Duration(&c.entryWork, "entry_work", 100*time.Microsecond, 0, time.Minute, "the entry hop's CPU time per call")
	ps.Duration(&c.slo, "slo", 250*time.Millisecond, time.Millisecond, time.Hour, "the SLO every hop's auto stage is told")
	ps.Duration(&c.deadline, "deadline", 500*time.Millisecond, time.Millisecond, time.Hour, "the client's deadline, travelling with each call")
	ps.Duration(&c.warm, "warm", 10*time.Second, 0, time.Hour, "time before the measurement")
	ps.Duration(&c.length, "length", 20*time.Second, time.Second, time.Hour, "time measured")
	names := make([]string, len(costlyRows))
	for i, r := range costlyRows {
		names[i] = r.name
	}
	ps.Subset(&c.rows, "rows", names, names, "the rows to run, in the order given")
	ps.Float(&c.budget, "budget", 3, 0, 100, "the deadline budget at the leaf in the *_budget rows (tenants.deadline_budget), × the tenant's mean service time there")
	ps.Float(&c.leafLimit, "leaf_limit", 1.5, 0.25, 100, "the bound on the leaf's auto limit in the *_cores rows (auto.max_limit), × its cores")
	ps.Bool(&c.leafShare, "leaf_share", false, "the slot share at the leaf too in the *_cores rows (at the entry only by default)")
	ps.Bool(&c.leafMedian, "leaf_median_probe", false, "auto's median probe at the leaf (auto.median_probe), in every row")
	return func(env Env) (*figure.Result, error) { return runCostly(env, c) }
}

// costlyRow is one way of running the hops: their queues' cost measure
// ("" for FIFO), whether deadlines and the hog rule cancel calls in
// service, the leaf's hog rule, the slot share among tenants, the
// deadline budget, and a bound on the leaf's limit.
type costlyRow struct {
	name   string
	cost   stage.CostMeasure
	fifo   bool
	cancel bool
	hog    stage.Hog
	share  bool // tenants.slot_share at both hops
	budget bool // tenants.deadline_budget at the leaf
	// cores bounds the leaf's auto limit near its cores (auto.max_limit,
	// leaf_limit × cores): a processor-sharing CPU serves no more past
	// them, it only stretches every call. The slot share is then at the
	// entry only (leaf_share): at the leaf, a few slots split by peak
	// demand leave the costly API too few.
	cores bool
}

var costlyRows = []costlyRow{
	{name: "fifo", fifo: true, cancel: true},
	{name: "requests", cost: stage.CostRequests, cancel: true},
	{name: "service_time", cost: stage.CostServiceTime, cancel: true},
	{name: "service_time_hog", cost: stage.CostServiceTime, cancel: true, hog: stage.Hog{OverShare: true}},
	{name: "service_time_nocancel", cost: stage.CostServiceTime},
	{name: "service_time_share", cost: stage.CostServiceTime, cancel: true, share: true},
	{name: "service_time_share_budget", cost: stage.CostServiceTime, cancel: true, share: true, budget: true},
	{name: "service_time_share_cores", cost: stage.CostServiceTime, cancel: true, share: true, cores: true},
	{name: "service_time_share_cores_budget", cost: stage.CostServiceTime, cancel: true, share: true, cores: true, budget: true},
}

func runCostly(env Env, c costlyParams) (*figure.Result, error) {
	res := newResult(env)
	tab := figure.NewCostlyTable()
	for _, f := range c.factors {
		for _, row := range costlyRows {
			if !slices.Contains(c.rows, row.name) {
				continue
			}
			m, err := runCostlyOne(env.Seed, c, f, row)
			if err != nil {
				return nil, fmt.Errorf("x%g %s: %w", f, row.name, err)
			}
			checks, key, err := figure.CostlyChecks(res.Summary, tab, row.name, f, c.cores, ms(c.slo.Seconds()), m)
			if err != nil {
				return nil, err
			}
			res.Checks = append(res.Checks, checks...)
			res.Key = append(res.Key, key...)
		}
	}
	res.AddTable("costly.csv", tab)
	return res, nil
}

// costlyCall is what the figure keeps of a call.
type costlyCall struct {
	api      int
	leafWork float64 // CPU seconds the leaf spent on it
}

// cpuHop is a hop's handler: the call's work on the hop's CPU, then next
// (nil: answered). With cancel set, a call whose sender goes away
// (Request.Cancel: its deadline, or a hog rule at this or another hop)
// leaves the CPU with its remaining work undone and is answered as
// refused.
type cpuHop struct {
	e      *sim.Engine
	cpu    *sim.PS
	work   func(r *sim.Request) float64
	next   sim.Handler
	cancel bool
	// done sees the CPU seconds spent on each call, once it leaves.
	done func(r *sim.Request, worked float64)
}

func (h *cpuHop) Handle(r *sim.Request) {
	j := &sim.Job{Req: r, Work: h.work(r)}
	j.Done = func(j *sim.Job) {
		if h.done != nil {
			h.done(r, j.Work)
		}
		if h.next == nil {
			r.Finish(h.e.Now(), sim.Completed)
			return
		}
		h.next.Handle(r)
	}
	if h.cancel {
		r.OnCancel(func(r *sim.Request) {
			if w, ok := h.cpu.Cancel(j); ok {
				if h.done != nil {
					h.done(r, w)
				}
				r.Finish(h.e.Now(), sim.Rejected)
			}
		})
	}
	h.cpu.Submit(j)
}

func runCostlyOne(seed uint64, c costlyParams, factor float64, row costlyRow) (figure.CostlyRun, error) {
	e := sim.New(seed)
	auto := func() *auto.Config {
		cfg := auto.DefaultConfig()
		cfg.SLO = c.slo
		cfg.TailGuard, cfg.MinCompletions = c.tailGuard, c.minCompletions
		return &cfg
	}
	leafCPU, err := sim.NewCPU(e, c.cores)
	if err != nil {
		return figure.CostlyRun{}, err
	}
	entryCPU, err := sim.NewCPU(e, c.entryCores)
	if err != nil {
		return figure.CostlyRun{}, err
	}
	from, to := c.warm, c.warm+c.length
	in := func(r *sim.Request) bool { return r.Sent >= from && r.Sent < to }
	var run figure.CostlyRun
	leafHop := &cpuHop{e: e, cpu: leafCPU, work: sim.Demand, cancel: row.cancel,
		done: func(r *sim.Request, w float64) { r.Data.(*costlyCall).leafWork += w }}
	leafAuto := auto()
	leafAuto.MedianProbe = c.leafMedian
	if row.cores {
		leafAuto.MaxLimit = math.Round(c.leafLimit * c.cores)
		leafAuto.InitialLimit = min(leafAuto.InitialLimit, leafAuto.MaxLimit)
		leafAuto.MinLimit = min(leafAuto.MinLimit, leafAuto.MaxLimit)
	}
	leafOpts := stage.Options{Name: "leaf", Controller: leafAuto, MaxQueue: 4096, Hog: row.hog}
	if !row.fifo {
		leafOpts.Tenants = stage.Tenants{Fair: true, Cost: row.cost, SlotShare: row.share}
	}
	entryTenants := leafOpts.Tenants
	if row.budget {
		leafOpts.Tenants.DeadlineBudget = c.budget
	}
	if row.cores && !c.leafShare {
		leafOpts.Tenants.SlotShare = false
	}
	leaf, err := newStaged(e, leafOpts, leafHop, nil)
	if err != nil {
		return run, err
	}
	leaf.entry.TenantOf = func(r *sim.Request) string { return figure.CostlyAPIs[r.Type] }
	entryHop := &cpuHop{e: e, cpu: entryCPU, work: func(*sim.Request) float64 { return c.entryWork.Seconds() }, next: leaf.entry, cancel: row.cancel}
	// The entry hop's stage sees each call's whole time, the leaf's
	// included, and queues the APIs as the leaf does.
	entryAuto := auto()
	entryAuto.TailGuard = c.tailGuard && c.entryTailGuard
	entry, err := newStaged(e, stage.Options{Name: "entry", Controller: entryAuto, MaxQueue: 4096, Tenants: entryTenants}, entryHop, nil)
	if err != nil {
		return run, err
	}
	entry.entry.TenantOf = leaf.entry.TenantOf
	// The client's side: the deadline travels with the call; with
	// cancellation on, it ends the call's context at every hop at once.
	client := sim.HandlerFunc(func(r *sim.Request) {
		r.Deadline = r.Sent + c.deadline
		r.Data = &costlyCall{api: r.Type}
		if row.cancel {
			t := e.Schedule(r.Deadline, r.Cancel)
			r.Defer(func(*sim.Request) { t.Stop() })
		}
		entry.entry.Handle(r)
	})
	svc := func(mean float64) (dist.Dist, error) {
		if c.service == "det" {
			return dist.NewDeterministic(mean)
		}
		return dist.NewExponential(mean)
	}
	lightSvc, err := svc(c.light.Seconds())
	if err != nil {
		return run, err
	}
	heavySvc, err := svc(factor * c.light.Seconds())
	if err != nil {
		return run, err
	}
	loads := []float64{c.lightLd * c.cores, (c.overload - c.lightLd) * c.cores}
	means := []float64{c.light.Seconds(), factor * c.light.Seconds()}
	rts := make([][]float64, 2)
	run.APIs = make([]figure.CostlyAPI, 2)
	for i := range figure.CostlyAPIs {
		sched, err := dist.NewSchedule(dist.Segment{Rate: loads[i] / means[i]})
		if err != nil {
			return run, err
		}
		types := make([]sim.RequestType, 2)
		types[i] = sim.RequestType{Name: figure.CostlyAPIs[i], Demand: []dist.Dist{lightSvc, heavySvc}[i]}
		mix := []float64{0, 0}
		mix[i] = 1
		src, err := sim.NewOpen(e, sim.OpenConfig{Name: figure.CostlyAPIs[i], Arrivals: dist.Poisson{Rate: sched},
			Types: types, Mix: mix, Target: client, Client: i,
			OnFinish: func(r *sim.Request) {
				if !in(r) {
					return
				}
				cl := r.Data.(*costlyCall)
				run.LeafWork += cl.leafWork
				inTime := r.Outcome == sim.Completed && r.Finished <= r.Deadline
				if !inTime {
					run.Wasted += cl.leafWork
				}
				if r.Outcome == sim.Completed && r.Finished > r.Deadline {
					run.Late++
				}
				a := &run.APIs[cl.api]
				a.Offered += r.Demand
				a.Sent++
				if inTime {
					a.Goodput += r.Demand
					a.Served++
					rts[cl.api] = append(rts[cl.api], r.ResponseTime().Seconds())
				}
			}})
		if err != nil {
			return run, err
		}
		src.Start()
		e.Schedule(to, src.Stop)
	}
	e.Run(to + 2*c.deadline)
	secs := c.length.Seconds()
	for i := range run.APIs {
		a := &run.APIs[i]
		a.Offered /= secs
		a.Goodput /= secs
		a.P99MS = ms(monitor.Percentile(rts[i], 0.99))
	}
	if h := leaf.st.HogCancelled(); h != nil {
		run.HogCancelled = h[stage.HogOverShare] + h[stage.HogMaxService]
	}
	return run, nil
}

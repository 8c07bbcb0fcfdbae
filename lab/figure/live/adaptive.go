// SPDX-License-Identifier: Apache-2.0

package live

import (
	"time"

	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/lab/figure"
)

// adaptive is the live twin of the simulator's adaptive scenario: every
// overload control sluice offers, and the two static ones operators use
// today (nginx limit_req told the backend's capacity, HAProxy maxconn told
// its workers), on the same seeded open-loop load with a fresh backend per
// run, through the phases that separate an adaptive control from a
// hand-tuned one:
//
//	a  a flash crowd from 0.5× to 10× capacity within 1 s;
//	b  the backend's capacity halves (each request costs twice as much);
//	c  it doubles;
//	d  its parallelism grows from 4 to 16 workers at the same cost;
//	e  two backends of 2 workers each, one becomes 3× slower.
//
// In b–e the load is 3× the initial capacity from the end of the warm-up,
// and the backend changes after changeAt more seconds. Goodput counts
// answers within the objective (the SLO auto is told), by the time the
// request was meant to be sent.

// The backend, the objective and the clients: the figure's (declared
// once in package figure, the simulator's defaults), in real time.
var (
	adaptiveSpec = figure.DefaultAdaptive()
	// adaptiveWorkers and adaptiveService make the backend: FIFO workers
	// with exponential service of this mean (400 req/s).
	adaptiveWorkers = adaptiveSpec.Workers
	adaptiveService = adaptiveSpec.ServiceTime
	// adaptiveSLO is the objective: auto is told it, seda gets 0.6× it as
	// its p90 target and yaksha 0.24× as its mean target (the quick
	// starts of the field test), and goodput counts answers within it.
	adaptiveSLO = adaptiveSpec.SLO
	// adaptivePeerWait is how long nginx (burst/rate) and HAProxy
	// (timeout queue) let a request wait: half the objective.
	adaptivePeerWait = adaptiveSLO / 2
	// adaptiveTimeout is the clients' timeout.
	adaptiveTimeout = adaptiveSpec.Timeout
)

// adaptiveConns bounds the load generator's connections and the proxies'
// upstream connections per server (never binding).
const adaptiveConns = 4096

// adaptiveRow is one system compared.
type adaptiveRow struct {
	name, label string
	// controller is the sluice stage's controller; "" for nginx and
	// HAProxy.
	controller string
	// ctrl returns a fresh configuration of the controller (nil for nginx
	// and HAProxy).
	ctrl func() control.Config
}

// adaptiveRows are the systems, in table order.
var adaptiveRows = []adaptiveRow{
	{"none", "no control (sluice proxy, controller none)", "none", registryDefault("none")},
	{"nginx", "nginx limit_req at the measured capacity", "", nil},
	{"haproxy", "HAProxy maxconn = workers, timeout queue", "", nil},
	{"seda", "sluice seda, p90 target 0.6×SLO", "seda", func() control.Config {
		c := control.DefaultSEDAConfig()
		c.Target, c.RateMax, c.InitialRate = figure.AdaptiveSEDATarget(adaptiveSLO), 1e6, 1e6
		return &c
	}},
	{"yaksha", "sluice yaksha, mean target 0.24×SLO", "yaksha", func() control.Config {
		c := control.DefaultYakshaConfig()
		c.Tref = figure.AdaptiveYakshaTref(adaptiveSLO)
		return &c
	}},
	{"gradient2", "sluice gradient2 (Netflix defaults)", "gradient2", registryDefault("gradient2")},
	{"envoy-gradient", "sluice envoy-gradient (Envoy defaults)", "envoy-gradient", registryDefault("envoy-gradient")},
	{"bbr", "sluice bbr (kratos defaults, no CPU sensor)", "bbr", registryDefault("bbr")},
	{"auto", "sluice auto, told only the SLO", "auto", func() control.Config { return autoConfig(adaptiveSLO) }},
}

// registryDefault returns the constructor of the named controller's
// default configuration.
func registryDefault(name string) func() control.Config {
	return func() control.Config {
		c, err := control.NewConfig(name)
		if err != nil {
			panic(err) // a name of the table above
		}
		return c
	}
}

// adaptivePhase is one phase: its letter, a title, and what changes.
type adaptivePhase struct {
	name, title string
	// backends is the number of backends (workers split evenly).
	backends int
}

var adaptivePhases = []adaptivePhase{
	{"a", "(a) flash crowd 0.5× → 10× capacity within 1 s", 1},
	{"b", "(b) the backend's capacity halves", 1},
	{"c", "(c) the backend's capacity doubles", 1},
	{"d", "(d) parallelism 4 → 16 workers, same cost per request", 1},
	{"e", "(e) two backends of 2 workers, one becomes 3× slower", 2},
}

// adaptivePlan is the shape of the runs: rows, phases and their timing.
type adaptivePlan struct {
	rows   []adaptiveRow
	phases []adaptivePhase
	// warm is the time at 0.5× capacity before the overload; crowd the
	// length of phase a's crowd; changeAt the overload before the backend
	// changes in b–e, after the time measured after the change.
	warm, crowd, changeAt, after time.Duration
	// base, crowdX and overloadX are the offered loads in multiples of
	// the measured capacity.
	base, crowdX, overloadX float64
	// capLength is the length of the capacity measurement.
	capLength time.Duration
}

// at returns the time of phase p's event: the crowd's arrival (a) or the
// backend's change (b–e), from the start of the run.
func (pl adaptivePlan) at(p adaptivePhase) time.Duration {
	if p.name == "a" {
		return pl.warm
	}
	return pl.warm + pl.changeAt
}

// length returns the length of a run of phase p.
func (pl adaptivePlan) length(p adaptivePhase) time.Duration {
	if p.name == "a" {
		return pl.warm + pl.crowd
	}
	return pl.warm + pl.changeAt + pl.after
}

// planAdaptive returns the full plan (every row through every phase,
// about 15 minutes) or the quick one (no control, the two peers and auto
// through the crowd and the halving, about a minute), with only the rows
// of env.Rows when it names some (--rows).
func planAdaptive(env *Env) (adaptivePlan, error) {
	full := adaptivePlan{rows: adaptiveRows, phases: adaptivePhases, warm: 3 * time.Second, crowd: 10 * time.Second,
		changeAt: 5 * time.Second, after: 10 * time.Second, base: 0.5, crowdX: 10, overloadX: 3, capLength: 2 * time.Second}
	quick := full
	quick.rows = []adaptiveRow{adaptiveRows[0], adaptiveRows[1], adaptiveRows[2], adaptiveRows[len(adaptiveRows)-1]}
	quick.phases = adaptivePhases[:2]
	quick.warm, quick.crowd, quick.changeAt, quick.after, quick.capLength = time.Second, 2500*time.Millisecond, 1500*time.Millisecond, 3500*time.Millisecond, time.Second
	pl := pick(env, full, quick)
	rows, err := selectRows("adaptive", pl.rows, func(r adaptiveRow) string { return r.name }, env.Rows)
	if err != nil {
		return adaptivePlan{}, err
	}
	pl.rows = rows
	return pl, nil
}

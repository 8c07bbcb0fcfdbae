// SPDX-License-Identifier: Apache-2.0

// Package figure is the catalogue of the papers' figures sluice
// reproduces, and what a run of one produces whichever way it runs.
//
// Each figure (or table) is one Spec in one registry: its name on the
// command line, the paper and figure it reproduces, and one line for each
// of its two drivers, which live in packages named for what they do:
//
//   - figure/simulated runs it in virtual time (`sluice-lab sim NAME`): the
//     proxy's own stages driven by the discrete-event simulator;
//   - figure/live runs it on real sockets (`sluice-lab experiment NAME`): a
//     testbed backend, the sluice proxy and the load generator on
//     127.0.0.1.
//
// Both drivers return a Result (one type): the bundle of files (a
// summary.json whose metrics have the same names in both modes, CSV
// series, PNG plots), the paper's expectations checked on this run
// (Check), the setup in a few sentences and the headline metrics. The
// typed parameters of `--set` are Params. The settling rules the figures
// use are in package settle.
//
// Adding a figure takes its Spec in the registry below and a driver in
// figure/simulated, figure/live or both, each registered there by the
// figure's name (no init-time self-registration); each driver package's
// tests check its drivers against this registry.
package figure

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Mode says which driver produced a result; it is the summary's "mode".
type Mode string

const (
	// Sim is the mode of the simulator's runs.
	Sim Mode = "sim"
	// Live is the mode of the live runs.
	Live Mode = "live"
)

// Spec is one figure.
type Spec struct {
	// Name is the figure's name on the command line (kihl-step).
	Name string
	// Paper names the paper and the figure or table reproduced.
	Paper string
	// Sim says in one line what the simulator runs; empty when the
	// figure has no simulated driver.
	Sim string
	// Live says in one line what the live experiment runs; empty when
	// the figure has no live driver.
	Live string
}

// Has reports whether the figure has a driver of mode m.
func (s Spec) Has(m Mode) bool {
	if m == Sim {
		return s.Sim != ""
	}
	return s.Live != ""
}

// Description returns the one-line description of mode m's driver.
func (s Spec) Description(m Mode) string {
	if m == Sim {
		return s.Sim
	}
	return s.Live
}

const (
	kihlPaper   = "Andersson, Kihl, Robertsson & Wittenmark, PI control of server utilization"
	yakshaPaper = "Kamra, Misra & Nahum, Yaksha"
	sedaPaper   = "Welsh & Culler, Adaptive Overload Control for Busy Internet Servers"
	voigtPaper  = "Voigt & Gunningberg, Handling Multiple Bottlenecks in Web Servers Using Adaptive Inbound Controls"
)

// registry lists the figures in the order the command lines list them.
var registry = []Spec{
	{Name: "kihl-step", Paper: kihlPaper + ": Fig. 9 (step response)",
		Sim:  "Kihl PI utilization control, M/M/1 at 100 req/s, step response from empty over 60 s (paper Fig. 9)",
		Live: "PI control of a pinned CPU-bound backend's utilization to 0.8 through the proxy's token bucket, from an idle server, with the good integral time and the bad Ti = 0.1 s."},
	{Name: "kihl-distribution", Paper: kihlPaper + ": Fig. 8 (distribution of the utilization)",
		Sim:  "Kihl PI utilization control over 1000 s: distribution function of per-period utilization (paper Fig. 8)",
		Live: "The same loop run for longer: the empirical distribution function of the per-period utilization of the pinned backend, good vs bad integral time."},
	{Name: "yaksha-load-sweep", Paper: yakshaPaper + ": Figs. 7–8 (throughput and mean response time vs offered load)",
		Sim:  "Yaksha self-tuning PI on mean response time, PS server, load 0.5×–5× capacity, controlled vs uncontrolled (paper Figs. 7–8)",
		Live: "Poisson load from 0.5× to 5× the capacity of a processor-sharing server, through the proxy's self-tuning Yaksha stage (Tref) and through the proxy without control."},
	{Name: "yaksha-workload-shift", Paper: yakshaPaper + ": Figs. 10–16 (workload shift; self-tuning vs static controllers)",
		Sim:  "Yaksha under three waves of closed-loop users with shifting request mix: self-tuning vs static PI (paper Figs. 10–16)",
		Live: "Three waves of closed-loop users with shifting request mixes on a processor-sharing server, through the proxy's Yaksha stage: self-tuning vs static PI designed for the first wave vs for 3× its load."},
	{Name: "seda-spike", Paper: sedaPaper + ": Fig. 10 (massive load spike) and Fig. 7 (controller trace)",
		Sim:  "SEDA AIMD on p90 under a flash crowd of 3 → 1000 users, with and without admission control (paper Figs. 7, 10)",
		Live: "A flash crowd of 3 → 1000 closed-loop users on one FIFO server, through the proxy with SEDA's AIMD on the p90 and without admission control."},
	{Name: "seda-classes", Paper: sedaPaper + ": Figs. 14–15 (multiclass service differentiation)",
		Sim:  "SEDA multiclass AIMD: 128 low + 128 high-priority users (high active 100–200 s), with vs without differentiation (paper Figs. 14–15)",
		Live: "128 low-priority users plus 128 high-priority users who join and leave, through the proxy's SEDA stage with and without per-class differentiation."},
	{Name: "seda-degradation", Paper: sedaPaper + ": Figs. 12–13 (service degradation, alone and with admission control)",
		Sim:  "SEDA service degradation under a 3 → 1000 user spike: none vs degradation vs degradation + admission (paper Figs. 12–13)",
		Live: "A 3 → 1000 user spike on a server whose work scales with the quality the proxy asks for: no control, degradation alone, degradation + admission control."},
	{Name: "voigt-sweep", Paper: voigtPaper + ": Fig. 4, Table 1, Fig. 6",
		Sim:  "Voigt & Gunningberg dual admission control: throughput and mean RT vs offered rate 100–1000 req/s, onset of SYN policing vs dynamic fraction (Fig. 4, Table 1, Fig. 6)",
		Live: "Dual admission control (CPU rule on /cgi-bin/, connection policer on the listen queue) in front of a pinned CPU-bound backend: throughput and mean RT vs offered rate with and without controls, onset of policing vs dynamic fraction."},
	{Name: "voigt-step", Paper: voigtPaper + ": Fig. 5 (exposure to a very high load)",
		Sim:  "Voigt & Gunningberg under a sudden high load: 300 → 850 → 300 req/s at t = 50 s and 70 s, SYN policing and CGI rates (Fig. 5)",
		Live: "A step of the offered rate 300 → 850 → 300 req/s against the pinned CPU-bound backend, with the dual admission control and without: the policer's rate falls fast and recovers, the CGI rate moves slowly, the response time recovers."},
	{Name: "voigt-bandwidth", Paper: voigtPaper + ": Table 2 (outgoing bandwidth)",
		Sim:  "Voigt & Gunningberg bandwidth rule: a large-file flow saturating the outgoing link beside the SURGE-like workload, with and without controls (Table 2)",
		Live: "A flow of large-file downloads saturating an emulated outgoing link beside the SURGE-like workload, with the bandwidth rule (voigt-queue on the proxy's outgoing socket queues) and without controls."},
	{Name: "lijamin-epochs", Paper: "Li & Jamin, Using measurement-based admission control to provide bandwidth shares: Tables II–IV, Figs. 2–3",
		Sim:  "Li & Jamin per-client bandwidth shares by delay: clients A–D with 10/20/30/40 % of 100 KB/s through the 18 epochs of Table III (Figs. 2–3, Table IV)",
		Live: "Four clients with 10/20/30/40 % of 100 KB/s at the proxy's client shares, each sending 10 KB requests at 6/s while active, through the activity epochs of Table III."},
	{Name: "adaptive", Paper: "sluice's adaptive mode against the hand-tuned peers (nginx limit_req, HAProxy maxconn) and the adaptive limiters (Netflix gradient2, Envoy gradient, kratos BBR), after the field notes",
		Sim:  "every controller through a flash crowd, a capacity halving and doubling, and a parallelism change (told only the objective vs hand-tuned)",
		Live: "Every controller, nginx limit_req and HAProxy maxconn through a flash crowd, a capacity halving and doubling, a parallelism change and a slow backend."},
	{Name: "graph", Paper: "A chain of services under a trigger (Bronson et al., Metastable Failures in Distributed Systems, HotOS 2021): retries, retry budgets (Finagle, Envoy), grpc-go retry throttling and sluice at every hop",
		Sim:  "A client population → tier 1 → tier 2 → a backend at 0.7 × C whose capacity falls to a third for 10 s: naive retries, retry budgets, grpc-go throttling, sluice's proxy at every hop, sluice in-process at every hop",
		Live: "The same chain on real sockets, each tier its own process (sluice-lab testbed tier), the backend a queue testbed process, sluice proxy processes in front of every hop for the proxy row: goodput, amplification, wasted work and recovery per second."},
	{Name: "graph-crowd", Paper: "Priorities under a crowd in the same chain (Netflix, Keeping Netflix Reliable Using Prioritized Load Shedding, 2020: 99.4 % of user-initiated requests during a 12× prefetch spike)",
		Sim:  "The chain with a high and a low class, and a 12× crowd of the low class for 20 s: the high class's success and p99 across both hops, the low class's share",
		Live: "The same crowd on real sockets through the chain's processes, with sluice's proxy at every hop and sluice in-process at every hop."},
	{Name: "graph-recover", Paper: "Back to full service the second a storm ends (what users of Netflix's concurrency-limits and Envoy's adaptive concurrency report missing: limits that do not come back): the same chain after a crowd and after a capacity drop",
		Sim:  "The chain at 0.5 × C through a 3× crowd for 10 s and a capacity drop to a third for 10 s: goodput over offered in every second after each, and which element holds the storm's memory (state.csv)",
		Live: "The same storm on real sockets through the chain's processes (HTTP, or gRPC with --transport grpc): goodput over offered in every second after the crowd and after the capacity drop."},
	{Name: "graph-hotel", Paper: "A gRPC service graph of DeathStarBench's hotelReservation shape under load steps, a capacity drop, a crowd and a costly API: no control, Breakwater (OSDI'20), DAGOR (SoCC'18), Rajomon (NSDI'25) and TopFull (SIGCOMM'24) each tuned, and sluice at every service told only the SLO",
		Sim:  "The hotel graph (frontend → search → geo, rate; frontend → reservation → rate) with CPU-bound services in virtual time: load steps to 1.4×, 3× and 8× C, the shared backend at a third for 10 s, a 12× crowd of low priority, the costly API ×10 and ×50; every row's goodput within the SLO, p99, recovery, late calls and wasted work",
		Live: "The same graph on real sockets, every service its own gRPC process (sluice-lab testbed hotel) burning CPU time per call, loopback only: the same scenarios and rows, the peers with their tuned parameters, sluice with grpcsluice's interceptors at every service."},
	{Name: "tenants", Paper: "sluice's weighted fair queueing among tenants inside auto's queue (Golestani's self-clocked fair queueing, per request)",
		Sim:  "four tenants of equal weight at 3× overload, one sending ten times each other's rate: each light tenant's goodput and p99 with fair queueing and with FIFO",
		Live: "The same four tenants on real sockets, sending their tenant in the hop header through the sluice proxy's auto stage with and without tenants.fair, in front of the queue testbed."},
	{Name: "costly", Paper: "Costly requests: fair queueing by cost (start-time fair queueing charged by service time, as 2DFQ estimates it) and cancellation of the calls that cannot be served in time or that hog the leaf (Atropos, SOSP 2025)",
		Sim:  "Two APIs share a CPU-bound leaf behind an entry hop at 8× its capacity, one 10× (and 50×) costlier per call: each API's goodput in leaf CPU time against its fair share, and the wasted work, with FIFO, fair by request, fair by service time (with and without the hog rule, and with the slot share among tenants) and with cancellation off",
		Live: "The same two APIs on real sockets: open-loop clients through sluice's client side, an entry hop and a leaf behind the sluice middleware (the leaf a processor-sharing CPU emulated in 1 ms slices that stops when its context ends), fair by request, by service time, by service time with the slot share, and by the leaf's CPU time reported back to the entry (tenants.cost: reported); the callers' throttle keeps a window per API (throttle.scope: hop)."},
	{Name: "cluster", Paper: "Li & Jamin, Table IV across three instances; a global static rate, an instance killed, Redis stopped",
		Live: "Three proxy processes share Li & Jamin's shares and a global static rate through Redis: shares under round-robin spread, a 60/30/10 spread, one instance killed, Redis stopped for 10 s."},
	{Name: "peers", Paper: "sluice against nginx limit_req and HAProxy maxconn (the field notes' peer measurements)",
		Live: "A flash crowd at 10× a backend's capacity, whose capacity then halves, against no control, nginx limit_req at the measured capacity, HAProxy maxconn with a queue timeout, and sluice's SEDA and Yaksha."},
}

// All returns every figure, in registry order.
func All() []Spec { return append([]Spec(nil), registry...) }

// Names returns the names of the figures with a driver of mode m, in
// registry order.
func Names(m Mode) []string {
	var out []string
	for _, s := range registry {
		if s.Has(m) {
			out = append(out, s.Name)
		}
	}
	return out
}

// Lookup returns the named figure if it has a driver of mode m; otherwise
// an error listing the names that do.
func Lookup(name string, m Mode) (Spec, error) {
	for _, s := range registry {
		if s.Name == name && s.Has(m) {
			return s, nil
		}
	}
	what := map[Mode]string{Sim: "scenario", Live: "experiment"}[m]
	return Spec{}, fmt.Errorf("unknown %s %q (valid: %s)", what, name, strings.Join(Names(m), ", "))
}

// LoadTag formats an offered load (a multiple of capacity) for metric
// names, the same way in both modes: 0.5 → "0_5x", 3 → "3x".
func LoadTag(l float64) string {
	return strings.ReplaceAll(strconv.FormatFloat(l, 'g', -1, 64), ".", "_") + "x"
}

// Drivers returns, in registry order, what view builds for each figure
// with a driver of mode m (a driver package's Lookup), leaving out names
// view fails on.
func Drivers[T any](m Mode, view func(name string) (T, error)) []T {
	var out []T
	for _, name := range Names(m) {
		if v, err := view(name); err == nil {
			out = append(out, v)
		}
	}
	return out
}

// PctTag formats a fraction for metric names, the same way in both modes:
// 0.2 → "20pct", 0.125 → "12_5pct".
func PctTag(f float64) string {
	return strings.ReplaceAll(strconv.FormatFloat(math.Round(f*1000)/10, 'f', -1, 64), ".", "_") + "pct"
}

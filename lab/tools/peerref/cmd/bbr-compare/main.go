// SPDX-License-Identifier: Apache-2.0

// Command bbr-compare runs sluice's bbr controller and kratos/aegis's own
// BBR limiter (github.com/go-kratos/aegis/ratelimit/bbr, used as a
// library) through the workload of sluice's adaptive experiment, in one
// process on 127.0.0.1, and prints how far apart they are.
//
// The systems, each fresh per run, in front of the queue testbed (4 FIFO
// workers, exponential 10 ms):
//
//	aegis       net/http/httputil.ReverseProxy behind an aegis BBR
//	            middleware with the library's defaults; its CPU gauge
//	            reads this machine's CPU (cgroup v1 cpuacct or gopsutil).
//	aegis-cpu0  the same with WithCPUThreshold(0): the CPU condition
//	            always holds, as in sluice's bbr without a CPU sensor.
//	sluice      the sluice proxy, one stage with controller bbr and its
//	            defaults, least-in-flight balancing (the adaptive
//	            experiment's construction); no CPU sensor is bound.
//
// The phases are the adaptive experiment's: (a) a crowd from 0.5× to 10×
// the measured capacity within 1 s; (b–e) 3× from the end of the warm-up,
// and after 5 s the capacity halves, doubles, the workers go from 4 to
// 16, or one of two backends becomes 3× slower. Goodput is answers within
// 250 ms per second, p50/p99 are over answers, and the reject fraction is
// over the requests offered, all by intended send time from the phase's
// event to the end of the load.
//
//	go run ./cmd/bbr-compare -out bbr-compare.md
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/go-kratos/aegis/ratelimit/bbr"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bbr-compare:", err)
		os.Exit(1)
	}
}

func run() error {
	pl := plan{base: 0.5, crowdX: 10, overloadX: 3}
	out := flag.String("out", "bbr-compare.md", "Markdown file the tables are written to")
	seed := flag.Uint64("seed", 1, "seed of the load and the backends' service times")
	flag.DurationVar(&pl.warm, "warm", 3*time.Second, "time at 0.5× capacity before the overload")
	flag.DurationVar(&pl.crowd, "crowd", 10*time.Second, "length of phase a's crowd")
	flag.DurationVar(&pl.changeAt, "change-at", 5*time.Second, "overload before the backend changes (b–e)")
	flag.DurationVar(&pl.after, "after", 10*time.Second, "time measured after the change (b–e)")
	flag.DurationVar(&pl.capLength, "capacity-for", 2*time.Second, "length of the capacity measurement")
	phaseList := flag.String("phases", "a,b,c,d,e", "phases to run")
	sysList := flag.String("systems", "aegis,aegis-cpu0,sluice", "systems to run, in this order in each phase")
	every := flag.Duration("sample", 250*time.Millisecond, "interval at which each limiter's state is sampled")
	flag.Parse()

	all := []system{
		{"aegis", "aegis bbr, library defaults (its CPU gauge reads this machine)",
			func(_ context.Context, urls []string) (front, error) { return newAegisFront(urls) }},
		{"aegis-cpu0", "aegis bbr, WithCPUThreshold(0): the CPU condition always holds",
			func(_ context.Context, urls []string) (front, error) {
				return newAegisFront(urls, bbr.WithCPUThreshold(0))
			}},
		{"sluice", "sluice proxy, controller bbr with its defaults, no CPU sensor (condition taken as met)",
			func(ctx context.Context, urls []string) (front, error) { return newSluiceFront(ctx, urls) }},
	}
	systems, err := pick(*sysList, all, func(s system) string { return s.name })
	if err != nil {
		return err
	}
	ps, err := pick(*phaseList, phases, func(p phase) string { return p.name })
	if err != nil {
		return err
	}
	if pl.warm <= 0 || pl.crowd <= 0 || pl.changeAt <= 0 || pl.after <= 0 || pl.capLength <= 0 || *every <= 0 {
		return fmt.Errorf("durations must be positive")
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	began := time.Now()
	loadStart := loadAvg()
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	logf("load average at start: %s", loadStart)
	capacity, err := measureCapacity(ctx, *seed, pl.capLength)
	if err != nil {
		return err
	}
	if capacity < 20 {
		return fmt.Errorf("the backend answered only %.1f req/s while its capacity was measured", capacity)
	}
	logf("capacity %.1f req/s (nominal %.0f)", capacity, float64(workers)/service.Seconds())
	rn := &runner{plan: pl, seed: *seed, capacity: capacity, every: *every, logf: logf}
	var results []*result
	for _, p := range ps {
		for _, sys := range systems {
			logf("%s %s", sys.name, p.title)
			r, err := rn.run(ctx, sys, p)
			if err != nil {
				return err
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			results = append(results, r)
		}
	}
	rep := &summary{plan: pl, seed: *seed, capacity: capacity, systems: systems, phases: ps, results: results,
		began: began, wall: time.Since(began), loadStart: loadStart, loadEnd: loadAvg(), every: *every}
	var b strings.Builder
	rep.write(&b)
	fmt.Print(b.String())
	if err := os.WriteFile(*out, []byte(b.String()), 0o644); err != nil {
		return err
	}
	logf("written to %s", *out)
	return nil
}

// pick returns the items named in the comma-separated list, in its order.
func pick[T any](list string, all []T, name func(T) string) ([]T, error) {
	var out []T
	for _, n := range strings.Split(list, ",") {
		n = strings.TrimSpace(n)
		found := false
		for _, x := range all {
			if name(x) == n {
				out, found = append(out, x), true
			}
		}
		if !found {
			var names []string
			for _, x := range all {
				names = append(names, name(x))
			}
			return nil, fmt.Errorf("%q is not one of %s", n, strings.Join(names, ", "))
		}
	}
	return out, nil
}

// summary is the report of a run.
type summary struct {
	plan               plan
	seed               uint64
	capacity           float64
	systems            []system
	phases             []phase
	results            []*result
	began              time.Time
	wall               time.Duration
	loadStart, loadEnd string
	every              time.Duration
}

func (s *summary) find(sys string, p string) *result {
	for _, r := range s.results {
		if r.sys.name == sys && r.phase.name == p {
			return r
		}
	}
	return nil
}

// aegisVersion is the aegis module version this binary was built with.
func aegisVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/go-kratos/aegis" {
				return d.Version
			}
		}
	}
	return "(unknown)"
}

func (s *summary) write(w io.Writer) {
	pl := s.plan
	fmt.Fprintf(w, "## bbr-compare: sluice bbr against aegis %s\n\n", aegisVersion())
	fmt.Fprintf(w, "Run %s, %s %s/%s, %d CPUs, wall %s, seed %d. Load average (1/5/15 min) at start %s, at end %s.\n\n",
		s.began.UTC().Format("2006-01-02 15:04 UTC"), runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(),
		s.wall.Round(time.Second), s.seed, s.loadStart, s.loadEnd)
	fmt.Fprintf(w, "Backend: queue testbed, %d FIFO workers, exponential %v (nominal %.0f req/s), measured capacity **%.1f req/s** (%d closed-loop users, %v). "+
		"Load: open-loop Poisson, %.1f× capacity for %v, then (a) ramp to %g× within 1 s for %v, or (b–e) %g× with the change after %v and %v measured after it. "+
		"Client timeout %v. Window: from the crowd's arrival or the change to the end of the load, by intended send time. "+
		"Goodput = answers within %v per second; p50/p99 over answers; rejected = 503/429 over offered; failed = timeouts and errors over offered.\n\n",
		workers, service, float64(workers)/service.Seconds(), s.capacity, capacityUsers, pl.capLength,
		pl.base, pl.warm, pl.crowdX, pl.crowd, pl.overloadX, pl.changeAt, pl.after, clientTimeout, slo)
	fmt.Fprintf(w, "Systems:\n\n")
	for _, sys := range s.systems {
		fmt.Fprintf(w, "- `%s`: %s\n", sys.name, sys.label)
	}
	fmt.Fprintf(w, "\n| phase | system | goodput (req/s) | p50 (ms) | p99 (ms) | rejected | failed | in-flight bound, mean | share of %v intervals with rejections | aegis CPU gauge ‰: start / mean / max | host CPU busy |\n", s.every)
	fmt.Fprintf(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, p := range s.phases {
		for _, sys := range s.systems {
			r := s.find(sys.name, p.name)
			if r == nil {
				continue
			}
			m := r.metrics()
			gauge := "–"
			if !math.IsNaN(m.cpuMean) {
				gauge = fmt.Sprintf("%.0f / %.0f / %.0f", m.cpuFirst, m.cpuMean, m.cpuMax)
			}
			fmt.Fprintf(w, "| %s | %s | %.1f | %s | %s | %s | %s | %s | %s | %s | %s |\n", p.name, sys.name, m.goodput,
				fmtNum(m.p50, "%.1f"), fmtNum(m.p99, "%.1f"), fmtNum(m.reject, "%.3f"), fmtNum(m.failed, "%.3f"),
				fmtNum(m.limitMean, "%.1f"), fmtNum(m.shedShare, "%.2f"), gauge, fmtNum(r.hostBusy, "%.2f"))
		}
	}
	fmt.Fprintln(w)
	var peers []string
	for _, sys := range s.systems {
		if strings.HasPrefix(sys.name, "aegis") {
			peers = append(peers, sys.name)
		}
	}
	if s.hasSystem("sluice") && len(peers) > 0 {
		fmt.Fprintf(w, "Ratios sluice bbr / aegis bbr (✓ within 10 %%, ✗ beyond):\n\n")
		fmt.Fprintf(w, "| phase | nominal capacity after (req/s) | against | goodput | p50 | p99 | rejected |\n|---|---:|---|---:|---:|---:|---:|\n")
		for _, p := range s.phases {
			sr := s.find("sluice", p.name)
			if sr == nil {
				continue
			}
			sm := sr.metrics()
			for _, peer := range peers {
				pr := s.find(peer, p.name)
				if pr == nil {
					continue
				}
				pm := pr.metrics()
				fmt.Fprintf(w, "| %s | %.0f | %s | %s | %s | %s | %s |\n", p.name, sr.capAfter, peer,
					fmtRatio(sm.goodput, pm.goodput), fmtRatio(sm.p50, pm.p50), fmtRatio(sm.p99, pm.p99), fmtRatio(sm.reject, pm.reject))
			}
		}
		fmt.Fprintln(w)
	}
}

func (s *summary) hasSystem(name string) bool {
	for _, sys := range s.systems {
		if sys.name == name {
			return true
		}
	}
	return false
}

// fmtRatio formats a/b with a mark for |a/b − 1| ≤ 0.1.
func fmtRatio(a, b float64) string {
	r := ratio(a, b)
	switch {
	case math.IsNaN(r) && a == 0 && b == 0:
		return "both 0 ✓"
	case math.IsNaN(r) || math.IsInf(r, 0):
		return fmt.Sprintf("%s vs %s ✗", fmtNum(a, "%.3g"), fmtNum(b, "%.3g"))
	case math.Abs(r-1) <= 0.1:
		return fmt.Sprintf("%.2f ✓", r)
	default:
		return fmt.Sprintf("%.2f ✗", r)
	}
}

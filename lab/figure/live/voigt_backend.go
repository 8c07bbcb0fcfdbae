// SPDX-License-Identifier: Apache-2.0

package live

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/procfs"
	"golang.org/x/sync/errgroup"

	"github.com/sluicehq/sluice/lab/report"
	"github.com/sluicehq/sluice/lab/testbed"
	"github.com/sluicehq/sluice/proxy/overload"
)

// The CPU experiments' backend (voigt-sweep, voigt-step): the CGI
// testbed pinned to its own CPU, its calibration, how it burns a request's
// demand (the Kihl figures' too: cgiWorkNs) and what the reports say of it.

// cpuBackend is the pinned CGI backend of the CPU experiments and how the
// proxy measures its utilization.
type cpuBackend struct {
	plan          cpuPlan
	url           string
	close         func() error
	pid           int
	overhead      time.Duration
	ns            float64
	foreignBusy   float64
	processSensor bool
	util          *overload.UtilizationConfig // the CPU rule's sensor
	static        time.Duration
	dynamic       time.Duration
	staticN       int
	dynamicN      int
	// cpuTimeNs is the CPU time per number of the CPU-time mode (0: the
	// backend counts its numbers).
	cpuTimeNs float64
}

// report records in s how the backend ran: pinned, its CPU sensor, the
// other work on its CPU before the runs, its calibration and its kind of
// work.
func (b *cpuBackend) report(s *report.Summary) {
	s.Set("pinned", b2f(b.plan.pinned))
	s.Set("sensor_process", b2f(b.processSensor))
	s.Set("backend_cpu_foreign_busy", b.foreignBusy)
	s.Set("ns_per_number", b.ns)
	s.Set("http_overhead_ms", msOf(b.overhead))
	s.Set("cgi_work_cpu_time", b2f(b.cpuTimeNs > 0))
}

// reportForeign records the largest share of a run the backend's CPU
// spent on other work (backend_cpu_foreign_during; NaN: not measured).
func reportForeign(s *report.Summary, runs []*cpuRun) {
	s.Set("backend_cpu_foreign_during", maxForeign(runs))
}

// Per-request CPU demands of the CPU experiments: the simulator's
// cpu_kernel + cpu_static (0.3 + 1.4 ms) and cpu_kernel + cpu_dynamic
// (0.3 + 4 ms), burnt by the CGI testbed on the backend's CPU.
const (
	voigtStaticCPU  = 1700 * time.Microsecond
	voigtDynamicCPU = 4300 * time.Microsecond
)

// The CGI backend's kinds of work (Options.CGIWork).
const (
	// CGIWorkCPUTime burns each request's CPU demand as CPU time of the
	// backend's thread (testbed.CGIConfig.CPUNsPerNumber): the demands
	// are the server's, whatever else runs on the machine. On this
	// project's 2-vCPU machines the two vCPUs share one physical core's
	// throughput: a loop of random numbers pinned to one ran at 3.1–3.6
	// ns per number while the other idled and 6.0–6.1 ns while the other
	// ran the same loop (2026-11-27, lab/NOTEBOOK.md), so the proxy
	// and load generator on the other vCPU slowed a counted backend by up
	// to 1.9× as the offered rate rose, and the server's capacity fell
	// with the load (its CPU was 79 % busy at 200 req/s where the demands
	// give 43 %).
	CGIWorkCPUTime = "cpu-time"
	// CGIWorkCount sums the calibrated count of random numbers: the
	// demand holds only while the CPU runs at its calibrated speed.
	CGIWorkCount = "count"
)

// cgiWorkNs is the CGI backend's CPU time per random number in the
// CPU-time mode, ns (calibrated), or 0 to count the numbers:
// Options.CGIWork, where the platform has a thread CPU clock.
func cgiWorkNs(env *Env, ns float64) float64 {
	if env.CGIWork == CGIWorkCount {
		return 0
	}
	if !testbed.CPUTimeSupported {
		env.Phasef("the backend counts its random numbers: no thread CPU clock on this platform, so its CPU demands hold only while the CPU runs at its calibrated speed")
		return 0
	}
	env.Phasef("each request burns its demand as CPU time of the backend's thread (--cgi-work %s), whatever slows the CPU", CGIWorkCPUTime)
	return ns
}

// cgiWorkNote says in the reports' Setup how the backend burns a demand
// (cpuNs from cgiWorkNs).
func cgiWorkNote(cpuNs float64) string {
	if cpuNs > 0 {
		return "each request burns its demand as CPU time of the backend's thread (--cgi-work cpu-time), so the load on the other vCPU, which shares the physical core's throughput, does not change what a request costs"
	}
	return "each request sums its calibrated count of random numbers (--cgi-work count), so its CPU time grows while the other vCPU is busy"
}

// startCPUBackend pins this process off the backend's CPU, calibrates the
// CGI testbed, and starts it with the static and dynamic demands. The
// returned restore gives this process its CPUs back.
func startCPUBackend(ctx context.Context, env *Env) (*cpuBackend, func(), error) {
	b := &cpuBackend{plan: planCPUs(env), static: voigtStaticCPU, dynamic: voigtDynamicCPU}
	restore := func() {}
	if b.plan.pinned {
		r, err := pinProcess(b.plan.ownCPUs)
		if err != nil {
			b.plan = cpuPlan{why: "pinning this process: " + err.Error()}
		} else {
			restore = func() { _ = r() }
			env.Phasef("backend pinned to CPU %d; proxy and load generator on CPU %v", b.plan.backendCPU, b.plan.ownCPUs)
		}
	}
	if !b.plan.pinned {
		env.Phasef("not pinning (%s): the backend runs in process and reports its own utilization", b.plan.why)
	}
	overhead, ns, err := voigtCalibrate(ctx, env, b.plan)
	if err != nil {
		restore()
		return nil, nil, fmt.Errorf("calibrating the backend: %w", err)
	}
	b.overhead, b.ns = overhead, ns
	b.staticN = max(1, int(math.Round(float64(b.static-overhead)/ns)))
	b.dynamicN = max(1, int(math.Round(float64(b.dynamic-overhead)/ns)))
	env.Phasef("backend calibrated: %v per request of HTTP handling, %.2f ns per random number; static %v ≈ %d numbers, dynamic %v ≈ %d",
		overhead, ns, b.static, b.staticN, b.dynamic, b.dynamicN)
	work := []testbed.PathWork{{Prefix: "/cgi-bin/", N: b.dynamicN}, {Prefix: "/", N: b.staticN}}
	b.cpuTimeNs = cgiWorkNs(env, ns)
	b.url, b.close, b.pid, err = startCGI(ctx, env, b.plan, work, b.cpuTimeNs)
	if err != nil {
		restore()
		return nil, nil, err
	}
	b.util = &overload.UtilizationConfig{Source: overload.UtilizationBackendHeader}
	if b.plan.pinned {
		busy, err := idleBusy(b.plan.backendCPU, time.Second)
		if err != nil {
			restore()
			return nil, nil, errors.Join(err, b.close())
		}
		b.foreignBusy = busy
		if busy <= foreignBusyLimit {
			b.util = &overload.UtilizationConfig{Source: overload.UtilizationHost, CPUs: strconv.Itoa(b.plan.backendCPU)}
		} else {
			b.processSensor = true
			b.util = &overload.UtilizationConfig{Source: overload.UtilizationProcess, PID: b.pid, ProcessCPUs: 1}
			env.Phasef("CPU %d was %.0f%% busy with other work while the backend idled: measuring the backend process's CPU time instead", b.plan.backendCPU, 100*busy)
		}
	}
	return b, restore, nil
}

// cpuSeconds returns the function reading the backend process's CPU
// time for the sampler, nil when the backend runs in process.
func (b *cpuBackend) cpuSeconds() func() (float64, error) {
	if b.pid <= 0 {
		return nil
	}
	return func() (float64, error) { return processCPUTime(b.pid) }
}

// processCPUTime returns the CPU time (user + system) of process pid in
// seconds, from /proc/<pid>/stat (clock-tick resolution).
func processCPUTime(pid int) (float64, error) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return 0, err
	}
	st, err := p.Stat()
	if err != nil {
		return 0, err
	}
	return st.CPUTime(), nil
}

// voigtCalibrate measures the CGI testbed's CPU cost as it runs when
// nothing else shares its CPU. A pinned child is measured by its own CPU
// time: calN numbers per request in voigtCalBatches batches of 40, and
// 400 requests of 1 number for the cost of the HTTP handling, each sent
// over voigtCalConns connections at once so that the backend's CPU never
// idles between requests, as under the overload the figures measure. The
// cost per number is the cheapest batch's: other processes on the
// backend's CPU (a build, another agent's tests) make the same work cost
// more CPU time, never less, and a calibration that includes them makes
// the backend burn too few numbers once they are gone. The in-process
// backend falls back to calibrateCGI (wall-clock medians).
//
// On 2026-11-27 at 12:54 (load 6.3, two compilers on the backend's CPU)
// batches of 40 cost 6.25–7.62 ns per number one request at a time and
// 3.88–7.13 four at once, the cheapest 3.88–4.13 in each round of five;
// on a quiet machine all of them cost 3.75–4.25 (12:47). The median of
// five batches in sequence measured 6.31 ns at 11:33 and 11:35: those
// backends burnt 62 % of the numbers the demands ask for and served 710
// req/s under overload where the demands allow about 450, so voigt-step's
// full wait queue drained within the clients' timeout and the
// uncontrolled server did not collapse (lab/NOTEBOOK.md, "voigt-step:
// the controls' throughput against an uncontrolled server that does not
// collapse"). It does not catch every slow phase: at 13:53 the cheapest
// of six batches cost 6.23 ns with nothing else on the backend's CPU, and
// the backend then served up to 713 req/s (summary: ns_per_number).
func voigtCalibrate(ctx context.Context, env *Env, plan cpuPlan) (overhead time.Duration, ns float64, err error) {
	if !plan.pinned {
		return calibrateCGI(ctx, env, plan)
	}
	url, closeBackend, pid, err := startCalibrationCGI(ctx, env, plan)
	if err != nil {
		return 0, 0, err
	}
	defer closeBackend() //nolint:errcheck // calibration backend
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: voigtCalConns}}
	defer client.CloseIdleConnections()
	cpuPer := func(path string, n int) (float64, error) {
		c0, err := processCPUTime(pid)
		if err != nil {
			return 0, err
		}
		var g errgroup.Group
		for k := range voigtCalConns {
			g.Go(func() error {
				for i := k; i < n; i += voigtCalConns {
					if err := getDrain(ctx, client, url+path); err != nil {
						return err
					}
				}
				return nil
			})
		}
		if err := g.Wait(); err != nil {
			return 0, err
		}
		c1, err := processCPUTime(pid)
		if err != nil {
			return 0, err
		}
		return (c1 - c0) / float64(n), nil
	}
	if _, err := cpuPer("/cal0", 50); err != nil { // warm up
		return 0, 0, err
	}
	o, err := cpuPer("/cal0", 400)
	if err != nil {
		return 0, 0, err
	}
	full := math.Inf(1)
	for range voigtCalBatches {
		f, err := cpuPer("/cal", 40)
		if err != nil {
			return 0, 0, err
		}
		full = math.Min(full, f)
	}
	if !(full > o) {
		return 0, 0, fmt.Errorf("calibration: %g s of CPU per request of %d numbers is not above %g s for 1", full, calN, o)
	}
	return time.Duration(o * 1e9), (full - o) * 1e9 / calN, nil
}

// voigtCalBatches is how many batches of 40 requests calibrate the cost
// per random number (the cheapest is taken).
const voigtCalBatches = 6

// voigtCalConns is how many calibration requests are in flight at once:
// enough to keep the pinned backend's CPU busy throughout a batch, as it
// is under the overload the figures measure.
const voigtCalConns = 4

// where describes the backend and the CPU sensor for Setup.
func (b *cpuBackend) where() string {
	if !b.plan.pinned {
		return fmt.Sprintf("Backend: the CGI testbed in this process, not pinned (%s); the CPU rule reads the utilization the backend reports in X-Sluice-Utilization (in-flight estimate). Run the sluice binary on a Linux machine with 2 CPUs to pin it.", b.plan.why)
	}
	s := fmt.Sprintf("Backend: the CGI testbed (`sluice-lab testbed cgi --work \"/cgi-bin/=%d,/=%d\"`) as a child process pinned to CPU %d; the CPU rule's sensor is /proc/stat for CPU %d alone (utilization: {source: host, cpus: \"%d\"}); this process (proxy and load generator) is pinned to CPUs %v.",
		b.dynamicN, b.staticN, b.plan.backendCPU, b.plan.backendCPU, b.plan.backendCPU, b.plan.ownCPUs)
	if b.processSensor {
		s += fmt.Sprintf(" But CPU %d was %.0f%% busy with other work while the backend idled (a shared machine), so the proxy measured the backend process's own CPU time instead (utilization: {source: process, process_cpus: 1}).",
			b.plan.backendCPU, 100*b.foreignBusy)
	}
	return s
}

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

	"github.com/sluicehq/sluice/lab/dist"
	"github.com/sluicehq/sluice/lab/loadgen"
	"github.com/sluicehq/sluice/lab/report"
	"github.com/sluicehq/sluice/lab/testbed"
	"github.com/sluicehq/sluice/policy"
	"github.com/sluicehq/sluice/proxy"
)

// The Voigt & Gunningberg experiments (voigt-sweep, voigt-step,
// voigt-bandwidth) are the paper's dual admission control, live
// (docs/algorithms.md §1): a CPU rule (voigt-cpu) on /cgi-bin/, a
// bandwidth rule (voigt-queue on the outgoing queue) on /islarge/, and the
// connection policer (the paper's TCP SYN policing: a token bucket at
// accept time whose rate a PD controller sets from the backend pool's wait
// queue, the paper's listen queue). This file holds what they share: the
// SURGE-like file set, the proxy configuration, the sampler of the
// proxy's state and the per-window analysis.

// Fixed parameters of the SURGE-like file set (the static testbed's
// generator). The file set is the same in every run, whatever the seed:
// only the request sequence changes. Seed 11 with 2000 files and a 1 MiB
// cap gives 11.6 % of the requests for files over 50 KB and a mean reply
// of 31 KB, close to the simulator's file set.
const (
	voigtFiles    = 2000
	voigtFileSeed = 11
	voigtMaxSize  = 1 << 20
)

// voigtFileSet returns the file set with the given fraction of dynamic
// small-file requests.
func voigtFileSet(dynamic float64) ([]testbed.FileEntry, error) {
	cfg := voigtStaticConfig(dynamic)
	return testbed.GenerateFileSet(cfg)
}

// voigtStaticConfig is the static testbed's configuration of the file set.
func voigtStaticConfig(dynamic float64) testbed.StaticConfig {
	cfg := testbed.DefaultStaticConfig()
	cfg.Files, cfg.Seed, cfg.MaxSize, cfg.DynamicFraction = voigtFiles, voigtFileSeed, voigtMaxSize, dynamic
	return cfg
}

// surgeOf builds the load generator's SURGE-like workload (request types
// small, dynamic and large) from file-set entries.
func surgeOf(entries []testbed.FileEntry) (*loadgen.Surge, error) {
	m := &loadgen.Meta{Kind: "static"}
	for _, e := range entries {
		m.Files = append(m.Files, loadgen.MetaFile{Path: e.Path, Size: e.Size, Weight: e.Weight, Dynamic: e.Dynamic})
	}
	return loadgen.NewSurge(m)
}

// fileMix returns the probabilities that a request is dynamic and large,
// and the mean reply size in bytes.
func fileMix(entries []testbed.FileEntry) (pDynamic, pLarge, meanBytes float64) {
	for _, e := range entries {
		switch {
		case e.Dynamic:
			pDynamic += e.Weight
		case e.Size > testbed.LargeFileSize:
			pLarge += e.Weight
		}
		meanBytes += e.Weight * float64(e.Size)
	}
	return pDynamic, pLarge, meanBytes
}

// voigtTimeout is the clients' timeout of the CPU experiments (the
// simulator's 2 s).
const voigtTimeout = 2 * time.Second

// voigtConnectTimeout is how long the clients of the CPU experiments wait
// for their connection to be established: as the paper's sclient, which
// aborts "requests that do not establish a connection to the server in a
// specified amount of time", a SYN the connection policer dropped in the
// kernel is a refused request (as in the simulator) instead of one served
// a second late after TCP's SYN retransmission. Below TCP's initial 1 s
// retransmission timeout; a connection the server accepts is established
// within a round trip on loopback.
const voigtConnectTimeout = 500 * time.Millisecond

// voigtQueueTimeout bounds the wait in the proxy's queue: the clients'
// timeout, as the simulator's listen queue. The proxy runs with
// backends.ignore_client_abort, so a request whose client gave up keeps
// its server slot until the CGI testbed has finished it, as an Apache
// process stays busy with an abandoned CGI: the pool's max_concurrency
// bounds the work the backend really does, and the excess waits in the
// queue the policer measures.
const voigtQueueTimeout = voigtTimeout

// queueNote explains the wait queue's timeout in Setup.
const queueNote = "The queue's timeout is the clients' 2 s, and the proxy keeps a server slot taken until the backend answers even when the client has given up (backends.ignore_client_abort), as a busy Apache process does: without it the slot was freed on the client's abort while the CGI testbed finished the work, so abandoned work piled up in the backend beyond the pool's limit."

// voigtProxy describes the proxy of one run.
type voigtProxy struct {
	backendURL string
	// workers is the pool's max_concurrency (the paper's Apache workers).
	workers int
	// queueTimeout bounds the wait in the pool's queue (1024 entries).
	queueTimeout time.Duration
	// holdAbandoned keeps a slot taken until the backend answers when
	// the client gave up (backends.ignore_client_abort): for the CGI
	// backend, which finishes its work anyway.
	holdAbandoned bool
	// controlled adds the rules and the policer; otherwise the proxy
	// only forwards.
	controlled bool
	// utilization is the CPU sensor (nil leaves the CPU rule out).
	utilization *proxy.UtilizationConfig
	// cgiInitial is the CPU rule's initial rate (req/s).
	cgiInitial float64
	// bwInitial is the bandwidth rule's initial rate; bwCapacity the
	// unsent bytes that read as a full outgoing queue (100).
	bwInitial  float64
	bwCapacity int64
	// policer includes the connection policer.
	policer bool
	// policerKernel is the policer's policer.kernel (empty: auto).
	policerKernel string
}

// config returns the proxy configuration: the pool of the paper's
// workers with its wait queue (the listen queue), and, when controlled,
// the CPU rule on /cgi-bin/ (with a utilization sensor), the bandwidth
// rule on /islarge/ fed by the outgoing-queue sensor, and the connection
// policer, each with the paper's parameters.
func (v voigtProxy) config() *proxy.Config {
	queueMax := 1024
	cfg := &proxy.Config{
		Listeners:    []proxy.ListenerConfig{{Addr: anyPort}},
		Admin:        proxy.AdminConfig{Addr: anyPort},
		DrainTimeout: time.Second,
		Backends: proxy.BackendsConfig{
			Servers:           []proxy.ServerConfig{{URL: v.backendURL, MaxConcurrency: v.workers}},
			Queue:             proxy.PoolQueueConfig{Max: &queueMax, Timeout: v.queueTimeout},
			Timeouts:          proxy.TimeoutsConfig{ResponseHeader: 120 * time.Second},
			IgnoreClientAbort: v.holdAbandoned,
		},
	}
	if !v.controlled {
		return cfg
	}
	rule := func(name, prefix, controller string, ps params) policy.StageConfig {
		st := mainPolicy(controller, ps).Stages[0]
		st.Name, st.Match, st.Burst = name, policy.MatchConfig{PathPrefix: prefix}, 5
		return st
	}
	if v.utilization != nil {
		cfg.Utilization = *v.utilization
		cfg.Stages = append(cfg.Stages, rule("cgi", "/cgi-bin/", "voigt-cpu",
			params{"util_ref": 90.0, "kp": 0.2, "min_rate": 10.0, "initial_rate": v.cgiInitial}))
		cfg.Resources = append(cfg.Resources, proxy.ResourceConfig{Stage: "cgi", Resource: proxy.ResourceCPU})
	}
	cfg.Stages = append(cfg.Stages, rule("large", "/islarge/", "voigt-queue",
		params{"q_ref": 35.0, "kp": 0.0625, "kd": 0.25, "min_rate": 10.0, "initial_rate": v.bwInitial}))
	cfg.Resources = append(cfg.Resources, proxy.ResourceConfig{Stage: "large", Resource: proxy.ResourceBandwidth,
		Sensor: &proxy.SensorConfig{UtilizationConfig: proxy.UtilizationConfig{Source: proxy.SensorOutQueue},
			CapacityBytes: v.bwCapacity, SamplesPerPeriod: 20}})
	if v.policer {
		kd := 0.25
		pc := &proxy.PolicerConfig{Control: proxy.PolicerControl{QRef: 100, Kp: 0.0625, Kd: &kd, MinRate: 10}}
		pc.Rate, pc.Burst, pc.Kernel = 1000, 20, v.policerKernel
		cfg.Policer = pc
	}
	return cfg
}

// voigtSample is the proxy (and the backend's CPU) sampled during a run.
// Counters are totals since the proxy started; NaN marks a missing value.
type voigtSample struct {
	t                           time.Duration
	polRate                     float64
	polOffered, polRejected     float64
	queue                       float64 // the pool's wait queue (requests)
	cgiRate                     float64
	cgiOffered, cgiRejected     float64
	largeRate                   float64
	largeOffered, largeRejected float64
	outQueue                    float64 // the bandwidth rule's last input (of 100)
	outBytes                    float64 // the outqueue sensor's mean unsent bytes
	cpu                         float64 // busy fraction of the backend's CPU since the previous sample
	link                        float64 // bytes through the emulated link so far (NaN without one)
}

// sampleProxy samples the proxy's state, the backend's CPU busy fraction
// when cpuSeconds (its cumulative CPU time) is not nil, and linkBytes when
// not nil, every period until stop is called; stop returns the samples.
// Times are offsets from the call.
func sampleProxy(px *liveProxy, cpuSeconds func() (float64, error), linkBytes func() float64, every time.Duration) (stop func() []voigtSample) {
	base := time.Now()
	lastCPU, lastAt := math.NaN(), base
	if cpuSeconds != nil {
		if c, err := cpuSeconds(); err == nil {
			lastCPU = c
		}
	}
	var out []voigtSample
	halt := sampleState(px, every, func(t time.Duration, doc proxy.StateDoc) {
		now := base.Add(t)
		s := voigtStateOf(doc)
		s.t = t
		if linkBytes != nil {
			s.link = linkBytes()
		}
		if cpuSeconds != nil {
			if c, err := cpuSeconds(); err == nil {
				s.cpu = (c - lastCPU) / now.Sub(lastAt).Seconds()
				lastCPU, lastAt = c, now
			}
		}
		out = append(out, s)
	})
	return func() []voigtSample {
		halt()
		return out
	}
}

// voigtStateOf extracts a voigtSample (without time and CPU) from the
// proxy's state.
func voigtStateOf(doc proxy.StateDoc) voigtSample {
	nan := math.NaN()
	s := voigtSample{polRate: nan, polOffered: nan, polRejected: nan, cgiRate: nan, cgiOffered: nan, cgiRejected: nan,
		largeRate: nan, largeOffered: nan, largeRejected: nan, outQueue: nan, outBytes: nan, cpu: nan, link: nan,
		queue: float64(doc.Backends.Queue.Length)}
	if p := doc.Policer; p != nil {
		s.polRate, s.polOffered, s.polRejected = p.Rate, float64(p.Offered), float64(p.RejectedRate+p.RejectedSource+p.RejectedKernel)
	}
	for _, r := range doc.Resources {
		switch r.Stage {
		case "cgi":
			s.cgiRate, s.cgiOffered, s.cgiRejected = r.Rate, float64(r.Offered), float64(r.Rejected)
		case "large":
			s.largeRate, s.largeOffered, s.largeRejected = r.Rate, float64(r.Offered), float64(r.Rejected)
			if r.Input != nil {
				s.outQueue = *r.Input
			}
		}
	}
	for _, sn := range doc.Sensors {
		if sn.Source == "outqueue" && sn.Bytes != nil {
			s.outBytes = *sn.Bytes
		}
	}
	return s
}

// sampleAt returns the last sample at or before t, or the first sample
// when t precedes every sample; ok is false without samples.
func sampleAt(ss []voigtSample, t time.Duration) (voigtSample, bool) {
	if len(ss) == 0 {
		return voigtSample{}, false
	}
	best := ss[0]
	for _, s := range ss {
		if s.t > t {
			break
		}
		best = s
	}
	return best, true
}

// valueAt returns f of the last sample at or before t (NaN without one).
func valueAt(ss []voigtSample, t time.Duration, f func(s *voigtSample) float64) float64 {
	s, ok := sampleAt(ss, t)
	if !ok {
		return math.NaN()
	}
	return f(&s)
}

// delta returns the change of a counter between the samples at from and
// to (NaN without samples or counter).
func delta(ss []voigtSample, from, to time.Duration, f func(s *voigtSample) float64) float64 {
	a, ok1 := sampleAt(ss, from)
	b, ok2 := sampleAt(ss, to)
	if !ok1 || !ok2 {
		return math.NaN()
	}
	return f(&b) - f(&a)
}

// meanOver averages f over the samples in (from, to], skipping NaN.
func meanOver(ss []voigtSample, from, to time.Duration, f func(s *voigtSample) float64) float64 {
	sum, n := 0.0, 0
	for i := range ss {
		if ss[i].t <= from || ss[i].t > to {
			continue
		}
		if v := f(&ss[i]); !math.IsNaN(v) {
			sum += v
			n++
		}
	}
	return ratio(sum, float64(n))
}

// voigtWindow is one flow (load group, or a subset of its requests) in a
// window of intended send times; replied counts its OK replies completed
// in the window instead.
type voigtWindow struct {
	secs                                    float64
	offered, ok, rejected, timeouts, errors int
	rtSum                                   float64 // ms, of OK replies
	replied                                 int
}

// windowOf aggregates the records intended in [from, to) that k keeps.
func windowOf(recs []record, from, to time.Duration, k keep) voigtWindow {
	w := voigtWindow{secs: (to - from).Seconds()}
	for i := range recs {
		r := &recs[i]
		if r.out == outAborted || !k.ok(r) {
			continue
		}
		if r.out == outOK && r.done >= from && r.done < to {
			w.replied++
		}
		if r.intended < from || r.intended >= to {
			continue
		}
		w.offered++
		switch r.out {
		case outOK:
			w.ok++
			w.rtSum += msOf(r.lat)
		case outRejected:
			w.rejected++
		case outTimeout:
			w.timeouts++
		default:
			w.errors++
		}
	}
	return w
}

// throughput is the rate of OK replies (within the timeout) to the
// requests sent in the window, in req/s.
func (w voigtWindow) throughput() float64 { return ratio(float64(w.ok), w.secs) }

// replyRate is the rate of OK replies completed in the window, in req/s:
// what the server delivers, as the simulator counts it. It equals
// throughput in a steady state; while a queue builds, throughput counts
// replies the server delivers only after the window and can exceed its
// capacity.
func (w voigtWindow) replyRate() float64 { return ratio(float64(w.replied), w.secs) }

// meanRT is the mean response time of the OK replies in ms.
func (w voigtWindow) meanRT() float64 { return ratio(w.rtSum, float64(w.ok)) }

// notType keeps the records whose type is not typ.
func notType(typ string, k keep) keep {
	return func(r *record) bool { return r.typ != typ && k.ok(r) }
}

// ofType keeps the records of type typ.
func ofType(typ string, k keep) keep {
	return func(r *record) bool { return r.typ == typ && k.ok(r) }
}

// staircase is a piecewise-constant rate schedule: rate i from
// starts[i] on.
type staircase struct {
	rates  []float64
	starts []time.Duration
	end    time.Duration
}

// newStaircase holds rates[i] for holds[i], or for the last hold given
// when holds is shorter than rates.
func newStaircase(rates []float64, holds ...time.Duration) staircase {
	s := staircase{rates: rates}
	t := time.Duration(0)
	for i := range rates {
		s.starts = append(s.starts, t)
		if len(holds) > 0 {
			t += holds[min(i, len(holds)-1)]
		}
	}
	s.end = t
	return s
}

// window returns the second half of step i: the part measured, once the
// controllers have had the first half to react to the new rate.
func (s staircase) window(i int) (from, to time.Duration) {
	to = s.end
	if i+1 < len(s.starts) {
		to = s.starts[i+1]
	}
	return s.starts[i] + (to-s.starts[i])/2, to
}

// schedule returns the rate schedule.
func (s staircase) schedule() (dist.Schedule, error) {
	segs := make([]dist.Segment, len(s.rates))
	for i, r := range s.rates {
		segs[i] = dist.Segment{Start: s.starts[i], Rate: r}
	}
	return dist.NewSchedule(segs...)
}

// onsetRate returns the offered rate of the first window (of width
// `width`, from `from` to `to`) in which the policer rejected at least
// threshold of the connections it saw, and the time that window ended;
// NaN when it never did.
func onsetRate(ss []voigtSample, rate func(t time.Duration) float64, from, to, width time.Duration, threshold float64) (float64, time.Duration) {
	for t := from; t+width <= to; t += width {
		off := delta(ss, t, t+width, func(s *voigtSample) float64 { return s.polOffered })
		rej := delta(ss, t, t+width, func(s *voigtSample) float64 { return s.polRejected })
		if off > 0 && rej/off >= threshold {
			return rate(t + width/2), t + width
		}
	}
	return math.NaN(), 0
}

// queueOnset returns the offered rate when the pool's wait queue first
// exceeded qRef (the policer's reference: from then on its PD lowers the
// policing rate), and when; NaN when it never did.
func queueOnset(ss []voigtSample, rate func(t time.Duration) float64, qRef float64) (float64, time.Duration) {
	for _, s := range ss {
		if s.queue > qRef {
			return rate(s.t), s.t
		}
	}
	return math.NaN(), 0
}

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
	util          *proxy.UtilizationConfig // the CPU rule's sensor
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
	// ran the same loop (2026-11-27, docs/experiments.md), so the proxy
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
	b.util = &proxy.UtilizationConfig{Source: proxy.UtilizationBackendHeader}
	if b.plan.pinned {
		busy, err := idleBusy(b.plan.backendCPU, time.Second)
		if err != nil {
			restore()
			return nil, nil, errors.Join(err, b.close())
		}
		b.foreignBusy = busy
		if busy <= foreignBusyLimit {
			b.util = &proxy.UtilizationConfig{Source: proxy.UtilizationHost, CPUs: strconv.Itoa(b.plan.backendCPU)}
		} else {
			b.processSensor = true
			b.util = &proxy.UtilizationConfig{Source: proxy.UtilizationProcess, PID: b.pid, ProcessCPUs: 1}
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
// uncontrolled server did not collapse (docs/experiments.md, "voigt-step:
// the controls' throughput against an uncontrolled server that does not
// collapse"). It does not catch every slow phase: at 13:53 the cheapest
// of six batches cost 6.23 ns with nothing else on the backend's CPU, and
// the backend then served up to 713 req/s (summary: ns_per_number).
func voigtCalibrate(ctx context.Context, env *Env, plan cpuPlan) (overhead time.Duration, ns float64, err error) {
	if !plan.pinned {
		return calibrateCGI(ctx, env, plan)
	}
	const calN = 2000000
	work := []testbed.PathWork{{Prefix: "/cal0", N: 1}, {Prefix: "/cal", N: calN}}
	url, closeBackend, pid, err := startCGI(ctx, env, plan, work, 0)
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

// cpuRun is one run of the CPU experiments: a fresh proxy in front of the
// shared backend, the SURGE-like load, and the samples.
type cpuRun struct {
	name       string
	controlled bool
	dynamic    float64
	rate       dist.Schedule
	poisson    bool            // Poisson arrivals (first), else constant
	switches   []time.Duration // switch to the other arrival process and back at these offsets
	length     time.Duration
	seed       uint64

	recs    []record
	samples []voigtSample
	// foreign is the backend CPU's busy fraction less the backend's own
	// CPU time over the run (foreignMeter; NaN: not measured): other
	// processes, and the hypervisor's steal, which the host sensor of the
	// CPU rule counts as busy.
	foreign float64
}

// maxForeign is the largest foreign fraction of the runs (NaN if none
// was measured).
func maxForeign(runs []*cpuRun) float64 {
	out := math.NaN()
	for _, r := range runs {
		if !math.IsNaN(r.foreign) && !(r.foreign <= out) {
			out = r.foreign
		}
	}
	return out
}

// run executes the run against b.
func (r *cpuRun) run(ctx context.Context, env *Env, b *cpuBackend) error {
	entries, err := voigtFileSet(r.dynamic)
	if err != nil {
		return err
	}
	wl, err := surgeOf(entries)
	if err != nil {
		return err
	}
	first, second := dist.Arrivals(dist.Constant{Rate: r.rate}), dist.Arrivals(dist.Poisson{Rate: r.rate})
	if r.poisson {
		first, second = second, first
	}
	arr := first
	if len(r.switches) > 0 {
		a, err := dist.NewAlternate(first, second, r.switches...)
		if err != nil {
			return fmt.Errorf("%s: %w", r.name, err)
		}
		arr = a
	}
	vp := voigtProxy{backendURL: b.url, workers: voigtWorkers, queueTimeout: voigtQueueTimeout, holdAbandoned: true, controlled: r.controlled,
		utilization: b.util, cgiInitial: 10, bwInitial: 100, bwCapacity: 1 << 20, policer: true,
		policerKernel: env.PolicerKernel}
	px, err := startProxy(ctx, vp.config())
	if err != nil {
		return fmt.Errorf("%s: %w", r.name, err)
	}
	ph := phase{name: r.name, length: r.length, target: px.URL, grace: 500 * time.Millisecond,
		loads: []loadgen.Config{{Mode: loadgen.ModeOpen, Duration: r.length, Seed: r.seed, Timeout: voigtTimeout, ConnectTimeout: voigtConnectTimeout,
			Workload: wl, Arrivals: arr, DisableKeepAlives: true, MaxInflight: voigtMaxInflight, MaxConns: voigtMaxInflight}}}
	stop := sampleProxy(px, b.cpuSeconds(), nil, voigtSampleEvery)
	foreign := foreignMeter(b.plan, b.pid)
	res, runErr := ph.run(ctx, env)
	r.samples, r.foreign = stop(), foreign()
	if r.foreign > foreignBusyLimit {
		env.Phasef("%s: CPU %d was %.0f%% busy with other work than the backend's (other processes, or the hypervisor's steal, which the CPU rule's host sensor counts as busy)", r.name, b.plan.backendCPU, 100*r.foreign)
	}
	if err := errors.Join(runErr, px.Close()); err != nil {
		return err
	}
	r.recs = res.recs
	return nil
}

// poissonAt reports whether the run's arrivals at offset t are Poisson.
func (r *cpuRun) poissonAt(t time.Duration) bool {
	n := 0
	for _, s := range r.switches {
		if s <= t {
			n++
		}
	}
	return r.poisson != (n%2 == 1)
}

// Pool and generator sizes of the CPU experiments.
const (
	// voigtWorkers is the pool's max_concurrency: requests the backend
	// holds at once (the paper's Apache had 150 workers; fewer keep the
	// backend's processor-sharing response time short).
	voigtWorkers = 32
	// voigtMaxInflight bounds the generator's requests in flight, each on
	// its own connection (sclient-like).
	voigtMaxInflight = 4000
	// voigtSampleEvery is the sampling period of the proxy's state.
	voigtSampleEvery = 250 * time.Millisecond
)

// policerKernelNote says in Setup where the connection policer enforced
// its rate (sluice-lab experiment --policer-kernel).
func policerKernelNote(env *Env) string {
	k := env.PolicerKernel
	if k == "" {
		k = proxy.PolicerKernelAuto
	}
	return fmt.Sprintf("Connection policer: policer.kernel %s (auto and on drop excess SYNs in the kernel, nftables, when the process may; off resets them at accept in user space).", k)
}

// fmtRate formats a rate for metric names: 300 → "300".
func fmtRate(r float64) string { return strconv.FormatFloat(r, 'f', -1, 64) }

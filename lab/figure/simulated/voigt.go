// SPDX-License-Identifier: Apache-2.0

package simulated

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/lab/dist"
	"github.com/sluicehq/sluice/lab/figure"
	"github.com/sluicehq/sluice/lab/sim"
	"github.com/sluicehq/sluice/policer"
	"github.com/sluicehq/sluice/stage"
)

// This file holds the model shared by the voigt-* scenarios: Voigt &
// Gunningberg's web server (docs/algorithms.md §1) with its SURGE-like
// workload, and the dual admission control architecture built from the
// proxy's own objects: its connection policer (policer.Policer with its
// control.VoigtQueue on the listen queue) and two of its stages
// (stage.Stage, each with its controller, control.VoigtQueue or
// control.VoigtCPU, its token bucket and its sensor):
//
//	clients ─▶ connection policer ─▶ kernel ─▶ resource rules ─▶ listen queue ─▶ worker: CPU ─▶ link
//	           (TCP SYN policing,     (CPU)    (/cgi-bin: CPU;   (FIFO, 1024,    (PS)        (PS over
//	            bucket 20, PD on the            /islarge: link;   150 workers,               bytes)
//	            listen queue)                   bucket 5)         client timeout)
//
// The rules sit before the listen queue, as in the paper (khttpd parses
// the header in the kernel and only compliant requests are queued for
// Apache). Every connection the policer lets through costs kernel CPU
// (handshake, parsing, rule), also when a rule then resets it; a discarded
// SYN costs almost nothing. A worker holds its request from accept until
// the reply is sent. The uncontrolled server has no policer and no rules.
//
// Clients abort a request after the timeout: a request still in the listen
// queue leaves it (sim.FIFO's Timeout); a request whose CPU work ends after
// the timeout is not sent (the server's write meets the closed connection,
// so its CPU work is wasted); a reply whose transfer ends after the timeout
// arrives too late and is not goodput. A transfer in progress is not
// interrupted (the link model cannot remove a job), so late replies still
// use the link: a pessimistic simplification for the uncontrolled server.

// Request types of the SURGE-like workload.
const (
	voigtStatic = iota
	voigtDynamic
	voigtLarge
)

// voigtModel holds the modelling parameters of the server, the workload
// and the controllers; every choice is a scenario parameter.
type voigtModel struct {
	workers     int
	listenQueue int
	cpus        float64
	linkMbit    float64
	cpuKernel   time.Duration
	cpuSYN      time.Duration
	cpuStatic   time.Duration
	cpuDynamic  time.Duration
	cpuDist     string
	timeout     time.Duration

	files      int
	zipf       float64
	fileSeed   int
	bodyMeanKB float64
	bodySigma  float64
	tailFrac   float64
	tailMinKB  float64
	tailMaxKB  float64
	tailAlpha  float64
	largeKB    float64

	period         time.Duration
	policerBurst   int
	ruleBurst      int
	policerInitial float64
	cgiInitial     float64
	bwInitial      float64
	queueKB        float64
	queueSamples   int
}

// declareVoigtModel declares the model's parameters with their defaults.
func declareVoigtModel(ps *Params, m *voigtModel) {
	ps.Int(&m.workers, "workers", 150, 1, 100000, "server worker processes, each holding a request from accept until its reply is sent (paper: Apache 1.3 default, 150)")
	ps.Int(&m.listenQueue, "listen_queue", 1024, 1, 10000000, "listen queue capacity; a connection arriving to a full queue is dropped (paper: extended from 128 to 1024)")
	ps.Float(&m.cpus, "cpus", 1, 0.01, 1024, "CPU capacity in cores, processor-shared (paper: one 600 MHz Athlon)")
	ps.Float(&m.linkMbit, "link_mbit", 100, 0.001, 1e6, "outgoing link capacity in Mbit/s, processor-shared by the replies in transfer (paper: 100 Mb/s Ethernet)")
	ps.Duration(&m.cpuKernel, "cpu_kernel", 300*time.Microsecond, 0, time.Hour,
		"CPU demand in the kernel of every connection the SYN policer lets through: the TCP handshake, khttpd's header parsing "+
			"and the filter rules, paid also by requests a rule then resets. Kernel work is served before the workers' (it is "+
			"an open stream of work on the processor-shared CPU while the workers are a closed pool), so under overload it "+
			"crowds the server out (receive livelock): the cost the paper's early discard avoids")
	ps.Duration(&m.cpuSYN, "cpu_syn", 20*time.Microsecond, 0, time.Hour, "CPU demand of a SYN the policer discards (early discard: almost free)")
	ps.Duration(&m.cpuStatic, "cpu_static", 1400*time.Microsecond, 0, time.Hour,
		"mean CPU demand in the worker of a static request (small or large file). With cpu_kernel the server handles about "+
			"590 static req/s, the scale of the paper's Table 1 (SYN policing from 610 req/s with static files only), and runs "+
			"at 66 % CPU at 300 req/s with 20 % dynamic requests (paper: 70–80 %)")
	ps.Duration(&m.cpuDynamic, "cpu_dynamic", 4*time.Millisecond, 0, time.Hour,
		"mean CPU demand in the worker of a dynamic request (a CGI script writing random bytes). With 20 % dynamic requests "+
			"the uncontrolled server saturates near 450 req/s (paper: about 375). It must stay below "+
			"10 ms × cpu_static/(cpu_kernel + cpu_static), here 8.2 ms: the CPU rule's minimum of 10 CGI/s must cost less "+
			"than the static work that 10 % more dynamic requests remove, or policing would not set in later with more of them")
	ps.Choice(&m.cpuDist, "cpu_dist", "exp", serviceKinds, "distribution of the CPU demands around their means")
	ps.Duration(&m.timeout, "timeout", 2*time.Second, 0, time.Hour,
		"client timeout: a request not answered within it is aborted (sclient's timeout; not given in the paper). "+
			"It also bounds the listen-queue wait. 0 disables")
	ps.Int(&m.files, "files", 5000, 1, 10000000, "number of files on the server")
	ps.Float(&m.zipf, "zipf", 1, 0, 10, "Zipf exponent of file popularity: the file of rank k is requested with weight 1/k^zipf (SURGE, Zipf's law: 1)")
	ps.Int(&m.fileSeed, "file_set_seed", 1, 0, math.MaxInt32,
		"seed of the file set (sizes and popularity ranks). Fixed across run seeds: the server's files are the same in every "+
			"run, only the request sequence changes")
	ps.Float(&m.bodyMeanKB, "size_body_kb", 5, 0.001, 1e6, "mean size in KB of the log-normal body of the file-size distribution")
	ps.Float(&m.bodySigma, "size_body_sigma", 1, 0, 10, "σ of the log-normal body (SURGE: 1.318; 1 keeps the mean reply near 9 KB on 100 Mb/s)")
	ps.Float(&m.tailFrac, "size_tail_fraction", 0.05, 0, 1, "fraction of files drawn from the heavy (bounded Pareto) tail")
	ps.Float(&m.tailMinKB, "size_tail_min_kb", 30, 0.001, 1e9, "lower bound of the Pareto tail in KB")
	ps.Float(&m.tailMaxKB, "size_tail_max_kb", 1000, 0.001, 1e9, "upper bound of the Pareto tail in KB")
	ps.Float(&m.tailAlpha, "size_tail_alpha", 1.2, 0.01, 10, "shape α of the Pareto tail (SURGE: 1.1)")
	ps.Float(&m.largeKB, "large_kb", 50, 0, 1e9, "files larger than this (KB) are under /islarge/ and pass the bandwidth rule (paper: 50 KB)")
	ps.Duration(&m.period, "period", time.Second, time.Millisecond, time.Hour, "control period of the three controllers (paper: 1 s)")
	ps.Int(&m.policerBurst, "policer_burst", 20, 1, 1000000, "token-bucket size of the connection policer (paper: 20)")
	ps.Int(&m.ruleBurst, "rule_burst", 5, 1, 1000000, "token-bucket size of the resource rules (paper: 5)")
	ps.Float(&m.policerInitial, "policer_initial_rate", 1000, 10, 1e6, "initial rate of the connection policer in req/s (paper: 1000)")
	ps.Float(&m.cgiInitial, "cgi_initial_rate", 10, 10, 1e6,
		"initial rate of the CPU rule for dynamic requests in req/s (not given in the paper). Its minimum, 10: the rule then "+
			"climbs while its hits use ≥ 90 % of it, and at 300 req/s stops near 70/s, as in the paper's Fig. 5 (74–77)")
	ps.Float(&m.bwInitial, "bw_initial_rate", 100, 10, 1e6, "initial rate of the bandwidth rule for /islarge/ in req/s (not given in the paper)")
	ps.Float(&m.queueKB, "queue_kb", 1000, 0.001, 1e9,
		"the bandwidth rule's queue: the bytes still to send on the link (the replies in transfer), normalised to 100 at this "+
			"many KB and capped at 100, like the paper's interface queue of 100 packets. A processor-sharing link has no packet "+
			"queue; q_ref 35 then means about 350 KB unsent, which keeps the link 97 % busy with the large-file flow")
	ps.Int(&m.queueSamples, "queue_samples", 20, 1, 100000, "samples of the outgoing queue per control period, averaged (paper: sampled often, averaged every second)")
}

// voigtStart checks that the measurement window starts within the run,
// draws the file set and starts the result.
func voigtStart(env Env, m voigtModel, warmup, duration time.Duration) (*voigtFiles, *figure.Result, error) {
	if warmup >= duration {
		return nil, nil, paramErrorf("warmup %v must be shorter than duration %v", warmup, duration)
	}
	files, err := newVoigtFiles(m)
	if err != nil {
		return nil, nil, err
	}
	return files, newResult(env), nil
}

// voigtFiles is the server's file set: sizes in bytes by popularity rank
// and the Zipf request probabilities.
type voigtFiles struct {
	sizes []float64
	prob  []float64
}

// newVoigtFiles draws the file set from its own seed.
func newVoigtFiles(m voigtModel) (*voigtFiles, error) {
	if m.tailMinKB >= m.tailMaxKB {
		return nil, paramErrorf("size_tail_min_kb %g must be below size_tail_max_kb %g", m.tailMinKB, m.tailMaxKB)
	}
	body, err := dist.NewLogNormal(m.bodyMeanKB*1e3, m.bodySigma)
	if err != nil {
		return nil, err
	}
	tail, err := dist.NewBoundedPareto(m.tailMinKB*1e3, m.tailMaxKB*1e3, m.tailAlpha)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(uint64(m.fileSeed), 0x5375726765)) // "Surge"
	f := &voigtFiles{sizes: make([]float64, m.files), prob: make([]float64, m.files)}
	sum := 0.0
	for k := range m.files {
		if rng.Float64() < m.tailFrac {
			f.sizes[k] = math.Round(tail.Sample(rng))
		} else {
			f.sizes[k] = math.Max(1, math.Round(body.Sample(rng)))
		}
		f.prob[k] = math.Pow(float64(k+1), -m.zipf)
		sum += f.prob[k]
	}
	for k := range f.prob {
		f.prob[k] /= sum
	}
	return f, nil
}

// class returns the size distribution of the requests for files with
// large == (size > limit), and the probability that a request is for one.
func (f *voigtFiles) class(limit float64, large bool) (*fileSizes, float64) {
	d := &fileSizes{}
	p := 0.0
	for k, s := range f.sizes {
		if (s > limit) == large {
			p += f.prob[k]
			d.sizes = append(d.sizes, s)
			d.cum = append(d.cum, p)
		}
	}
	for k := range d.cum {
		d.cum[k] /= p
	}
	return d, p
}

// meanSize returns the mean reply size of a request in bytes.
func (f *voigtFiles) meanSize() float64 {
	m := 0.0
	for k, s := range f.sizes {
		m += f.prob[k] * s
	}
	return m
}

// fileSizes draws the size of a requested file: a file by its popularity
// within a class of files, then its size. It implements dist.Dist for the
// simulator's request types; its String is descriptive only (it has no
// text syntax).
type fileSizes struct {
	sizes []float64
	cum   []float64
}

// Sample draws a file by its popularity and returns its size in bytes.
func (d *fileSizes) Sample(r *rand.Rand) float64 {
	if len(d.sizes) == 0 {
		return 0
	}
	u := r.Float64()
	k, _ := slices.BinarySearch(d.cum, u)
	return d.sizes[min(k, len(d.sizes)-1)]
}

// Mean returns the popularity-weighted mean size in bytes.
func (d *fileSizes) Mean() float64 {
	m, prev := 0.0, 0.0
	for k, s := range d.sizes {
		m += (d.cum[k] - prev) * s
		prev = d.cum[k]
	}
	return m
}

// String names the distribution and its number of files.
func (d *fileSizes) String() string { return fmt.Sprintf("zipf-files:%d", len(d.sizes)) }

// voigtFlow is one open source of requests.
type voigtFlow struct {
	name     string
	rate     dist.Schedule
	arrivals string // constant or poisson
	types    []sim.RequestType
	mix      []float64
}

// surgeFlow returns the SURGE-like flow at the given rate schedule with
// the given fraction of dynamic small-file requests.
func surgeFlow(m voigtModel, files *voigtFiles, rate dist.Schedule, arrivals string, dynamic float64) (voigtFlow, error) {
	small, pSmall := files.class(m.largeKB*1e3, false)
	large, pLarge := files.class(m.largeKB*1e3, true)
	cs, err := serviceDist(m.cpuDist, m.cpuStatic.Seconds())
	if err != nil {
		return voigtFlow{}, err
	}
	cd, err := serviceDist(m.cpuDist, m.cpuDynamic.Seconds())
	if err != nil {
		return voigtFlow{}, err
	}
	return voigtFlow{name: "surge", rate: rate, arrivals: arrivals,
		types: []sim.RequestType{
			voigtStatic:  {Name: "static", Demand: cs, Size: small},
			voigtDynamic: {Name: "dynamic", Demand: cd, Size: small},
			voigtLarge:   {Name: "large", Demand: cs, Size: large},
		},
		mix: []float64{pSmall * (1 - dynamic), pSmall * dynamic, pLarge}}, nil
}

// voigtBin counts one flow's requests in one second: offered by send
// time, outcomes by finish time.
type voigtBin struct {
	offered, good, late, timedOut, rejected int
	rtSum                                   float64 // of good replies, s
	bytes                                   float64 // of good replies
	smallGood                               int     // good replies of small files (not /islarge/)
	smallRTSum                              float64 // their response times, s
}

// voigtRun is one simulated run.
type voigtRun struct {
	m          voigtModel
	controlled bool
	duration   time.Duration
	policer    *policing
	cgi        *staged
	bw         *staged
	monCPU     *gauges      // per second: CPU utilization, listen queue at the second's end
	monLink    *gauges      // per second: link utilization, mean normalised outgoing queue
	bins       [][]voigtBin // [flow][second]
	rts        [][]float64  // [flow] good response times, s (with finish times in at)
	at         [][]time.Duration
}

// policed marks a request the connection policer let through (Request.Data).
type policed struct{}

// voigtSim builds and runs the server with the given flows for duration.
// The connection policer is the proxy's (policer.Policer with its
// controller), driven by sim.Policer; the two resource rules are each the
// proxy's stage (stage.Stage) with its controller, token bucket and
// sensor, driven by sim.Stage. Both step as the proxy steps them live.
func voigtSim(seed uint64, m voigtModel, flows []voigtFlow, controlled bool, duration time.Duration) (*voigtRun, error) {
	e := sim.New(seed)
	listen, err := sim.NewFIFO(e, sim.FIFOConfig{Servers: m.workers, QueueLimit: m.listenQueue, Timeout: m.timeout})
	if err != nil {
		return nil, err
	}
	cpu, err := sim.NewCPU(e, m.cpus)
	if err != nil {
		return nil, err
	}
	link, err := sim.NewLink(e, m.linkMbit*1e6/8)
	if err != nil {
		return nil, err
	}
	queueBytes := m.queueKB * 1e3
	outQueue := func() float64 { return 100 * math.Min(1, link.Backlog()/queueBytes) }
	listenQueue := func() float64 { return float64(listen.Waiting()) }
	run := &voigtRun{m: m, controlled: controlled, duration: duration}
	if run.monCPU, err = newGauges(e, cpu.Busy, listenQueue, 1); err != nil {
		return nil, err
	}
	if run.monLink, err = newGauges(e, link.Busy, outQueue, m.queueSamples); err != nil {
		return nil, err
	}

	// The worker: CPU, then the reply unless the client has gone.
	timeout := m.timeout
	sendStage := &sim.Visit{Engine: e, Station: link, Work: sim.Size}
	send := sim.HandlerFunc(func(r *sim.Request) {
		if timeout > 0 && e.Now()-r.Sent > timeout {
			r.Finish(e.Now(), sim.TimedOut)
			return
		}
		sendStage.Handle(r)
	})
	var entry sim.Handler = &sim.Hold{Engine: e, Queue: listen, Next: &sim.Visit{Engine: e, Station: cpu, Next: send}}
	kernelWork := m.cpuKernel.Seconds()
	kernel := func(next sim.Handler) sim.Handler {
		return &sim.Visit{Engine: e, Station: cpu, Work: func(*sim.Request) float64 { return kernelWork }, Next: next}
	}

	if !controlled {
		entry = kernel(entry)
	} else {
		queued := entry
		// The CPU rule on dynamic requests, on the CPU's utilization.
		cgiCfg := control.DefaultVoigtCPUConfig()
		cgiCfg.Period, cgiCfg.InitialRate = m.period, m.cgiInitial
		cpuBusy, err := sim.NewBusy(e, cpu.Busy, "cpu")
		if err != nil {
			return nil, err
		}
		if run.cgi, err = newStaged(e, stage.Options{Name: "cgi", Controller: &cgiCfg, Burst: m.ruleBurst, Utilization: cpuBusy},
			queued, nil); err != nil {
			return nil, err
		}
		// The bandwidth rule on /islarge/: the outgoing queue, sampled
		// queue_samples times per period and averaged; no CPU guard
		// (the utilization it sees is NaN).
		bwCfg := control.DefaultVoigtQueueConfig()
		bwCfg.Period, bwCfg.QRef, bwCfg.InitialRate = m.period, 35, m.bwInitial
		outSampler, err := sim.NewSampler(e, m.period/time.Duration(m.queueSamples), outQueue)
		if err != nil {
			return nil, err
		}
		if run.bw, err = newStaged(e, stage.Options{Name: "islarge", Controller: &bwCfg, Burst: m.ruleBurst, Queue: outSampler.Mean},
			queued, nil); err != nil {
			return nil, err
		}
		rules := sim.HandlerFunc(func(r *sim.Request) {
			switch r.Type {
			case voigtDynamic:
				run.cgi.entry.Handle(r)
			case voigtLarge:
				run.bw.entry.Handle(r)
			default:
				queued.Handle(r)
			}
		})
		// The connection policer on the listen queue, with the CPU
		// utilization for its guard (the rate may only rise while the
		// CPU is below util_ref): the paper's bucket of policer_burst
		// and its PD controller, whose initial rate is the bucket's.
		pol := policer.DefaultConfig()
		pol.Rate, pol.Burst = m.policerInitial, m.policerBurst
		polCfg := control.DefaultVoigtQueueConfig()
		polCfg.Period, polCfg.InitialRate = m.period, m.policerInitial
		polBusy, err := sim.NewBusy(e, cpu.Busy, "cpu")
		if err != nil {
			return nil, err
		}
		accepted := kernel(rules)
		pass := sim.HandlerFunc(func(r *sim.Request) {
			r.Data = policed{}
			accepted.Handle(r)
		})
		if run.policer, err = newPolicing(e, pol, polCfg, polBusy, listenQueue, pass); err != nil {
			return nil, err
		}
		// A SYN the policer discards costs almost nothing (early
		// discard); everything it lets through pays the kernel's work.
		synWork := m.cpuSYN.Seconds()
		entry = sim.HandlerFunc(func(r *sim.Request) {
			run.policer.entry.Handle(r)
			if _, ok := r.Data.(policed); !ok && r.Done() && r.Outcome == sim.Rejected && synWork > 0 {
				cpu.Submit(&sim.Job{Work: synWork})
			}
		})
	}

	secs := int(math.Ceil(duration.Seconds())) + 1
	run.bins = make([][]voigtBin, len(flows))
	run.rts = make([][]float64, len(flows))
	run.at = make([][]time.Duration, len(flows))
	for i, fl := range flows {
		run.bins[i] = make([]voigtBin, secs)
		var arr dist.Arrivals = dist.Constant{Rate: fl.rate}
		if fl.arrivals == "poisson" {
			arr = dist.Poisson{Rate: fl.rate}
		}
		bins := run.bins[i]
		src, err := sim.NewOpen(e, sim.OpenConfig{Name: fl.name, Arrivals: arr, Types: fl.types, Mix: fl.mix, Class: i, Target: entry,
			OnFinish: func(r *sim.Request) {
				bins[min(int(r.Sent/time.Second), secs-1)].offered++
				b := &bins[min(int(r.Finished/time.Second), secs-1)]
				switch {
				case r.Outcome == sim.Rejected:
					b.rejected++
				case r.Outcome == sim.TimedOut:
					b.timedOut++
				case timeout > 0 && r.ResponseTime() > timeout:
					b.late++
				default:
					rt := r.ResponseTime().Seconds()
					b.good++
					b.rtSum += rt
					b.bytes += r.Size
					if r.Type != voigtLarge {
						b.smallGood++
						b.smallRTSum += rt
					}
					run.rts[i] = append(run.rts[i], rt)
					run.at[i] = append(run.at[i], r.Finished)
				}
			}})
		if err != nil {
			return nil, err
		}
		src.Start()
	}
	e.Run(duration)
	return run, nil
}

// voigtWindow aggregates one flow over [from, to) (whole seconds).
type voigtWindow struct {
	secs                                    float64
	offered, good, late, timedOut, rejected float64
	rtSum, bytes                            float64
	smallGood, smallRTSum                   float64
}

func (run *voigtRun) window(flow int, from, to time.Duration) voigtWindow {
	w := voigtWindow{}
	b := min(int(to/time.Second), len(run.bins[flow]))
	a := max(0, min(int(from/time.Second), b)) // a window may start before the run
	for _, x := range run.bins[flow][a:b] {
		w.offered += float64(x.offered)
		w.good += float64(x.good)
		w.late += float64(x.late)
		w.timedOut += float64(x.timedOut)
		w.rejected += float64(x.rejected)
		w.rtSum += x.rtSum
		w.bytes += x.bytes
		w.smallGood += float64(x.smallGood)
		w.smallRTSum += x.smallRTSum
	}
	w.secs = float64(b - a)
	return w
}

// throughput returns the goodput in req/s; meanRT the mean response time
// of the good replies in seconds.
func (w voigtWindow) throughput() float64 { return ratio(w.good, w.secs) }
func (w voigtWindow) meanRT() float64     { return ratio(w.rtSum, w.good) }

// smallRT returns the mean response time of the good small-file replies
// in seconds.
func (w voigtWindow) smallRT() float64 { return ratio(w.smallRTSum, w.smallGood) }

// ruleCounts sums a stage's or the policer's arrivals and rejections over
// the steps ending in (from, to] (0, 0 for a nil one).
func ruleCounts(p stepTrace, from, to time.Duration) (offered, rejected float64) {
	steps, _, ok := p.trace()
	if !ok {
		return 0, 0
	}
	for _, st := range steps {
		if st.end() > from && st.end() <= to {
			offered += st.in().Arrivals
			rejected += st.in().Rejected
		}
	}
	return offered, rejected
}

// rateAt returns the rate a controller had in force at t: its last
// decision at or before t (the initial rate before the first; NaN for a
// nil one).
func rateAt(p stepTrace, t time.Duration) float64 {
	steps, r, ok := p.trace()
	if !ok {
		return math.NaN()
	}
	for _, st := range steps {
		if st.end() > t {
			break
		}
		r = st.Decision.New
	}
	return r
}

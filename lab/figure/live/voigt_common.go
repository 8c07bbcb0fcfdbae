// SPDX-License-Identifier: Apache-2.0

package live

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/lab/dist"
	"github.com/sluicehq/sluice/lab/loadgen"
	"github.com/sluicehq/sluice/lab/testbed"
	"github.com/sluicehq/sluice/policy"
	"github.com/sluicehq/sluice/proxy"
	"github.com/sluicehq/sluice/proxy/overload"
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
	utilization *overload.UtilizationConfig
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
	rule := func(name, prefix string, ctrl control.Config) policy.StageConfig {
		st := mainPolicy(ctrl).Stages[0]
		st.Name, st.Match, st.Burst = name, policy.MatchConfig{PathPrefix: prefix}, 5
		return st
	}
	if v.utilization != nil {
		cfg.Utilization = *v.utilization
		c := control.DefaultVoigtCPUConfig()
		c.UtilRef, c.Kp, c.MinRate, c.InitialRate = 90, 0.2, 10, v.cgiInitial
		cfg.Stages = append(cfg.Stages, rule("cgi", "/cgi-bin/", &c))
		cfg.Resources = append(cfg.Resources, overload.ResourceConfig{Stage: "cgi", Resource: overload.ResourceCPU})
	}
	q := control.DefaultVoigtQueueConfig()
	q.QRef, q.Kp, q.Kd, q.MinRate, q.InitialRate = 35, 0.0625, 0.25, 10, v.bwInitial
	cfg.Stages = append(cfg.Stages, rule("large", "/islarge/", &q))
	cfg.Resources = append(cfg.Resources, overload.ResourceConfig{Stage: "large", Resource: overload.ResourceBandwidth,
		Sensor: &overload.SensorConfig{UtilizationConfig: overload.UtilizationConfig{Source: overload.SensorOutQueue},
			CapacityBytes: v.bwCapacity, SamplesPerPeriod: 20}})
	if v.policer {
		pc := &overload.PolicerConfig{Control: overload.PolicerControlConfig{
			VoigtQueueConfig: control.VoigtQueueConfig{QRef: 100, Kp: 0.0625, Kd: 0.25, MinRate: 10}}}
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
		k = overload.PolicerKernelAuto
	}
	return fmt.Sprintf("Connection policer: policer.kernel %s (auto and on drop excess SYNs in the kernel, nftables, when the process may; off resets them at accept in user space).", k)
}

// fmtRate formats a rate for metric names: 300 → "300".
func fmtRate(r float64) string { return strconv.FormatFloat(r, 'f', -1, 64) }

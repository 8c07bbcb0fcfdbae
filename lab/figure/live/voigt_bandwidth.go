// SPDX-License-Identifier: Apache-2.0

package live

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/sluicehq/sluice/lab/dist"
	"github.com/sluicehq/sluice/lab/figure"
	"github.com/sluicehq/sluice/lab/loadgen"
	"github.com/sluicehq/sluice/lab/report"
	"github.com/sluicehq/sluice/lab/testbed"
)

// voigt-bandwidth is Voigt & Gunningberg's Table 2, live: beside the
// SURGE-like workload at 300 req/s, a second flow requests one large file
// (about 142 KB, under /islarge/) at a constant rate, making the outgoing
// link the bottleneck. With the bandwidth rule (voigt-queue, a PD
// controller on the outgoing queue with q_ref 35 of 100) the small files
// keep a low response time and both workloads together complete more
// requests than without controls.
//
// Loopback has no bottleneck link, so the experiment emulates one at the
// clients (sharedLink): every client connection reads through one shared
// token bucket of the link's capacity and has a small receive buffer, so
// that the replies the link cannot carry yet stay in the proxy's socket
// send queues, where the proxy's outqueue sensor (SIOCOUTQNSD) sees them.

// Parameters of the emulated link and the flows.
const (
	// voigtLinkBytes is the emulated link's capacity in bytes per second
	// (160 Mbit/s): the SURGE-like workload at 300 req/s uses about 47 %
	// of it, so that, as in the simulator, 80 and 120 req/s of the large
	// file saturate it.
	voigtLinkBytes = 20e6
	// voigtLinkChunk is the most bytes a connection reads per turn of the
	// shared bucket (and its burst).
	voigtLinkChunk = 16 << 10
	// voigtLinkRcvBuf is the clients' receive buffer (SO_RCVBUF).
	voigtLinkRcvBuf = 16 << 10
	// voigtOutQueueFactor sets the outgoing queue's scale: the unsent
	// bytes that read as a full queue (100) are this many times the mean
	// unsent bytes of the reference run (the SURGE-like workload alone, the
	// link about half busy), which thus reads 100/factor = 10.
	voigtOutQueueFactor = 10
	// voigtOutQueueIdle is the capacity_bytes of the reference run: so
	// large that the rule reads an empty queue and never acts.
	voigtOutQueueIdle = 1 << 40
	// voigtBWTimeout is the clients' timeout here: the paper's large-file
	// response times reach 5.4 s without controls.
	voigtBWTimeout = 10 * time.Second
	// voigtSurgeRate is the SURGE-like workload's rate (paper: 300).
	voigtSurgeRate = 300.0
	// voigtLargeTarget is the large file's size in the paper (142 KB).
	voigtLargeTarget = 142000
)

// sharedLink is an emulated bottleneck link in front of the clients:
// every connection it dials reads through one token bucket (FIFO in the
// order of the reads), at most chunk bytes per turn. Its methods are safe
// for concurrent use.
type sharedLink struct {
	lim    *rate.Limiter
	chunk  int
	rcvBuf int
	bytes  atomic.Int64
}

// newSharedLink returns a link of capacity bytes per second.
func newSharedLink(capacity float64, chunk, rcvBuf int) (*sharedLink, error) {
	if !(capacity > 0) || chunk <= 0 || rcvBuf <= 0 {
		return nil, fmt.Errorf("shared link: capacity %g B/s, chunk %d and receive buffer %d must be positive", capacity, chunk, rcvBuf)
	}
	return &sharedLink{lim: rate.NewLimiter(rate.Limit(capacity), chunk), chunk: chunk, rcvBuf: rcvBuf}, nil
}

// Bytes returns the bytes read through the link so far.
func (l *sharedLink) Bytes() float64 { return float64(l.bytes.Load()) }

// dial connects and wraps the connection.
func (l *sharedLink) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: 5 * time.Second}
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		if err := tc.SetReadBuffer(l.rcvBuf); err != nil {
			c.Close()
			return nil, fmt.Errorf("shared link: SO_RCVBUF: %w", err)
		}
	}
	return &linkConn{Conn: c, link: l, closed: make(chan struct{})}, nil
}

// transport returns an HTTP transport whose connections use the link.
// Connections are kept alive: with one connection per request the proxy
// closes each socket once it has written the reply into the socket's
// send buffer (autotuned up to megabytes), and the unsent bytes of a
// closed socket are invisible to the outqueue sensor.
func (l *sharedLink) transport() *http.Transport {
	return &http.Transport{Proxy: nil, DialContext: l.dial, DisableCompression: true,
		MaxIdleConnsPerHost: voigtMaxInflight, IdleConnTimeout: 30 * time.Second, ForceAttemptHTTP2: false}
}

// linkConn is a connection whose reads pass the link's bucket.
type linkConn struct {
	net.Conn
	link   *sharedLink
	once   sync.Once
	closed chan struct{}
}

// Read reads at most a chunk and then waits for the link to have carried
// it (the bucket's reservations queue in the order of the reads).
func (c *linkConn) Read(p []byte) (int, error) {
	if len(p) > c.link.chunk {
		p = p[:c.link.chunk]
	}
	n, err := c.Conn.Read(p)
	if n > 0 {
		if r := c.link.lim.ReserveN(time.Now(), n); r.OK() {
			if d := r.Delay(); d > 0 {
				t := time.NewTimer(d)
				select {
				case <-t.C:
				case <-c.closed:
					t.Stop()
				}
			}
		}
		c.link.bytes.Add(int64(n))
	}
	return n, err
}

// Close closes the connection and ends a wait for the link.
func (c *linkConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// bwRun is one run of the bandwidth experiment.
type bwRun struct {
	name       string
	controlled bool
	largeRate  float64
	length     time.Duration
	warmup     time.Duration
	capacity   int64 // the outqueue sensor's capacity_bytes

	recs    []record
	samples []voigtSample
	// Measured over [warmup, length).
	surge, small, large voigtWindow
	linkUtil, drop      float64
	outQueue, outBytes  float64
}

func (r *bwRun) total() float64 { return r.surge.throughput() + r.large.throughput() }

// runVoigtBandwidth is the experiment in four steps: plan the file set,
// the large flow and the runs, run them (the first, without the large
// flow, scales the outgoing-queue sensor for the others), analyse them
// into the summary's metrics, and render the tables, checks, setup and
// plots.
func runVoigtBandwidth(ctx context.Context, env *Env) (*figure.Result, error) {
	st, err := testbed.NewStatic(voigtStaticConfig(0.2))
	if err != nil {
		return nil, err
	}
	defer st.Close() //nolint:errcheck // temporary file set
	srv, err := serveHTTP(st)
	if err != nil {
		return nil, err
	}
	defer srv.Close() //nolint:errcheck // at the end
	pl, err := planVoigtBandwidth(env, st.Entries())
	if err != nil {
		return nil, err
	}
	if err := pl.runAll(ctx, env, srv.URL); err != nil {
		return nil, err
	}
	return finish(env, func(s *report.Summary) { analyseVoigtBandwidth(s, pl) },
		func(r *figure.Result) error { return renderVoigtBandwidth(r, pl) })
}

// voigtBWPlan is the bandwidth experiment's plan: the reference run
// without the large flow, then a controlled and an uncontrolled run per
// rate of large-file requests; capacity is the outgoing-queue sensor's
// full scale, set from the reference run.
type voigtBWPlan struct {
	largeRates        []float64
	length, warmup    time.Duration
	baseLen, baseWarm time.Duration
	surge, large      loadgen.Workload
	largePath         string
	largeSize         int64
	pDyn, pLarge      float64
	meanBytes         float64
	runs              []*bwRun
	capacity          int64
}

func planVoigtBandwidth(env *Env, entries []testbed.FileEntry) (*voigtBWPlan, error) {
	pl := &voigtBWPlan{largeRates: pick(env, []float64{80, 120}, []float64{120}),
		length: pick(env, 30*time.Second, 15*time.Second), warmup: pick(env, 10*time.Second, 5*time.Second),
		baseLen: pick(env, 20*time.Second, 10*time.Second), baseWarm: pick(env, 5*time.Second, 3*time.Second)}
	var err error
	if pl.surge, err = surgeOf(entries); err != nil {
		return nil, err
	}
	for _, e := range entries {
		if !e.Dynamic && e.Size > testbed.LargeFileSize &&
			(pl.largePath == "" || math.Abs(float64(e.Size-voigtLargeTarget)) < math.Abs(float64(pl.largeSize-voigtLargeTarget))) {
			pl.largePath, pl.largeSize = e.Path, e.Size
		}
	}
	if pl.large, err = loadgen.NewURLs("large", "large file", []loadgen.Weighted{{Name: pl.largePath, Weight: 1}}); err != nil {
		return nil, err
	}
	pl.pDyn, pl.pLarge, pl.meanBytes = fileMix(entries)
	pl.runs = []*bwRun{{name: "unloaded", controlled: true, length: pl.baseLen, warmup: pl.baseWarm, capacity: voigtOutQueueIdle}}
	for _, lr := range pl.largeRates {
		pl.runs = append(pl.runs, &bwRun{name: fmt.Sprintf("controls %g/s", lr), controlled: true, largeRate: lr, length: pl.length, warmup: pl.warmup},
			&bwRun{name: fmt.Sprintf("no controls %g/s", lr), largeRate: lr, length: pl.length, warmup: pl.warmup})
	}
	return pl, nil
}

// runAll runs the reference run, sets the sensor's scale from its unsent
// bytes, and runs the others against backendURL.
func (pl *voigtBWPlan) runAll(ctx context.Context, env *Env, backendURL string) error {
	for i, r := range pl.runs {
		if i > 0 {
			r.capacity = pl.capacity
		}
		if err := r.run(ctx, env, backendURL, pl.surge, pl.large); err != nil {
			return err
		}
		if i == 0 {
			if !(r.outBytes > 0) {
				return fmt.Errorf("the reference run measured no unsent bytes (%v): the outqueue sensor cannot scale the queue", r.outBytes)
			}
			pl.capacity = int64(math.Round(voigtOutQueueFactor * r.outBytes))
			env.Phasef("outgoing queue scale: %d unsent bytes = 100 (%d × the %.0f bytes of the reference run)", pl.capacity, voigtOutQueueFactor, r.outBytes)
		}
	}
	return nil
}

// analyseVoigtBandwidth sets the summary's metrics: the reference run's,
// each run's per rate of large files (suffix _uncontrolled without the
// rule), the highest rate's headline figures and the run's constants.
func analyseVoigtBandwidth(s *report.Summary, pl *voigtBWPlan) {
	base := pl.runs[0]
	unloaded := base.small.meanRT()
	s.Set("small_rt_ms_unloaded", unloaded)
	s.Set("surge_rt_ms_unloaded", base.surge.meanRT())
	s.Set("surge_throughput_rps_unloaded", base.surge.throughput())
	s.Set("link_utilization_unloaded", base.linkUtil)
	for _, r := range pl.runs[1:] {
		suffix := ""
		if !r.controlled {
			suffix = "_uncontrolled"
		}
		tag := "_at_" + fmtRate(r.largeRate) + suffix
		s.Set("large_throughput_rps"+tag, r.large.throughput())
		s.Set("large_rt_ms"+tag, r.large.meanRT())
		s.Set("surge_throughput_rps"+tag, r.surge.throughput())
		s.Set("surge_rt_ms"+tag, r.surge.meanRT())
		s.Set("small_rt_ms"+tag, r.small.meanRT())
		s.Set("total_throughput_rps"+tag, r.total())
		s.Set("link_utilization"+tag, r.linkUtil)
		s.Set("out_queue_bytes"+tag, r.outBytes)
		if r.controlled {
			s.Set("small_rt_ratio_at_"+fmtRate(r.largeRate), r.small.meanRT()/unloaded)
			s.Set("large_rule_drop_fraction_at_"+fmtRate(r.largeRate), r.drop)
			s.Set("out_queue"+tag, r.outQueue)
		}
	}
	ctl, unc := pl.runs[len(pl.runs)-2], pl.runs[len(pl.runs)-1]
	s.Set("small_rt_ms", ctl.small.meanRT())
	s.Set("small_rt_ratio", ctl.small.meanRT()/unloaded)
	s.Set("small_rt_ms_uncontrolled", unc.small.meanRT())
	s.Set("total_throughput_rps", ctl.total())
	s.Set("total_throughput_rps_uncontrolled", unc.total())
	s.Set("total_throughput_gain", ratio(ctl.total(), unc.total()))
	s.Set("link_capacity_mbit", voigtLinkBytes*8/1e6)
	s.Set("out_queue_capacity_bytes", float64(pl.capacity))
	s.Set("out_queue_bytes_unloaded", base.outBytes)
	s.Set("large_file_kb", float64(pl.largeSize)/1e3)
	s.Set("mean_reply_kb", pl.meanBytes/1e3)
	s.Set("large_request_fraction", pl.pLarge)
	s.Set("dynamic_request_fraction", pl.pDyn)
	s.Set("surge_link_share", voigtSurgeRate*pl.meanBytes/voigtLinkBytes)
	s.Set("time_scale", 1)
}

// renderVoigtBandwidth writes Table 2 and the time series, the paper's
// expectations, the headline metrics, the setup and the plots.
func renderVoigtBandwidth(res *figure.Result, pl *voigtBWPlan) error {
	s, runs, base := res.Summary, pl.runs, pl.runs[0]
	ctl := runs[len(runs)-2]
	hi, unloaded := fmtRate(ctl.largeRate), base.small.meanRT()
	largeRates, length, warmup, baseLen, baseWarm := pl.largeRates, pl.length, pl.warmup, pl.baseLen, pl.baseWarm
	largePath, largeSize, pDyn, pLarge, meanBytes, capacity := pl.largePath, pl.largeSize, pl.pDyn, pl.pLarge, pl.meanBytes, pl.capacity
	tab := report.NewTable("large_rate_rps", "variant", "large_throughput_rps", "large_rt_ms", "surge_throughput_rps", "surge_rt_ms",
		"small_rt_ms", "total_throughput_rps", "link_utilization", "large_rule_drop_fraction", "out_queue", "out_queue_bytes", "bw_rate_end")
	if err := tab.Append(0, "controls", math.NaN(), math.NaN(), base.surge.throughput(), base.surge.meanRT(), unloaded, base.total(),
		base.linkUtil, base.drop, base.outQueue, base.outBytes, valueAt(base.samples, base.length, func(s *voigtSample) float64 { return s.largeRate })); err != nil {
		return err
	}
	for _, r := range runs[1:] {
		variant := "controls"
		if !r.controlled {
			variant = "no_controls"
		}
		bwEnd := valueAt(r.samples, r.length, func(s *voigtSample) float64 { return s.largeRate })
		if err := tab.Append(r.largeRate, variant, r.large.throughput(), r.large.meanRT(), r.surge.throughput(), r.surge.meanRT(),
			r.small.meanRT(), r.total(), r.linkUtil, r.drop, r.outQueue, r.outBytes, bwEnd); err != nil {
			return err
		}
	}
	res.AddTable("table2.csv", tab)
	res.AddTable("timeseries.csv", bwSampleTable(runs))

	res.Checks = figure.VoigtBandwidthChecks(s, hi)
	res.Key = []string{"small_rt_ms_unloaded", "small_rt_ms", "small_rt_ratio", "small_rt_ms_uncontrolled",
		"total_throughput_rps", "total_throughput_rps_uncontrolled"}
	res.Setup = []string{
		fmt.Sprintf("Backend: the static testbed (SURGE-like file set, %d files, file-set seed %d, sizes capped at 1 MiB; %.1f %% of requests for /islarge/, %.1f %% dynamic; mean reply %.1f KB) in this process on 127.0.0.1. The CPU is not the bottleneck here; the CPU rule and the policer are left out, only the bandwidth rule acts.",
			voigtFiles, voigtFileSeed, 100*pLarge, 100*pDyn, meanBytes/1e3),
		fmt.Sprintf("Emulated outgoing link (loopback has none): every client connection reads through one shared token bucket of %.0f MB/s (%.0f Mbit/s; golang.org/x/time/rate, %d KB per turn, reservations served in order) and has a %d KB receive buffer (SO_RCVBUF). Replies the link cannot carry yet stay in the proxy's client socket send queues, which the proxy's outqueue sensor sums with SIOCOUTQNSD. Unlike the paper's interface nothing is dropped (TCP on loopback never loses packets): the backlog shows as queueing delay, not as retransmissions.",
			voigtLinkBytes/1e6, voigtLinkBytes*8/1e6, voigtLinkChunk>>10, voigtLinkRcvBuf>>10),
		fmt.Sprintf("Load: the SURGE-like workload at a constant %g req/s (%.0f %% of the link), plus a second flow requesting the %.1f KB file %s at a constant %v req/s; kept-alive connections (with one connection per request the proxy would close each socket right after writing the reply into its send buffer, hiding the unsent bytes from the sensor), client timeout %v. Runs of %v measured from %v; the reference run without the large flow %v from %v.",
			voigtSurgeRate, 100*voigtSurgeRate*meanBytes/voigtLinkBytes, float64(largeSize)/1e3, largePath, largeRates, voigtBWTimeout, length, warmup, baseLen, baseWarm),
		fmt.Sprintf("Controlled: voigt-queue on /islarge/ (q_ref 35, kp 1/16, kd 1/4, min 10, initial 100/s, bucket 5) fed by the outqueue sensor (20 samples per 1 s period, averaged), whose full scale (100) is %d bytes: %d × the mean unsent bytes of the reference run, measured with the rule unable to act (capacity 1 TiB). On loopback (64 KB segments) the proxy's socket send buffers grow to hundreds of kilobytes or more, so a socket holds most of its reply unsent and the queue counts the undelivered rest of every reply in transfer, not a packet queue of 100 as in the paper; the scale is set so that the half-busy link reads 10. Uncontrolled: the same proxy without the rule. The pool (256 connections, queue 1024) never limits. The link's capacity and the large rates differ from the paper's (100 Mbit/s, 50 and 80 req/s) so that, as in the simulator, both rates saturate the link beside this file set's heavier SURGE flow; no time compression (time_scale 1).",
			capacity, voigtOutQueueFactor),
	}

	// Table 2 as bars, and the controlled run's outgoing queue over time.
	var xs, tc, tu, rc, ru []float64
	for i := 1; i+1 < len(runs); i += 2 {
		xs = append(xs, runs[i].largeRate)
		tc, tu = append(tc, runs[i].total()), append(tu, runs[i+1].total())
		rc, ru = append(rc, runs[i].small.meanRT()), append(ru, runs[i+1].small.meanRT())
	}
	lo, hiX := xs[0]-30, xs[len(xs)-1]+30
	tput := report.Panel{Title: fmt.Sprintf("outgoing bandwidth bottleneck: %.0f KB file beside %g req/s SURGE-like (Table 2)", float64(largeSize)/1e3, voigtSurgeRate),
		XLabel: "large-file request rate (req/s)", YLabel: "total throughput (replies/s)", YMin: 0, YMax: 1.4 * voigtSurgeRate,
		XMin: lo, XMax: hiX, BarWidth: 20,
		Series: []report.Series{{Label: "controls", X: xs, Y: tc, Kind: report.Bars}, {Label: "no controls", X: xs, Y: tu, Kind: report.Bars}}}
	rt := report.Panel{XLabel: "large-file request rate (req/s)", YLabel: "small-file mean RT (ms)", LogY: true, LegendLeft: true,
		XMin: lo, XMax: hiX, BarWidth: 20, YMin: 1, YMax: 1e5,
		Series: []report.Series{{Label: "controls", X: xs, Y: rc, Kind: report.Bars}, {Label: "no controls", X: xs, Y: ru, Kind: report.Bars}},
		HLines: []report.RefLine{{Value: unloaded, Label: fmt.Sprintf("without the large flow: %.1f ms", unloaded)},
			{Value: 10 * unloaded, Label: "10× that"}}}
	var tx, q, bw, lu []float64
	for i, sm := range ctl.samples {
		tx = append(tx, sm.t.Seconds())
		q, bw = append(q, sm.outQueue), append(bw, sm.largeRate)
		u := math.NaN()
		if i > 0 {
			u = 100 * (sm.link - ctl.samples[i-1].link) / (sm.t - ctl.samples[i-1].t).Seconds() / voigtLinkBytes
		}
		lu = append(lu, u)
	}
	trace := report.Panel{Title: fmt.Sprintf("controlled run at %s req/s of large files", hi), XLabel: "time (s)",
		YLabel: "queue (of 100), link (%), rate (req/s)", YMin: 0, YMax: 160, LegendLeft: true,
		Series: []report.Series{{Label: "outgoing queue (mean per period)", X: tx, Y: q},
			{Label: "link utilization (%)", X: tx, Y: lu, Dashed: true},
			{Label: "bandwidth rule: /islarge/ rate", X: tx, Y: bw}},
		HLines: []report.RefLine{{Value: 35, Label: "q_ref 35"}}}
	res.AddFigure("bandwidth.png", &report.Figure{PanelHeight: 3, Panels: []report.Panel{tput, rt, trace}})
	return nil
}

// run starts the proxy, runs the SURGE-like load and the large flow
// through one emulated link, and measures the window.
func (r *bwRun) run(ctx context.Context, env *Env, backendURL string, surge, large loadgen.Workload) error {
	link, err := newSharedLink(voigtLinkBytes, voigtLinkChunk, voigtLinkRcvBuf)
	if err != nil {
		return err
	}
	tr := link.transport()
	defer tr.CloseIdleConnections()
	vp := voigtProxy{backendURL: backendURL, workers: 256, queueTimeout: voigtBWTimeout, controlled: r.controlled,
		bwInitial: 100, bwCapacity: r.capacity}
	px, err := startProxy(ctx, vp.config())
	if err != nil {
		return fmt.Errorf("%s: %w", r.name, err)
	}
	surgeRate, err := dist.ConstantSchedule(voigtSurgeRate)
	if err != nil {
		return errors.Join(err, px.Close())
	}
	loads := []loadgen.Config{{Mode: loadgen.ModeOpen, Duration: r.length, Seed: env.Seed, Timeout: voigtBWTimeout, Workload: surge,
		Arrivals: dist.Constant{Rate: surgeRate}, MaxInflight: voigtMaxInflight, Transport: tr}}
	if r.largeRate > 0 {
		lr, err := dist.ConstantSchedule(r.largeRate)
		if err != nil {
			return errors.Join(err, px.Close())
		}
		loads = append(loads, loadgen.Config{Mode: loadgen.ModeOpen, Duration: r.length, Seed: env.Seed + 1, Timeout: voigtBWTimeout,
			Workload: large, Arrivals: dist.Constant{Rate: lr}, MaxInflight: voigtMaxInflight, Transport: tr})
	}
	ph := phase{name: r.name, length: r.length, target: px.URL, grace: time.Second, loads: loads}
	stop := sampleProxy(px, nil, link.Bytes, voigtSampleEvery)
	res, runErr := ph.run(ctx, env)
	r.samples = stop()
	if err := errors.Join(runErr, px.Close()); err != nil {
		return err
	}
	r.recs = res.recs
	r.surge = windowOf(r.recs, r.warmup, r.length, inGroup(0))
	r.small = windowOf(r.recs, r.warmup, r.length, notType("large", inGroup(0)))
	r.large = windowOf(r.recs, r.warmup, r.length, inGroup(1))
	bytes := delta(r.samples, r.warmup, r.length, func(s *voigtSample) float64 { return s.link })
	r.linkUtil = bytes / ((r.length - r.warmup).Seconds() * voigtLinkBytes)
	r.drop = math.NaN()
	r.outQueue, r.outBytes = math.NaN(), math.NaN()
	r.outBytes = meanOver(r.samples, r.warmup, r.length, func(s *voigtSample) float64 { return s.outBytes })
	if r.controlled {
		r.drop = ratio(delta(r.samples, r.warmup, r.length, func(s *voigtSample) float64 { return s.largeRejected }),
			delta(r.samples, r.warmup, r.length, func(s *voigtSample) float64 { return s.largeOffered }))
		r.outQueue = meanOver(r.samples, r.warmup, r.length, func(s *voigtSample) float64 { return s.outQueue })
	}
	return nil
}

// bwSampleTable lists the samples of the bandwidth runs.
func bwSampleTable(runs []*bwRun) *report.Table {
	t := report.NewTable("run", "time_s", "large_rate_offered", "bw_rate", "large_offered", "large_rejected", "out_queue", "out_queue_bytes", "link_bytes")
	for _, r := range runs {
		for _, s := range r.samples {
			_ = t.Append(r.name, s.t.Seconds(), r.largeRate, s.largeRate, s.largeOffered, s.largeRejected, s.outQueue, s.outBytes, s.link)
		}
	}
	return t
}

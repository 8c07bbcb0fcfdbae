// SPDX-License-Identifier: Apache-2.0

package simulated

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/sluicehq/sluice/lab/dist"
	"github.com/sluicehq/sluice/lab/figure"
	"github.com/sluicehq/sluice/lab/report"
	"github.com/sluicehq/sluice/lab/sim"
	"github.com/sluicehq/sluice/share"
)

// lijamin-epochs reproduces Li & Jamin's experiment (Tables II–IV and
// Figs. 2–3; docs/algorithms.md §3): four clients A–D with 10/20/30/40 %
// of B = 100 KB/s, each requesting 10 KB files at 6 req/s while active,
// through the 18 epochs of activity of Table III. The real share.Shares
// (the proxy's object) is driven in virtual time: Begin when a request is
// admitted to the delay stage, Delay, the delay, the reply's transfer over
// the server's outgoing link (processor sharing), and Done with the
// response time from Begin to the last byte; the manager's Tick runs every
// period.
//
// How a client's requests reach the delay stage is the parameter standby:
//
//   - queue (default, the paper's server): a request waits in standby for
//     the bandwidth semaphore of its client, so each client has one reply
//     in the delay or transfer stage at a time and its replies follow each
//     other; more than standby_limit waiting requests are killed at once.
//     A client's per-reply bandwidth is then its bandwidth, which is what
//     the algorithm measures.
//   - parallel (sluice's middleware): every request is admitted at once,
//     up to standby_limit of a client sleeping in their delays together,
//     each freeing its slot when its delay is over; more are rejected.
//     Against httperf's open-loop arrivals a client then has several
//     delayed replies in flight, its total is not its per-reply bandwidth,
//     and the shares are not enforced (see the report in the summary).

type lijaminParams struct {
	epoch      time.Duration
	total      float64 // B, bytes/s
	shares     []float64
	rate       float64
	size       float64
	arrivals   string
	linkRate   float64 // bytes/s
	ahatFactor float64
	alpha      float64
	period     time.Duration
	standby    string
	limit      int
	maxDelay   time.Duration
	processing time.Duration
	bin        time.Duration
}

// lijaminEpochs declares the parameters of lijamin-epochs and returns its run.
func lijaminEpochs(ps *Params) RunFunc {
	var c lijaminParams
	ps.Duration(&c.epoch, "epoch", 120*time.Second, time.Second, 100000*time.Second,
		"length of each of the 18 epochs of Table III (paper: about two minutes)")
	ps.Float(&c.total, "total_bandwidth", 100e3, 1, 1e12, "B, the configured total in bytes/s (paper: 100 KB/s)")
	ps.Floats(&c.shares, "shares", figure.LiJaminShares, 0.01, 100,
		"allocations of clients A, B, C, D in percent of B (paper's Table II); four values summing to at most 100")
	ps.Float(&c.rate, "rate", 6, 0.01, 1e6, "requests per second of each active client (paper: 6, httperf)")
	ps.Float(&c.size, "size", 10e3, 1, 1e9, "reply size in bytes (paper: 10 KB files)")
	ps.Choice(&c.arrivals, "arrivals", "constant", []string{"constant", "poisson"},
		"arrival process of each client: constant spacing as httperf --rate sends (each client with its own random phase), or Poisson")
	ps.Float(&c.linkRate, "link_rate", 1.25e6, 1, 1e12,
		"capacity of the server's outgoing link in bytes/s, shared equally by the replies in transfer (processor sharing). "+
			"The paper set B \"less than the maximum bandwidth\" on a departmental LAN; 1.25 MB/s (10 Mbit/s Ethernet, 12.5 B) is assumed. "+
			"With the link at B (link_rate=100000) no reply is faster than size/Â and concurrent replies are slower, the "+
			"clients settle just below their allocations, the state stays \"unsatisfied\" and idle bandwidth is not "+
			"redistributed: total 0.58 B (0.66 B with Â₀ = B), allocation error 0.043 (0.027)")
	ps.Float(&c.ahatFactor, "initial_max_factor", 8, 1, 1000,
		"Â₀, the initial maximum measured bandwidth (share.Config.InitialMaxBandwidth), as a multiple of B. §3 prescribes B, "+
			"which is exact only when replies really take size/Â to send. On a faster link a client held at d_i receives "+
			"1/(1/d_i − 1/Â) (share's \"Accuracy\"): with Â₀ = B the shares in epochs 17–18 come out 9.0/19.0/29.9/42.0 % "+
			"(error 0.025, the paper's Table IV shape: 9.48/19.05/29.90/41.56) and the total 1.16 B as Â grows to 1.9 B. Â₀ must "+
			"keep size/Â above a reply's time outside the delay (8 ms transfer + 1 ms processing here): 8 B gives 12.5 ms and "+
			"an error of 0.001; 4 B (share's tested value) gives 0.008")
	ps.Float(&c.alpha, "alpha", share.DefaultAlpha, share.MinAlpha, share.MaxAlpha, "EWMA weight α of a bandwidth sample (share default 0.2)")
	ps.Duration(&c.period, "period", share.DefaultPeriod, share.MinPeriod, share.MaxPeriod, "manager period (share default 1 s)")
	ps.Choice(&c.standby, "standby", "queue", []string{"queue", "parallel"},
		"how a client's requests reach the delay stage: queue (the paper: wait for the client's bandwidth semaphore, one "+
			"reply of a client in the delay or transfer at a time) or parallel (sluice's middleware: all admitted at once, "+
			"up to standby_limit sleeping in their delays together). Against these open-loop clients parallel does not enforce "+
			"the shares: 25 % each and a total of 1.7 B (with standby_limit=1: 11/22/33/33 %, error 0.079)")
	ps.Int(&c.limit, "standby_limit", share.DefaultStandbyLimit, 1, share.MaxStandbyLimit,
		"requests of one client allowed in standby (queue: waiting for the semaphore; parallel: sleeping in the delay, "+
			"share.Config.StandbyLimit); more are rejected at once. The paper's \"run-time upper limit\" is not given; share's default")
	ps.Duration(&c.maxDelay, "max_delay", share.DefaultMaxDelay, time.Millisecond, time.Hour, "longest delay before a rejection (share default 10 s)")
	ps.Duration(&c.processing, "processing", time.Millisecond, 0, time.Hour,
		"server time per request between admission and the delay (reading the file; the per-request overhead the paper mentions)")
	ps.Duration(&c.bin, "bin", 10*time.Second, time.Second, time.Hour, "width of the bins of the bandwidth plot (the CSV has one row per manager period)")
	return func(env Env) (*figure.Result, error) { return runLiJamin(env, c) }
}

// lijaminRun holds the outcome of one run: delivered bytes per client per
// manager period, Â per period, and rejection counts.
type lijaminRun struct {
	period    time.Duration
	bytes     [][]float64 // [period][client]
	ahat      []float64   // Â at the end of each period
	rejected  []int       // per client
	completed []int       // per client
	offered   []int       // per client
	delays    []float64   // sum of delays per client (s)
}

func (c lijaminParams) validate() error {
	if len(c.shares) != 4 {
		return paramErrorf("shares needs 4 values (A, B, C, D), got %d", len(c.shares))
	}
	sum := 0.0
	for _, s := range c.shares {
		sum += s
	}
	if sum > 100+1e-9 {
		return paramErrorf("shares sum to %g %%, more than 100", sum)
	}
	if c.epoch < 2*c.period {
		return paramErrorf("epoch %v must be at least two manager periods (%v)", c.epoch, c.period)
	}
	return nil
}

// lijaminConfig returns the share configuration of the run.
func lijaminConfig(c lijaminParams) share.Config {
	cfg := share.DefaultConfig()
	cfg.TotalBandwidth = share.Bandwidth(c.total)
	cfg.InitialMaxBandwidth = share.Bandwidth(c.ahatFactor * c.total)
	cfg.Alpha = c.alpha
	cfg.Period = c.period
	cfg.StandbyLimit = c.limit
	cfg.MaxDelay = c.maxDelay
	for i, n := range figure.LiJaminClients {
		cfg.Clients = append(cfg.Clients, share.ClientConfig{Name: n, Share: c.shares[i]})
	}
	return cfg
}

func runLiJaminSim(seed uint64, c lijaminParams) (*lijaminRun, error) {
	shares, err := share.New(lijaminConfig(c))
	if err != nil {
		return nil, err
	}
	e := sim.New(seed)
	link, err := sim.NewLink(e, c.linkRate)
	if err != nil {
		return nil, err
	}
	n := len(figure.LiJaminClients)
	periods := int(time.Duration(len(figure.LiJaminTable3)) * c.epoch / c.period)
	run := &lijaminRun{period: c.period, bytes: make([][]float64, periods+1), ahat: make([]float64, 0, periods),
		rejected: make([]int, n), completed: make([]int, n), offered: make([]int, n), delays: make([]float64, n)}
	for i := range run.bytes {
		run.bytes[i] = make([]float64, n)
	}
	size := int64(math.Round(c.size))
	// The delay stage: Begin; the request's processing; Delay; the delay
	// (in parallel mode the standby slot is freed when it is over, as
	// Reservation.Wait does); the transfer on the link; Done with the
	// response time from Begin (Reservation.Done).
	stage := sim.HandlerFunc(func(r *sim.Request) {
		res, err := shares.Begin(e.Time(), share.ClientID(r.Client))
		if err != nil {
			r.Finish(e.Now(), sim.Rejected)
			return
		}
		e.After(c.processing, func() {
			d, err := res.Delay(e.Time(), size)
			if err != nil {
				res.Release()
				r.Finish(e.Now(), sim.Rejected)
				return
			}
			run.delays[r.Client] += d.Seconds()
			e.After(d, func() {
				if c.standby == "parallel" {
					res.Release()
				}
				link.Submit(&sim.Job{Req: r, Work: float64(size), Done: func(*sim.Job) {
					now := e.Now()
					res.Done(e.Time(), size)
					run.bytes[min(int(now/c.period), periods)][r.Client] += float64(size)
					r.Finish(now, sim.Completed)
				}})
			})
		})
	})
	phase := e.Stream("phase")
	for i := range n {
		var entry sim.Handler = stage
		if c.standby == "queue" {
			// The client's bandwidth semaphore: one request in the delay
			// stage, up to limit waiting in standby.
			q, err := sim.NewFIFO(e, sim.FIFOConfig{Servers: 1, QueueLimit: c.limit})
			if err != nil {
				return nil, err
			}
			entry = &sim.Hold{Engine: e, Queue: q, Next: stage}
		}
		// Client i's rate per epoch, shifted by its own phase in [0, 1/rate)
		// so that the clients do not send in lockstep.
		off := time.Duration(phase.Float64() / c.rate * 1e9)
		segs := []dist.Segment{{Start: 0, Rate: 0}}
		for k, act := range figure.LiJaminTable3 {
			r := 0.0
			if act[i] {
				r = c.rate
			}
			segs = append(segs, dist.Segment{Start: time.Duration(k)*c.epoch + off + 1, Rate: r})
		}
		sched, err := dist.NewSchedule(segs...)
		if err != nil {
			return nil, err
		}
		var arr dist.Arrivals = dist.Constant{Rate: sched}
		if c.arrivals == "poisson" {
			arr = dist.Poisson{Rate: sched}
		}
		src, err := sim.NewOpen(e, sim.OpenConfig{Name: "client-" + figure.LiJaminClients[i], Arrivals: arr,
			Types: []sim.RequestType{{Name: "file"}}, Client: i, Target: entry,
			OnFinish: func(r *sim.Request) {
				run.offered[r.Client]++
				switch r.Outcome {
				case sim.Completed:
					run.completed[r.Client]++
				default:
					run.rejected[r.Client]++
				}
			}})
		if err != nil {
			return nil, err
		}
		src.Start()
	}
	if _, err := e.Every(c.period, func() {
		shares.Tick(e.Time())
		run.ahat = append(run.ahat, shares.MaxMeasured())
	}); err != nil {
		return nil, err
	}
	e.Run(time.Duration(len(figure.LiJaminTable3)) * c.epoch)
	run.bytes = run.bytes[:periods]
	return run, nil
}

// lijaminActive returns the active flags of the epoch containing period k.
func lijaminActive(c lijaminParams, k int) (epoch int, act [4]bool) {
	epoch = int(time.Duration(k) * c.period / c.epoch)
	epoch = min(epoch, len(figure.LiJaminTable3)-1)
	return epoch, figure.LiJaminTable3[epoch]
}

// runLiJamin reproduces Figs. 2 and 3 and Table IV: it runs the 18
// epochs, analyses the bandwidths and shares into the summary and the
// CSVs, and renders the bandwidth plot.
func runLiJamin(env Env, c lijaminParams) (*figure.Result, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	run, err := runLiJaminSim(env.Seed, c)
	if err != nil {
		return nil, err
	}
	res := newResult(env)
	if err := analyseLiJamin(res, c, run); err != nil {
		return nil, err
	}
	renderLiJamin(res, c, run)
	return res, nil
}

// analyseLiJamin writes timeseries.csv (per period) and epochs.csv (per
// epoch: bandwidths, total/B, shares) and sets Table IV's shares over
// epochs 17–18, the total bandwidth over B while two or more clients are
// active, rejections and delays per client, the key and the checks.
func analyseLiJamin(res *figure.Result, c lijaminParams, run *lijaminRun) error {
	s := res.Summary
	n := len(figure.LiJaminClients)
	h := c.period.Seconds()

	// Per-period time series.
	ts := report.NewTable("time_s", "epoch", "active", "bw_a_bps", "bw_b_bps", "bw_c_bps", "bw_d_bps", "total_bps", "max_measured_bps")
	for k, b := range run.bytes {
		ep, act := lijaminActive(c, k)
		tot := 0.0
		for _, x := range b {
			tot += x
		}
		if err := ts.Append(float64(k+1)*h, ep+1, figure.LiJaminActive(act), b[0]/h, b[1]/h, b[2]/h, b[3]/h, tot/h, run.ahat[k]); err != nil {
			return err
		}
	}
	res.AddTable("timeseries.csv", ts)

	// Per-epoch bandwidths and shares.
	per := int(c.epoch / c.period)
	ep := report.NewTable("epoch", "active", "bw_a_bps", "bw_b_bps", "bw_c_bps", "bw_d_bps", "total_bps", "total_over_b",
		"share_a", "share_b", "share_c", "share_d")
	var multiBytes, multiTime float64
	minRatio, maxRatio := math.Inf(1), math.Inf(-1)
	for k := range figure.LiJaminTable3 {
		var b [4]float64
		for p := k * per; p < (k+1)*per && p < len(run.bytes); p++ {
			for i := range n {
				b[i] += run.bytes[p][i]
			}
		}
		tot := b[0] + b[1] + b[2] + b[3]
		secs := c.epoch.Seconds()
		act := figure.LiJaminTable3[k]
		row := []any{k + 1, figure.LiJaminActive(act)}
		for i := range n {
			row = append(row, b[i]/secs)
		}
		row = append(row, tot/secs, tot/secs/c.total)
		for i := range n {
			row = append(row, ratio(b[i], tot))
		}
		if err := ep.Append(row...); err != nil {
			return err
		}
		if countActive(act) >= 2 {
			multiBytes += tot
			multiTime += secs
			minRatio = math.Min(minRatio, tot/secs/c.total)
			maxRatio = math.Max(maxRatio, tot/secs/c.total)
		}
	}
	res.AddTable("epochs.csv", ep)

	// Table IV: shares over epochs 17–18.
	var last [4]float64
	for p := 16 * per; p < len(run.bytes); p++ {
		for i := range n {
			last[i] += run.bytes[p][i]
		}
	}
	lastTot := last[0] + last[1] + last[2] + last[3]
	figure.LiJaminShareMetrics(s, last[:], c.shares)
	s.Set("total_bw_ratio", ratio(multiBytes, multiTime)/c.total)
	s.Set("total_bw_ratio_epoch_min", minRatio)
	s.Set("total_bw_ratio_epoch_max", maxRatio)
	s.Set("total_bw_ratio_17_18", lastTot/(2*c.epoch.Seconds())/c.total)
	s.Set("max_measured_final_bps", run.ahat[len(run.ahat)-1])
	var off, rej, done int
	for i := range n {
		off += run.offered[i]
		rej += run.rejected[i]
		done += run.completed[i]
		s.Set("reject_fraction_"+figure.LiJaminClients[i], ratio(float64(run.rejected[i]), float64(run.offered[i])))
		s.Set("mean_delay_ms_"+figure.LiJaminClients[i], ms(ratio(run.delays[i], float64(run.completed[i]))))
	}
	s.Set("reject_fraction", ratio(float64(rej), float64(off)))
	s.Set("total_bandwidth_bps", c.total)
	res.Key = []string{"allocation_error", "total_bw_ratio", "share_a_percent", "share_b_percent", "share_c_percent", "share_d_percent"}
	res.Checks = figure.LiJaminChecks(s)
	return nil
}

// renderLiJamin draws bandwidth.png: Fig. 2's bandwidth per client in
// bins of c.bin and Fig. 3's total with the maximum measured bandwidth Â.
func renderLiJamin(res *figure.Result, c lijaminParams, run *lijaminRun) {
	n := len(figure.LiJaminClients)
	h := c.period.Seconds()
	// Fig. 2: bandwidth per client over time; Fig. 3: total and Â.
	binP := max(1, int(c.bin/c.period))
	var x []float64
	y := make([][]float64, n+1)
	var ah []float64
	for k0 := 0; k0 < len(run.bytes); k0 += binP {
		k1 := min(k0+binP, len(run.bytes))
		secs := float64(k1-k0) * h
		x = append(x, float64(k0)*h+secs/2)
		tot := 0.0
		for i := range n {
			b := 0.0
			for p := k0; p < k1; p++ {
				b += run.bytes[p][i]
			}
			y[i] = append(y[i], b/secs/1e3)
			tot += b
		}
		y[n] = append(y[n], tot/secs/1e3)
		ah = append(ah, run.ahat[k1-1]/1e3)
	}
	var vl []report.RefLine
	for k := 1; k < len(figure.LiJaminTable3); k++ {
		vl = append(vl, report.RefLine{Value: (time.Duration(k) * c.epoch).Seconds()})
	}
	clients := report.Panel{Title: fmt.Sprintf("bandwidth per client, %gs bins; epochs of %gs, Table III (Fig. 2)", c.bin.Seconds(), c.epoch.Seconds()),
		XLabel: "time (s)", YLabel: "bandwidth (KB/s)", VLines: vl, YMin: 0, YMax: 1.3 * c.total / 1e3}
	for i := range n {
		clients.Series = append(clients.Series, report.Series{
			Label: fmt.Sprintf("%s (allocation %g %%)", strings.ToUpper(figure.LiJaminClients[i]), c.shares[i]), X: x, Y: y[i]})
	}
	top := 1.3 * c.total / 1e3
	totals := report.Panel{XLabel: "time (s)", YLabel: "bandwidth (KB/s)", VLines: vl, YMin: 0, YMax: top,
		Series: []report.Series{{Label: "total delivered", X: x, Y: y[n]}},
		HLines: []report.RefLine{{Value: c.total / 1e3, Label: fmt.Sprintf("B = %g KB/s", c.total/1e3)}}}
	if slicesMax(ah) <= top {
		totals.Title = "total and maximum measured bandwidth Â (Fig. 3)"
		totals.Series = append(totals.Series, report.Series{Label: "Â (max measured)", X: x, Y: ah, Dashed: true})
	} else {
		totals.Title = fmt.Sprintf("total bandwidth (Fig. 3); Â from %g to %.0f KB/s, off this scale", ah[0], ah[len(ah)-1])
	}
	res.AddFigure("bandwidth.png", &report.Figure{PanelHeight: 3.6, Width: 10, Panels: []report.Panel{clients, totals}})
}

func countActive(act [4]bool) int {
	n := 0
	for _, a := range act {
		if a {
			n++
		}
	}
	return n
}

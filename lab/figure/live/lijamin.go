// SPDX-License-Identifier: Apache-2.0

package live

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/lab/dist"
	"github.com/sluicehq/sluice/lab/figure"
	"github.com/sluicehq/sluice/lab/loadgen"
	"github.com/sluicehq/sluice/lab/report"
	"github.com/sluicehq/sluice/lab/testbed"
	"github.com/sluicehq/sluice/lab/tick"
	"github.com/sluicehq/sluice/policy"
	"github.com/sluicehq/sluice/proxy"
	"github.com/sluicehq/sluice/share"
)

// lijamin-epochs is Li & Jamin's Tables II–IV and Figs. 2–3, live: four
// clients a–d own 10/20/30/40 % of B = 100 KB/s at the proxy's client
// shares (delay, not drop); each active client sends 10 KB requests at 6
// per second (60 KB/s, more than any share), naming itself in a header,
// through the activity epochs of Table III. The backend is the queue
// testbed (8 workers, 1 ms, 10 000-byte replies), far faster than B, so
// the shares are the only limit.
//
// Only the epochs are compressed: the replies (10 KB), the clients' rate
// (6 req/s), B, α and the per-reply dynamics are the paper's. Epochs 1–16
// last lijaminEpoch instead of about two minutes, which still shows where
// idle bandwidth goes; epochs 17 and 18, over which the paper measures
// Table IV, last lijaminFinalEpoch each, so that the few seconds the shares
// take to settle after epoch 16 (client a alone) weigh about as little in
// the measurement as in the paper's four minutes.

// The live parameters of lijamin-epochs.
const (
	lijaminB         = 100e3 // B, bytes/s
	lijaminSize      = 10000 // reply size in bytes
	lijaminRate      = 6.0   // requests per second of an active client
	lijaminAhatScale = 4     // Â₀ = 4·B (docs/config.md, Client shares: Accuracy)
	// lijaminStandby is each client's standby limit. The paper does not
	// give its run-time limit; 4 keeps the queue of client a (one reply a
	// second) to four seconds, shorter than a compressed epoch, so a
	// client's backlog does not spill far into the next epoch.
	lijaminStandby = 4
	lijaminPeriod  = 500 * time.Millisecond // manager period (the paper's 0.5–1 s)
	// lijaminClientHeader names the client; the load generators are on
	// the trusted loopback peer.
	lijaminClientHeader = "X-Sluice-Client"
	lijaminTimeout      = 30 * time.Second
)

// lijaminEpoch is one epoch of a live run: its number in Table III and its
// span in the run.
type lijaminEpoch struct {
	number        int // 1–18
	start, length time.Duration
}

func (e lijaminEpoch) end() time.Duration { return e.start + e.length }
func (e lijaminEpoch) active() [4]bool    { return figure.LiJaminTable3[e.number-1] }
func (e lijaminEpoch) activeNames() string {
	return figure.LiJaminActive(e.active())
}

// activeCount is the number of clients active in the epoch.
func (e lijaminEpoch) activeCount() int {
	n := 0
	for _, on := range e.active() {
		if on {
			n++
		}
	}
	return n
}

// lijaminEpochLabel names an epoch with its active clients: "16 (A)".
func lijaminEpochLabel(e lijaminEpoch) string {
	return fmt.Sprintf("%d (%s)", e.number, e.activeNames())
}

// lijaminPlan returns the epochs of a run: all 18 (1–16 of epoch, 17–18
// of final), or with quick the subset 1, 16, 17, 18 (shorter), which keeps
// all four clients at the start, client a alone, and the two measured
// epochs after it, as in the full run.
func lijaminPlan(quick bool) []lijaminEpoch {
	epoch, final := 7*time.Second, 20*time.Second
	numbers := make([]int, 18)
	for i := range numbers {
		numbers[i] = i + 1
	}
	if quick {
		epoch, final = 4*time.Second, 12*time.Second
		numbers = []int{1, 16, 17, 18}
	}
	var out []lijaminEpoch
	var t time.Duration
	for _, n := range numbers {
		l := epoch
		if n >= 17 {
			l = final
		}
		out = append(out, lijaminEpoch{number: n, start: t, length: l})
		t += l
	}
	return out
}

// lijaminSchedule returns client i's request rate over the run: lijaminRate
// in the epochs where it is active, 0 elsewhere, shifted by offset so that
// the clients do not send in lockstep.
func lijaminSchedule(plan []lijaminEpoch, i int, offset time.Duration) (dist.Schedule, error) {
	segs := []dist.Segment{{Start: 0, Rate: 0}}
	for _, e := range plan {
		r := 0.0
		if e.active()[i] {
			r = lijaminRate
		}
		segs = append(segs, dist.Segment{Start: e.start + offset + 1, Rate: r})
	}
	return dist.NewSchedule(segs...)
}

// lijaminPolicy is the admission part of the proxy: no control, and
// client identities believed from the loopback peer.
func lijaminPolicy() policy.Config {
	pol := nonePolicy()
	pol.Classes.TrustedProxies = []string{"127.0.0.1"}
	return pol
}

// lijaminSharesConfig is the proxy's shares configuration (examples/lijamin.yaml
// with the live standby limit and manager period).
func lijaminSharesConfig() *share.Config {
	cfg := share.DefaultConfig()
	cfg.ReplyBuffer = 0 // the middleware's; the proxy never buffers a reply
	cfg.TotalBandwidth = share.Bandwidth(lijaminB)
	cfg.InitialMaxBandwidth = share.Bandwidth(lijaminAhatScale * lijaminB)
	cfg.Alpha, cfg.Period, cfg.StandbyLimit, cfg.MaxDelay = 0.2, lijaminPeriod, lijaminStandby, 10*time.Second
	cfg.ClientHeader = lijaminClientHeader
	for i, n := range figure.LiJaminClients {
		cfg.Clients = append(cfg.Clients, share.ClientConfig{Name: n, Share: figure.LiJaminShares[i], HeaderValues: []string{n}})
	}
	return &cfg
}

// ahatSample is Â as the proxy reported it at t.
type ahatSample struct {
	t    time.Duration
	ahat float64
}

func runLiJaminEpochs(ctx context.Context, env *Env) (*figure.Result, error) {
	plan := lijaminPlan(env.Quick)
	length := plan[len(plan)-1].end()
	qcfg := testbed.DefaultQueueConfig()
	qcfg.Workers, qcfg.Service, qcfg.Size, qcfg.Seed = 8, "det:1ms", lijaminSize, env.Seed
	be, err := testbed.NewQueue(qcfg)
	if err != nil {
		return nil, err
	}
	defer be.Close()
	srv, err := serveHTTP(be)
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	cfg := proxyConfig(srv.URL, 64, lijaminPolicy(), "")
	cfg.Shares = lijaminSharesConfig()
	px, err := startProxy(ctx, cfg)
	if err != nil {
		return nil, err
	}
	wl, err := loadgen.NewURLs("lijamin", "url", []loadgen.Weighted{{Name: "/file", Weight: 1}})
	if err != nil {
		return nil, errors.Join(err, px.Close())
	}
	// Each client's phase: uniform in [0, 1/rate), from the seed.
	rng := rand.New(rand.NewPCG(env.Seed, 0x4c694a616d696e)) // "LiJamin"
	var loads []loadgen.Config
	for i, name := range figure.LiJaminClients {
		off := time.Duration(rng.Float64() / lijaminRate * float64(time.Second))
		sched, err := lijaminSchedule(plan, i, off)
		if err != nil {
			return nil, errors.Join(err, px.Close())
		}
		loads = append(loads, loadgen.Config{Mode: loadgen.ModeOpen, Duration: length, Seed: env.Seed + uint64(i), Timeout: lijaminTimeout,
			Workload: wl, Arrivals: dist.Constant{Rate: sched}, Clients: []loadgen.Weighted{{Name: name, Weight: 1}},
			ClientHeader: lijaminClientHeader})
	}
	var ahat []ahatSample
	stopSampling := sampleState(px, lijaminPeriod, func(t time.Duration, doc proxy.StateDoc) {
		if doc.Shares != nil {
			ahat = append(ahat, ahatSample{t: t, ahat: doc.Shares.MaxMeasured})
		}
	})
	env.Phasef("epochs %s", epochList(plan))
	ph := phase{name: "shares", length: length, loads: loads, target: px.URL, grace: time.Second,
		users: func(t time.Duration) float64 {
			for _, e := range plan {
				if t < e.end() {
					return float64(e.activeCount())
				}
			}
			return 0
		}}
	res, runErr := ph.run(ctx, env)
	stopSampling()
	if err := errors.Join(runErr, px.Close()); err != nil {
		return nil, err
	}
	return analyseLiJamin(env, plan, res, ahat)
}

// epochList names the epochs of a plan with their lengths.
func epochList(plan []lijaminEpoch) string {
	var parts []string
	for _, e := range plan {
		parts = append(parts, fmt.Sprintf("%s %gs", lijaminEpochLabel(e), e.length.Seconds()))
	}
	return strings.Join(parts, ", ")
}

// clientBytes returns the reply bytes delivered to each client in [from, to)
// (by completion time).
func clientBytes(recs []record, from, to time.Duration) [4]float64 {
	var b [4]float64
	for i := range recs {
		r := &recs[i]
		if r.out == outOK && r.done >= from && r.done < to && int(r.group) < 4 {
			b[r.group] += lijaminSize
		}
	}
	return b
}

func analyseLiJamin(env *Env, plan []lijaminEpoch, ph *phaseResult, ahat []ahatSample) (*figure.Result, error) {
	s := newSummary(env)
	res := &figure.Result{Bundle: report.NewBundle(s)}
	recs := ph.recs
	length := plan[len(plan)-1].end()
	epochAt := func(t time.Duration) lijaminEpoch {
		for _, e := range plan {
			if t < e.end() {
				return e
			}
		}
		return plan[len(plan)-1]
	}
	ahatAt := func(t time.Duration) float64 {
		v := math.NaN()
		for _, a := range ahat {
			if a.t > t {
				break
			}
			v = a.ahat
		}
		return v
	}

	// Per-second series (Fig. 2 and 3).
	ts := report.NewTable("time_s", "epoch", "active", "bw_a_bps", "bw_b_bps", "bw_c_bps", "bw_d_bps", "total_bps", "max_measured_bps")
	var x, tot, ah []float64
	y := make([][]float64, 4)
	for t := time.Duration(0); t < length; t += time.Second {
		b := clientBytes(recs, t, t+time.Second)
		e := epochAt(t)
		sum := b[0] + b[1] + b[2] + b[3]
		a := ahatAt(t + time.Second)
		if err := ts.Append((t + time.Second).Seconds(), e.number, e.activeNames(), b[0], b[1], b[2], b[3], sum, a); err != nil {
			return nil, err
		}
		x = append(x, t.Seconds()+0.5)
		for i := range 4 {
			y[i] = append(y[i], b[i]/1e3)
		}
		tot = append(tot, sum/1e3)
		ah = append(ah, a/1e3)
	}
	res.AddTable("timeseries.csv", ts)

	// Per-epoch bandwidths and shares.
	ep := report.NewTable("epoch", "active", "start_s", "length_s", "bw_a_bps", "bw_b_bps", "bw_c_bps", "bw_d_bps", "total_bps", "total_over_b",
		"share_a", "share_b", "share_c", "share_d")
	var multiBytes, multiTime float64
	minRatio, maxRatio := math.Inf(1), math.Inf(-1)
	for _, e := range plan {
		b := clientBytes(recs, e.start, e.end())
		sum := b[0] + b[1] + b[2] + b[3]
		secs := e.length.Seconds()
		row := []any{e.number, e.activeNames(), e.start.Seconds(), secs}
		for i := range 4 {
			row = append(row, b[i]/secs)
		}
		row = append(row, sum/secs, sum/secs/lijaminB)
		for i := range 4 {
			row = append(row, ratio(b[i], sum))
		}
		if err := ep.Append(row...); err != nil {
			return nil, err
		}
		if e.activeCount() >= 2 {
			multiBytes += sum
			multiTime += secs
			minRatio = math.Min(minRatio, sum/secs/lijaminB)
			maxRatio = math.Max(maxRatio, sum/secs/lijaminB)
		}
	}
	res.AddTable("epochs.csv", ep)

	// Table IV: the shares over epochs 17–18.
	var from, to time.Duration = -1, 0
	for _, e := range plan {
		if e.number >= 17 {
			if from < 0 {
				from = e.start
			}
			to = e.end()
		}
	}
	last := clientBytes(recs, from, to)
	lastTot := last[0] + last[1] + last[2] + last[3]
	figure.LiJaminShareMetrics(s, last[:], figure.LiJaminShares)
	s.Set("total_bw_ratio", ratio(multiBytes, multiTime)/lijaminB)
	s.Set("total_bw_ratio_epoch_min", minRatio)
	s.Set("total_bw_ratio_epoch_max", maxRatio)
	s.Set("total_bw_ratio_17_18", lastTot/(to-from).Seconds()/lijaminB)
	s.Set("max_measured_final_bps", ahatAt(length))
	var off, rej int
	for i, n := range figure.LiJaminClients {
		c := countSent(recs, 0, length, inGroup(uint8(i)))
		off += c.offered
		rej += c.rejected
		s.Set("reject_fraction_"+n, c.rejectFraction())
		s.Set("mean_rt_ms_"+n, report.Mean(okLatencies(recs, from, to, inGroup(uint8(i)))))
		s.Set("timeouts_"+n, float64(c.timeouts))
		s.Set("errors_"+n, float64(c.errors))
	}
	s.Set("reject_fraction", ratio(float64(rej), float64(off)))
	s.Set("total_bandwidth_bps", lijaminB)
	s.Set("epochs_run", float64(len(plan)))
	s.Set("epoch_s", plan[0].length.Seconds())
	s.Set("final_epoch_s", plan[len(plan)-1].length.Seconds())
	s.Set("initial_max_bandwidth_bps", lijaminAhatScale*lijaminB)
	s.Set("standby_limit", lijaminStandby)
	res.Key = []string{"allocation_error", "share_a_percent", "share_b_percent", "share_c_percent", "share_d_percent",
		"total_bw_ratio_17_18", "total_bw_ratio"}

	res.Checks = figure.LiJaminChecks(s)

	var vl []report.RefLine
	for _, e := range plan[1:] {
		vl = append(vl, report.RefLine{Value: e.start.Seconds()})
	}
	clients := report.Panel{Title: fmt.Sprintf("bandwidth per client, 1 s bins; epochs %s (Fig. 2)", epochList(plan)),
		XLabel: "time (s)", YLabel: "bandwidth (KB/s)", VLines: vl, YMin: 0, YMax: 1.3 * lijaminB / 1e3, LegendLeft: true}
	for i, n := range figure.LiJaminClients {
		clients.Series = append(clients.Series, report.Series{
			Label: fmt.Sprintf("%s (allocation %g %%)", strings.ToUpper(n), figure.LiJaminShares[i]), X: x, Y: y[i]})
		clients.HLines = append(clients.HLines, report.RefLine{Value: figure.LiJaminShares[i] * lijaminB / 100 / 1e3})
	}
	totals := report.Panel{Title: "total delivered and the maximum measured bandwidth Â (Fig. 3)", XLabel: "time (s)", YLabel: "bandwidth (KB/s)",
		VLines: vl, YMin: 0, LegendLeft: true,
		Series: []report.Series{{Label: "total delivered", X: x, Y: tot}, {Label: "Â (max measured)", X: x, Y: ah, Dashed: true}},
		HLines: []report.RefLine{{Value: lijaminB / 1e3, Label: fmt.Sprintf("B = %g KB/s", lijaminB/1e3)}}}
	res.AddFigure("bandwidth.png", &report.Figure{PanelHeight: 3.6, Width: 10, Panels: []report.Panel{clients, totals}})

	sharesBar := report.Panel{Title: "shares of the bytes over epochs 17–18 (Table IV)", XLabel: "client (1 = A … 4 = D)", YLabel: "share of the bytes (%)",
		YMin: 0, YMax: 50, BarWidth: 0.6, LegendLeft: true,
		Series: []report.Series{
			{Label: "allocation (Table II)", X: []float64{1, 2, 3, 4}, Y: figure.LiJaminShares, Kind: report.Bars},
			{Label: "this run", X: []float64{1, 2, 3, 4}, Y: []float64{s.Metric("share_a_percent"), s.Metric("share_b_percent"),
				s.Metric("share_c_percent"), s.Metric("share_d_percent")}, Kind: report.Bars},
		}}
	res.AddFigure("shares.png", &report.Figure{PanelHeight: 3, Panels: []report.Panel{sharesBar}})

	res.Setup = []string{
		fmt.Sprintf("Backend: the queue testbed, 8 workers, deterministic 1 ms service, %d-byte replies, in process on 127.0.0.1 (about 80 MB/s: far more than B).", lijaminSize),
		fmt.Sprintf("Proxy: client shares with B = %g KB/s, clients a–d with %g/%g/%g/%g %% (Table II), identified by the %s header from the trusted loopback peer; α 0.2, manager period %v, initial Â = %g·B (docs/config.md, Accuracy: on loopback a reply transfers much faster than size/Â), standby limit %d, max delay 10 s; replies take turns per client (parallel: false).",
			lijaminB/1e3, figure.LiJaminShares[0], figure.LiJaminShares[1], figure.LiJaminShares[2], figure.LiJaminShares[3], lijaminClientHeader, lijaminPeriod, float64(lijaminAhatScale), lijaminStandby),
		fmt.Sprintf("Load: one open-loop load generator per client, %g requests per second at constant spacing while the client is active (httperf's --rate; each client with its own phase), %d-byte replies, client timeout %v.",
			lijaminRate, lijaminSize, lijaminTimeout),
		fmt.Sprintf("Epochs (Table III): %s. The paper's epochs last about two minutes; here only the epochs are shortened, every rate and size is the paper's. Epochs 17–18, over which Table IV's shares and the allocation error are measured, are kept longer (%v each) so that the seconds the shares take to settle after epoch 16 (client A alone) weigh little.",
			epochList(plan), plan[len(plan)-1].length),
		"Bandwidth is counted from the load generators: 10 000 bytes per complete reply, at its completion time. The simulator's mean_delay_ms_* (the injected delay) is not observable from outside; mean_rt_ms_* is each client's mean response time over epochs 17–18 (turn wait, delay and transfer).",
	}
	return res, nil
}

// sampleState calls f with the proxy's state every period until the
// returned stop function is called (which waits for the sampler).
func sampleState(px *liveProxy, every time.Duration, f func(t time.Duration, doc proxy.StateDoc)) (stop func()) {
	base := time.Now()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick.Every(done, every, func() {
			f(time.Since(base), px.srv.State(0))
		})
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(done) })
		wg.Wait()
	}
}

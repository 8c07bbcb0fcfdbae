// SPDX-License-Identifier: Apache-2.0

package figures

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/lab/dist"
	"github.com/sluicehq/sluice/lab/loadgen"
	"github.com/sluicehq/sluice/lab/testbed"
	"github.com/sluicehq/sluice/policy"
	"github.com/sluicehq/sluice/share"
)

// Instances is the number of proxies of every figure.
const Instances = 3

func hosts(l *lab) []string {
	out := make([]string, len(l.instances))
	for i, in := range l.instances {
		out[i] = in.Addr
	}
	return out
}

func fastBackend() testbed.QueueConfig {
	q := testbed.DefaultQueueConfig()
	q.Workers, q.Service, q.Size = 16, "det:1ms", 128
	return q
}

// staticPolicy is one static-rate stage of rate req/s for the cluster.
// Its token bucket holds 20 requests (not the default 5), so that a
// pause of the load generator on a busy machine (tens of milliseconds)
// does not lose admissions the figure would then blame on the split;
// under the steady overload of the figures the bucket is empty.
func staticPolicy(rate float64) policy.Config {
	c := control.DefaultStaticRateConfig()
	c.Rate = rate
	st := policy.StageConfig{Name: "api", Match: policy.MatchConfig{PathPrefix: "/"}, Control: &c, Burst: 20}
	return policy.Config{Stages: []policy.StageConfig{st}}
}

// ---- Li & Jamin shares across the instances -------------------------

// Clients are the clients of the shares figure, with their shares of B
// in percent (the paper's Table II).
var (
	Clients = []string{"a", "b", "c", "d"}
	Percent = []float64{10, 20, 30, 40}
)

// Share parameters: the single-instance experiment's (lijamin-epochs),
// now for the whole cluster: B = 100 KB/s shared by every instance,
// clients sending 6 requests a second while active, spread round robin
// (2 a second to each instance).
const (
	ShareB       = 100e3 // B, bytes per second, of the whole cluster
	shareSize    = 10000 // reply bytes
	shareRate    = 6.0   // requests per second of an active client
	sharePeriod  = 500 * time.Millisecond
	shareSamples = 6 // moments averaged for PerInstanceB
	shareStandby = 4
)

// Epoch is one activity epoch: which of the clients a–d send, and for
// how long.
type Epoch struct {
	Number int
	Active [4]bool
	Length time.Duration
}

// SharesResult is the shares figure.
type SharesResult struct {
	// Percent is each client's share of the bytes delivered over the last
	// two epochs; AllocationError is √Σ(target − actual)² over them
	// (fractions), as lijamin-epochs reports it.
	Percent         [4]float64
	AllocationError float64
	// TotalRatio is the bandwidth delivered over the last two epochs over
	// B (all instances together).
	TotalRatio float64
	// PerInstanceB are the instances' parts of B (bytes/s), and AhatRatio
	// their Â over their part of B, each the mean of shareSamples moments
	// one period apart from the middle of the last epoch.
	PerInstanceB, AhatRatio []float64
	// Failed counts requests that neither succeeded nor were rejected.
	Failed int
}

// sharesPolicy is the shares figure's: no stage control, the clients
// named by a header believed from the loopback peer.
func sharesPolicy() policy.Config {
	return policy.Config{
		Classes: policy.ClassesConfig{TrustedProxies: []string{"127.0.0.1"}},
		Stages:  []policy.StageConfig{{Name: "site", Match: policy.MatchConfig{PathPrefix: "/"}, Controller: "none"}},
	}
}

// sharesConfig is the cluster's Li & Jamin configuration: B and the
// clients' shares of it, Â starting at 4 B.
func sharesConfig() *share.Config {
	cfg := share.DefaultConfig()
	cfg.ReplyBuffer = 0 // the middleware's; the proxy never buffers a reply
	cfg.TotalBandwidth, cfg.InitialMaxBandwidth = share.Bandwidth(ShareB), share.Bandwidth(4*ShareB)
	cfg.Alpha, cfg.Period, cfg.StandbyLimit, cfg.MaxDelay = 0.2, sharePeriod, shareStandby, 10*time.Second
	cfg.ClientHeader = "X-Sluice-Client"
	for i, n := range Clients {
		cfg.Clients = append(cfg.Clients, share.ClientConfig{Name: n, Share: Percent[i], HeaderValues: []string{n}})
	}
	return &cfg
}

// Shares runs Li & Jamin's clients through the instances: every client's
// requests spread round robin, the cluster sharing one B of 100 KB/s,
// over the given epochs.
func Shares(ctx context.Context, launch Launcher, epochs []Epoch, seed uint64) (*SharesResult, error) {
	if len(epochs) < 2 {
		return nil, errors.New("figures: the shares figure needs at least two epochs")
	}
	be := testbed.DefaultQueueConfig()
	be.Workers, be.Service, be.Size, be.Seed = 8, "det:1ms", shareSize, seed
	l, err := startLab(ctx, labSpec{launch: launch, n: Instances, period: sharePeriod, initial: Instances,
		backend: be, maxConc: 64, policy: sharesPolicy(), shares: sharesConfig(), prefix: "figures-shares"})
	if err != nil {
		return nil, err
	}
	defer l.Close()
	var length time.Duration
	for _, e := range epochs {
		length += e.Length
	}
	rec := &results{}
	rng := rand.New(rand.NewPCG(seed, 0x4c694a616d696e))
	var loads []loadgen.Config
	for i, name := range Clients {
		off := time.Duration(rng.Float64() / shareRate * float64(time.Second))
		segs := []dist.Segment{{Start: 0, Rate: 0}}
		var t time.Duration
		for _, e := range epochs {
			r := 0.0
			if e.Active[i] {
				r = shareRate
			}
			segs = append(segs, dist.Segment{Start: t + off + 1, Rate: r})
			t += e.Length
		}
		sched, err := dist.NewSchedule(segs...)
		if err != nil {
			return nil, err
		}
		c, err := openLoad("http://"+l.instances[0].Addr, newSpread(hosts(l), nil), 0, length, seed+uint64(i), name, &sched, rec)
		if err != nil {
			return nil, err
		}
		loads = append(loads, c)
	}
	start := time.Now()
	res := &SharesResult{}
	var sampleErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case <-ctx.Done():
			return
		case <-time.After(length - epochs[len(epochs)-1].Length/2):
		}
		// The instances split B each from its own view of the others'
		// demands, read at its own sync, so one moment's parts sum to B
		// only up to the demands' change between syncs: average a few
		// moments, one sync apart.
		res.PerInstanceB = make([]float64, len(l.instances))
		res.AhatRatio = make([]float64, len(l.instances))
		for k := range shareSamples {
			if k > 0 {
				select {
				case <-ctx.Done():
					return
				case <-time.After(sharePeriod):
				}
			}
			for i, in := range l.instances {
				st, err := in.State()
				if err != nil || st.Shares == nil {
					sampleErr = fmt.Errorf("sampling the shares: %v", err)
					return
				}
				res.PerInstanceB[i] += st.Shares.TotalBandwidth / shareSamples
				res.AhatRatio[i] += st.Shares.MaxMeasured / st.Shares.TotalBandwidth / shareSamples
			}
		}
	})
	err = runLoads(ctx, loads...)
	wg.Wait()
	if err := errors.Join(err, sampleErr); err != nil {
		return nil, err
	}
	var from time.Duration
	for _, e := range epochs[:len(epochs)-2] {
		from += e.Length
	}
	recs := rec.all()
	var bytes [4]float64
	for i, n := range Clients {
		bytes[i] = shareSize * float64(count(recs, start.Add(from), start.Add(length), func(r result) bool { return ok(r) && r.client == n }))
	}
	total := bytes[0] + bytes[1] + bytes[2] + bytes[3]
	sq := 0.0
	for i := range Clients {
		actual := bytes[i] / total
		res.Percent[i] = 100 * actual
		sq += (Percent[i]/100 - actual) * (Percent[i]/100 - actual)
	}
	res.AllocationError = math.Sqrt(sq)
	res.TotalRatio = total / (length - from).Seconds() / ShareB
	res.Failed = count(recs, start, start.Add(length+time.Minute), failed)
	if total == 0 {
		return res, errors.New("figures: no reply was delivered")
	}
	return res, nil
}

// ---- a global static rate under an uneven spread --------------------

// StaticResult is the static-rate figure.
type StaticResult struct {
	// Global is R; Offered the offered load (req/s); Spread each
	// instance's fraction of the traffic.
	Global, Offered float64
	Spread          []float64
	// Admitted is the admitted rate of all instances over the measured
	// window (req/s), Ratio = Admitted / R.
	Admitted, Ratio float64
	// Parts are the instances' parts of R at the end (req/s).
	Parts  []float64
	Failed int
}

// StaticUneven offers twice R spread 60/30/10 % over the instances, with
// a global static-rate of R, and measures the admitted total after a
// warm-up of warm.
func StaticUneven(ctx context.Context, launch Launcher, rate float64, warm, measure time.Duration) (*StaticResult, error) {
	l, err := startLab(ctx, labSpec{launch: launch, n: Instances, period: 500 * time.Millisecond, initial: Instances,
		backend: fastBackend(), maxConc: 256, policy: staticPolicy(rate), prefix: "figures-static"})
	if err != nil {
		return nil, err
	}
	defer l.Close()
	rec := &results{}
	weights := []int{6, 3, 1}
	c, err := openLoad("http://"+l.instances[0].Addr, newSpread(hosts(l), weights), 2*rate, warm+measure, 1, "", nil, rec)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	if err := runLoads(ctx, c); err != nil {
		return nil, err
	}
	recs := rec.all()
	res := &StaticResult{Global: rate, Offered: 2 * rate, Spread: []float64{0.6, 0.3, 0.1}}
	res.Admitted = float64(countSent(recs, start.Add(warm), start.Add(warm+measure), ok)) / measure.Seconds()
	res.Ratio = res.Admitted / rate
	res.Failed = count(recs, start, start.Add(warm+measure+time.Minute), failed)
	for _, in := range l.instances {
		st, err := in.State()
		if err != nil {
			return nil, err
		}
		res.Parts = append(res.Parts, st.Stages[0].Setting)
	}
	return res, nil
}

// ---- one instance killed ---------------------------------------------

// KillResult is the figure of an instance killed.
type KillResult struct {
	Global float64
	Period time.Duration
	// Expiry is when the killed instance's heartbeat expired, after the
	// kill; Recovery is when the survivors' admitted total came back
	// within ±5 % of R for good (the start of the first one-period window
	// from which every window is within), after the expiry, also in
	// periods.
	Expiry, Recovery time.Duration
	RecoveryPeriods  float64
	// BeforeRatio is the admitted total over R before the kill; GapRatio
	// between the kill and the expiry; AfterRatio after the recovery.
	BeforeRatio, GapRatio, AfterRatio float64
}

// Kill offers twice R round robin over the instances with a global
// static-rate of R, kills the last instance (SIGKILL) after before, and
// runs on for after.
func Kill(ctx context.Context, launch Launcher, rate float64, before, after time.Duration) (*KillResult, error) {
	period := 500 * time.Millisecond
	l, err := startLab(ctx, labSpec{launch: launch, n: Instances, period: period, initial: Instances,
		backend: fastBackend(), maxConc: 256, policy: staticPolicy(rate), prefix: "figures-kill"})
	if err != nil {
		return nil, err
	}
	defer l.Close()
	rc := redis.NewClient(&redis.Options{Addr: l.redis.Addr})
	defer rc.Close()
	rec := &results{}
	c, err := openLoad("http://"+l.instances[0].Addr, newSpread(hosts(l), nil), 2*rate, before+after, 1, "", nil, rec)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	var killAt, expiry time.Time
	var killErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case <-ctx.Done():
			return
		case <-time.After(before):
		}
		victim := l.instances[len(l.instances)-1]
		killAt = time.Now()
		if killErr = victim.Kill(); killErr != nil {
			return
		}
		v, err := rc.HGet(ctx, "{"+l.prefix+"}:instances", victim.ID).Result()
		if err != nil {
			killErr = fmt.Errorf("reading the killed instance's heartbeat: %w", err)
			return
		}
		ms, _, _ := strings.Cut(v, " ")
		n, err := strconv.ParseInt(ms, 10, 64)
		if err != nil {
			killErr = fmt.Errorf("heartbeat %q: %w", v, err)
			return
		}
		expiry = time.UnixMilli(n)
	})
	loadErr := runLoads(ctx, c)
	wg.Wait()
	if err := errors.Join(loadErr, killErr); err != nil {
		return nil, err
	}
	recs := rec.all()
	end := start.Add(before + after)
	// Admissions are counted when they were decided (sent), not when the
	// reply finished, so that the backend's jitter does not blur them.
	rateIn := func(from, to time.Time) float64 {
		return float64(countSent(recs, from, to, ok)) / to.Sub(from).Seconds()
	}
	res := &KillResult{Global: rate, Period: period, Expiry: expiry.Sub(killAt)}
	res.BeforeRatio = rateIn(start.Add(before/2), killAt) / rate
	res.GapRatio = rateIn(killAt.Add(period), expiry) / rate
	step := 50 * time.Millisecond
	rec0 := time.Time{}
	for t := expiry.Add(-2 * period); !t.Add(period).After(end); t = t.Add(step) {
		if math.Abs(rateIn(t, t.Add(period))/rate-1) <= 0.05 {
			if rec0.IsZero() {
				rec0 = t
			}
		} else {
			rec0 = time.Time{}
		}
	}
	if rec0.IsZero() {
		res.Recovery = end.Sub(expiry)
		res.RecoveryPeriods = math.Inf(1)
		return res, nil
	}
	res.Recovery = rec0.Sub(expiry)
	res.RecoveryPeriods = res.Recovery.Seconds() / period.Seconds()
	res.AfterRatio = rateIn(rec0, end) / rate
	return res, nil
}

// ---- Redis stopped ---------------------------------------------------

// RedisResult is the figure of a Redis outage.
type RedisResult struct {
	Global float64
	Period time.Duration
	Outage time.Duration
	// Failed counts requests that neither succeeded nor were rejected by
	// admission control over the whole run; Requests all of them.
	Failed, Requests int
	// Fallback is the time from the stop until the last instance fell
	// back; Resync from the restart until the last one was synced with
	// every instance again; both by the instances' own mode-change times
	// (cluster.since in /state) and in periods. FallbackSeen and
	// ResyncSeen are the same seen from outside, by polling /state every
	// 20 ms (they add the polling's delay).
	Fallback, Resync               time.Duration
	FallbackPeriods, ResyncPeriods float64
	FallbackSeen, ResyncSeen       time.Duration
	// DuringRatio is the admitted total over R while Redis was down.
	DuringRatio float64
}

// RedisOutage offers twice R round robin with a global static-rate of R,
// stops Redis (SIGKILL, its data lost) after before, starts it again
// after outage, and runs on for after.
func RedisOutage(ctx context.Context, launch Launcher, rate float64, before, outage, after time.Duration) (*RedisResult, error) {
	period := 500 * time.Millisecond
	l, err := startLab(ctx, labSpec{launch: launch, n: Instances, period: period, initial: Instances,
		backend: fastBackend(), maxConc: 256, policy: staticPolicy(rate), prefix: "figures-redis"})
	if err != nil {
		return nil, err
	}
	defer l.Close()
	rec := &results{}
	c, err := openLoad("http://"+l.instances[0].Addr, newSpread(hosts(l), nil), 2*rate, before+outage+after, 1, "", nil, rec)
	if err != nil {
		return nil, err
	}
	res := &RedisResult{Global: rate, Period: period, Outage: outage}
	start := time.Now()
	var stopAt, backAt, fbAt, syncAt, fbSince, syncSince time.Time
	var opErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		sleep := func(d time.Duration) bool {
			select {
			case <-ctx.Done():
				return false
			case <-time.After(d):
				return true
			}
		}
		if !sleep(before) {
			return
		}
		stopAt = time.Now()
		if opErr = l.redis.Kill(); opErr != nil {
			return
		}
		var latest time.Time // the last instance's change of mode
		all := func(f func(mode string, n int) bool) bool {
			latest = time.Time{}
			for _, in := range l.instances {
				st, err := in.State()
				if err != nil || st.Cluster == nil || !f(string(st.Cluster.Mode), st.Cluster.Instances) {
					return false
				}
				if st.Cluster.Since.After(latest) {
					latest = st.Cluster.Since
				}
			}
			return true
		}
		if opErr = waitFor(ctx, outage, "fallback", func() bool { return all(func(m string, _ int) bool { return m == "fallback" }) }); opErr != nil {
			return
		}
		fbAt, fbSince = time.Now(), latest
		if !sleep(time.Until(stopAt.Add(outage))) {
			return
		}
		backAt = time.Now()
		if opErr = l.redis.Restart(); opErr != nil {
			return
		}
		opErr = waitFor(ctx, after, "resync", func() bool {
			return all(func(m string, n int) bool { return m == "synced" && n == Instances })
		})
		syncAt, syncSince = time.Now(), latest
	})
	loadErr := runLoads(ctx, c)
	wg.Wait()
	if err := errors.Join(loadErr, opErr); err != nil {
		return nil, err
	}
	recs := rec.all()
	end := start.Add(before + outage + after + time.Minute)
	res.Requests = count(recs, start, end, func(result) bool { return true })
	res.Failed = count(recs, start, end, failed)
	res.Fallback, res.Resync = fbSince.Sub(stopAt), syncSince.Sub(backAt)
	res.FallbackSeen, res.ResyncSeen = fbAt.Sub(stopAt), syncAt.Sub(backAt)
	res.FallbackPeriods, res.ResyncPeriods = res.Fallback.Seconds()/period.Seconds(), res.Resync.Seconds()/period.Seconds()
	from, to := stopAt.Add(2*period), backAt
	res.DuringRatio = float64(countSent(recs, from, to, ok)) / to.Sub(from).Seconds() / rate
	return res, nil
}

// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/lab/dist"
	"github.com/sluicehq/sluice/lab/loadgen"
	"github.com/sluicehq/sluice/lab/report"
	"github.com/sluicehq/sluice/lab/testbed"
	"github.com/sluicehq/sluice/monitor"
)

// result is one system through one phase.
type result struct {
	sys   system
	phase phase
	// from and to bound the measured window (the event to the end of the
	// load), as offsets from the load's start.
	from, to time.Duration
	recs     []record
	samples  []sample
	// hostBusy is the busy fraction of this machine's CPUs over the
	// window, from /proc/stat (NaN where it cannot be read).
	hostBusy float64
	// capAfter is the nominal capacity after the change, in req/s.
	capAfter float64
}

// metrics are a result's figures over its window, by intended send time.
type metrics struct {
	offered                   int
	goodput                   float64 // answers within slo per second
	p50, p99                  float64 // ms, over answers
	reject, failed            float64 // fractions of the offered: 503/429; timeouts and errors
	cpuFirst, cpuMean, cpuMax float64 // aegis's CPU gauge (‰) at the window's start, mean and max
	limitMean                 float64 // mean in-flight bound
	shedShare                 float64 // share of sample intervals with rejections
}

func (r *result) metrics() metrics {
	var m metrics
	var lat []float64
	good, rej, failed := 0, 0, 0
	for _, q := range r.recs {
		if q.intended < r.from || q.intended >= r.to || q.out == outAborted {
			continue
		}
		m.offered++
		switch q.out {
		case outOK:
			lat = append(lat, float64(q.lat)/float64(time.Millisecond))
			if q.lat <= slo {
				good++
			}
		case outRejected:
			rej++
		default:
			failed++
		}
	}
	m.goodput = float64(good) / (r.to - r.from).Seconds()
	m.p50, m.p99 = monitor.Percentile(lat, 0.5), monitor.Percentile(lat, 0.99)
	m.reject, m.failed = ratio(float64(rej), float64(m.offered)), ratio(float64(failed), float64(m.offered))
	m.cpuFirst, m.cpuMean, m.cpuMax, m.limitMean, m.shedShare = math.NaN(), math.NaN(), math.NaN(), math.NaN(), math.NaN()
	var cpus, limits []float64
	intervals, shed := 0, 0
	prev := math.NaN()
	for _, s := range r.samples {
		if s.t >= r.from && s.t <= r.to {
			cpus, limits = append(cpus, s.cpu), append(limits, s.limit)
			if !math.IsNaN(prev) && !math.IsNaN(s.rejected) {
				intervals++
				if s.rejected > prev {
					shed++
				}
			}
		}
		prev = s.rejected
	}
	if len(cpus) > 0 && !math.IsNaN(cpus[0]) {
		m.cpuFirst, m.cpuMean, m.cpuMax = cpus[0], report.Mean(cpus), slicesMax(cpus)
	}
	if len(limits) > 0 {
		m.limitMean = report.Mean(limits)
	}
	if intervals > 0 {
		m.shedShare = float64(shed) / float64(intervals)
	}
	return m
}

func slicesMax(xs []float64) float64 {
	m := math.Inf(-1)
	for _, x := range xs {
		m = math.Max(m, x)
	}
	return m
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return math.NaN()
	}
	return a / b
}

// runner runs every system through every phase on fresh backends.
type runner struct {
	plan     plan
	seed     uint64
	capacity float64
	// every is the interval at which the front's limiter is sampled.
	every time.Duration
	logf  func(format string, args ...any)
}

// run serves fresh backends, starts the system in front of them, runs the
// phase's load with its change at its time, and stops everything.
func (rn *runner) run(ctx context.Context, sys system, p phase) (res *result, err error) {
	var closers []func() error
	defer func() {
		for i := len(closers) - 1; i >= 0; i-- {
			err = errors.Join(err, closers[i]())
		}
	}()
	var bes []*testbed.Queue
	var urls []string
	for i := range p.backends {
		be, err := newBackend(rn.seed+uint64(i), workers/p.backends)
		if err != nil {
			return nil, err
		}
		closers = append(closers, be.Close)
		srv, err := serve(be)
		if err != nil {
			return nil, err
		}
		closers = append(closers, srv.Close)
		bes, urls = append(bes, be), append(urls, srv.URL)
	}
	f, err := sys.start(ctx, urls)
	if err != nil {
		return nil, err
	}
	closers = append(closers, f.Close)

	length := rn.plan.length(p)
	sched, err := rn.plan.schedule(p, rn.capacity)
	if err != nil {
		return nil, err
	}
	w, err := urlWorkload("bbr-compare-" + p.name)
	if err != nil {
		return nil, err
	}
	rec := &recorder{}
	load := loadgen.Config{Target: f.URL(), Mode: loadgen.ModeOpen, Duration: length, Seed: rn.seed, Timeout: clientTimeout,
		Workload: w, Arrivals: dist.Poisson{Rate: sched}, MaxConns: conns, OnRequest: rec.add}
	res = &result{sys: sys, phase: p, from: rn.plan.at(p), to: length, capAfter: float64(workers) / service.Seconds(), hostBusy: math.NaN()}

	lctx, cancel := context.WithTimeout(ctx, length+grace)
	defer cancel()
	start := time.Now()
	var changeErr error
	if p.name != "a" {
		t := time.AfterFunc(rn.plan.at(p), func() { res.capAfter, changeErr = change(p, bes) })
		defer t.Stop()
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		res.samples, res.hostBusy = rn.sample(f, start, res.from, res.to, stop)
	}()
	progress := time.NewTicker(time.Second)
	defer progress.Stop()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-progress.C:
				now := time.Since(start)
				s := f.Sample()
				ok, rej, failed, p99 := rec.lastSecond(now)
				rn.logf("  %-10s %s %3.0fs/%.0fs  ok %4d/s  rejected %5d/s  failed %4d/s  p99 %7s ms  in flight %4.0f  bound %5.1f  cpu gauge %s  %s",
					sys.name, p.name, now.Seconds(), length.Seconds(), ok, rej, failed, fmtNum(p99, "%.0f"), s.inFlight, s.limit, fmtNum(s.cpu, "%.0f‰"), f.Detail())
			}
		}
	}()
	_, runErr := loadgen.Run(lctx, load)
	close(stop)
	wg.Wait()
	res.recs = rec.records()
	if runErr != nil {
		return nil, fmt.Errorf("%s, phase %s: load: %w", sys.name, p.name, runErr)
	}
	if changeErr != nil {
		return nil, fmt.Errorf("%s, phase %s: change: %w", sys.name, p.name, changeErr)
	}
	return res, nil
}

// sample reads the front every rn.every until stop, and the host's CPU
// counters at the window's start and end.
func (rn *runner) sample(f front, start time.Time, from, to time.Duration, stop <-chan struct{}) ([]sample, float64) {
	t := time.NewTicker(rn.every)
	defer t.Stop()
	var out []sample
	var busy0, total0, busy1, total1 float64
	have0, have1 := false, false
	for {
		select {
		case <-stop:
			if have0 && !have1 {
				busy1, total1, have1 = hostCPU()
			}
			if have0 && have1 && total1 > total0 {
				return out, (busy1 - busy0) / (total1 - total0)
			}
			return out, math.NaN()
		case <-t.C:
		}
		now := time.Since(start)
		s := f.Sample()
		s.t = now
		out = append(out, s)
		if !have0 && now >= from {
			busy0, total0, have0 = hostCPU()
		}
		if !have1 && now >= to {
			busy1, total1, have1 = hostCPU()
		}
	}
}

// hostCPU returns the busy and total jiffies of all CPUs from /proc/stat
// (busy = total − idle − iowait over user … steal), ok false where it
// cannot be read.
func hostCPU() (busy, total float64, ok bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0, false
	}
	var v [8]float64
	for i := range v {
		x, err := strconv.ParseFloat(f[i+1], 64)
		if err != nil {
			return 0, 0, false
		}
		v[i] = x
		total += x
	}
	return total - v[3] - v[4], total, true
}

// loadAvg returns the first field of /proc/loadavg ("" where unreadable).
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

func fmtNum(v float64, format string) string {
	if math.IsNaN(v) {
		return "–"
	}
	return fmt.Sprintf(format, v)
}

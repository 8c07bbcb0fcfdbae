// SPDX-License-Identifier: Apache-2.0

package live

import (
	"math"
	"time"

	"github.com/sluicehq/sluice/lab/loadgen"
	"github.com/sluicehq/sluice/lab/report"
	"github.com/sluicehq/sluice/monitor"
)

// peerWindow summarises the requests sent in a window.
type peerWindow struct {
	seconds                                    float64
	offered, ok, good, rejected, timeouts, err int
	// p50, p90, p99 and mean are over the OK responses (ms), NaN if none.
	p50, p90, p99, mean float64
	// p90Admitted is over every request not rejected (ms): OK responses,
	// errors, and timeouts counted at no less than the client timeout.
	p90Admitted float64
}

// summarizeWindow summarises the records sent (intended) in [from, to):
// good counts OK responses within target. Aborted records are left out.
func summarizeWindow(recs []record, from, to, target, timeout time.Duration) peerWindow {
	w := peerWindow{seconds: (to - from).Seconds()}
	var okLat, admitted []float64
	for i := range recs {
		r := &recs[i]
		if r.intended < from || r.intended >= to || r.out == outAborted {
			continue
		}
		w.offered++
		switch r.out {
		case outOK:
			w.ok++
			okLat = append(okLat, msOf(r.lat))
			admitted = append(admitted, msOf(r.lat))
			if r.lat <= target {
				w.good++
			}
		case outRejected:
			w.rejected++
		case outTimeout:
			w.timeouts++
			admitted = append(admitted, msOf(max(r.lat, timeout)))
		default:
			w.err++
			admitted = append(admitted, msOf(r.lat))
		}
	}
	w.p50, w.p90, w.p99 = monitor.Percentile(okLat, 0.5), monitor.Percentile(okLat, 0.9), monitor.Percentile(okLat, 0.99)
	w.mean = report.Mean(okLat)
	w.p90Admitted = monitor.Percentile(admitted, 0.9)
	return w
}

func (w peerWindow) goodput() float64 { return ratio(float64(w.good), w.seconds) }

func (w peerWindow) throughput() float64 { return ratio(float64(w.ok), w.seconds) }

func (w peerWindow) offeredRate() float64 { return ratio(float64(w.offered), w.seconds) }

func (w peerWindow) rejectFraction() float64 { return ratio(float64(w.rejected), float64(w.offered)) }

// peerBin is one interval of a system's time series: requests offered by
// intended time, the others by completion time.
type peerBin struct {
	t                                  float64
	offered, ok, good, rejected, fails int
	// p90 is over the OK responses, p90Admitted over everything not
	// rejected (timeouts at no less than the client timeout); ms, NaN if
	// none.
	p90, p90Admitted float64
}

// peerBins cuts [0, end) into intervals of width: binRecords' counts and
// p90 (good: OK within target), with the failures together and the p90
// of everything admitted, a timeout counted at no less than timeout.
func peerBins(recs []record, width, end, target, timeout time.Duration) []peerBin {
	bs := binRecords(recs, width, end, target, nil)
	adm := make([][]float64, len(bs))
	for i := range recs {
		r := &recs[i]
		if r.out == outAborted || r.out == outRejected || r.done < 0 {
			continue
		}
		lat := r.lat
		if r.out == outTimeout {
			lat = max(lat, timeout)
		}
		if j := int(r.done / width); j < len(bs) {
			adm[j] = append(adm[j], msOf(lat))
		}
	}
	out := make([]peerBin, len(bs))
	for i, b := range bs {
		out[i] = peerBin{t: b.t, offered: b.offered, ok: b.ok, good: b.good, rejected: b.rejected, fails: b.timeouts + b.errors,
			p90: b.p90, p90Admitted: monitor.Percentile(adm[i], 0.9)}
	}
	return out
}

// peersAnalysis is what analysePeers derived from the runs: every
// system's statistics per window, and its time series in bins of width.
type peersAnalysis struct {
	systems []*peersSystem
	windows []peersWindowRow
	bins    map[string][]peerBin
	width   time.Duration
}

// peersWindowRow is one system's statistics over one window.
type peersWindowRow struct {
	sys      *peersSystem
	name     string
	from, to time.Duration
	w        peerWindow
}

// analysePeers computes the summary's metrics: for each system, goodput,
// throughput, latency percentiles, reject fraction and errors over the
// crowd (no window suffix), before the halving and after it (each from
// tl.settle after its start, by send time); the best static peer and the
// best of sluice's controllers per window; and the run's parameters. It
// returns the windows and bins for the report.
func analysePeers(s *report.Summary, ps *peersSetup, systems []*peersSystem, width time.Duration) *peersAnalysis {
	tl := ps.tl
	an := &peersAnalysis{systems: systems, bins: map[string][]peerBin{}, width: width}
	windows := []struct {
		name     string
		from, to time.Duration
	}{
		{"crowd", tl.from, tl.length},
		{"before", tl.from + tl.settle, tl.half},
		{"after", tl.half + tl.settle, tl.length},
	}
	metric := func(base, window, sys string) string {
		if window == "crowd" {
			return base + "_" + sys
		}
		return base + "_" + window + "_" + sys
	}
	for _, sys := range systems {
		recs := sys.res.recs
		for _, w := range windows {
			st := summarizeWindow(recs, w.from, w.to, peersTarget, peersTimeout)
			an.windows = append(an.windows, peersWindowRow{sys: sys, name: w.name, from: w.from, to: w.to, w: st})
			s.Set(metric("goodput_rps", w.name, sys.name), st.goodput())
			s.Set(metric("throughput_rps", w.name, sys.name), st.throughput())
			s.Set(metric("p50_ms", w.name, sys.name), st.p50)
			s.Set(metric("p90_ms", w.name, sys.name), st.p90)
			s.Set(metric("mean_rt_ms", w.name, sys.name), st.mean)
			s.Set(metric("p90_admitted_ms", w.name, sys.name), st.p90Admitted)
			s.Set(metric("reject_fraction", w.name, sys.name), st.rejectFraction())
			s.Set(metric("errors", w.name, sys.name), float64(st.timeouts+st.err))
		}
		an.bins[sys.name] = peerBins(recs, width, tl.length, peersTarget, peersTimeout)
		// Why the failed requests got no answer (loadgen.FailureKind),
		// over the whole run.
		fails := failureCounts(recs)
		for _, k := range loadgen.FailureKinds {
			s.Set("failed_"+k+"_"+sys.name, float64(fails[k]))
		}
		// The rig's health during the row (rig.go): a row whose clients
		// failed while the host dropped connections at a full accept
		// queue measured the rig, not the system.
		s.Set("rig_cpu_cores_"+sys.name, sys.rig.cores)
		s.Set("listen_overflows_"+sys.name, sys.rig.overflows)
	}
	s.Set("capacity_rps", ps.capacity)
	s.Set("capacity_after_rps", ps.capAfter)
	s.Set("target_ms", msOf(peersTarget))
	s.Set("tref_ms", msOf(peersTarget/3))
	s.Set("client_timeout_ms", msOf(peersTimeout))
	s.Set("nginx_rate_rps", float64(ps.nginxRate))
	s.Set("nginx_burst", float64(ps.burst))
	s.Set("haproxy_maxconn", peersWorkers)
	s.Set("haproxy_queue_timeout_ms", msOf(peersPeerWait))
	s.Set("load_base_rps", 0.6*ps.capacity)
	s.Set("load_crowd_rps", peersCrowd*ps.capacity)
	s.Set("crowd_start_s", tl.from.Seconds())
	s.Set("halving_s", tl.half.Seconds())
	s.Set("length_s", tl.length.Seconds())
	// The field notes' figures: sluice's goodput against the best static
	// peer (the better of nginx and HAProxy in each window), each of
	// sluice's controllers on its own.
	for _, w := range []string{"before", "after"} {
		s.Set("goodput_rps_"+w+"_best_static", math.Max(s.Metric("goodput_rps_"+w+"_nginx"), s.Metric("goodput_rps_"+w+"_haproxy")))
		s.Set("goodput_rps_"+w+"_best_sluice", math.Max(s.Metric("goodput_rps_"+w+"_seda"), s.Metric("goodput_rps_"+w+"_yaksha")))
	}
	return an
}

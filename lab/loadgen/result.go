// SPDX-License-Identifier: Apache-2.0

package loadgen

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Stats are the counts and latency statistics of a set of requests.
// Latency is measured from the intended send time to the end of the
// response body, and only OK (2xx/3xx) responses are latency samples;
// rejections have their own histogram; timeouts, errors and drops are
// counted, never sampled.
type Stats struct {
	Counts
	// P50, P90, P99, P999, Mean and Max describe the latency of OK
	// responses (0 when there were none).
	P50, P90, P99, P999, Mean, Max time.Duration
	// RejectedP50 and RejectedP99 describe the latency of rejections.
	RejectedP50, RejectedP99 time.Duration
	// Latency is the HDR histogram of OK latencies in nanoseconds (1 µs
	// resolution, 3 significant digits). Do not modify it.
	Latency *hdrhistogram.Histogram
	// RejectedLatency is the HDR histogram of rejection latencies (ns).
	RejectedLatency *hdrhistogram.Histogram
}

func statsOf(s *series) Stats {
	q := func(h *hdrhistogram.Histogram, p float64) time.Duration {
		return time.Duration(h.ValueAtQuantile(p))
	}
	st := Stats{Counts: s.Counts, Latency: s.ok, RejectedLatency: s.rej}
	if s.ok.TotalCount() > 0 {
		st.P50, st.P90, st.P99, st.P999 = q(s.ok, 50), q(s.ok, 90), q(s.ok, 99), q(s.ok, 99.9)
		st.Mean = time.Duration(s.ok.Mean())
		st.Max = time.Duration(s.ok.Max())
	}
	if s.rej.TotalCount() > 0 {
		st.RejectedP50, st.RejectedP99 = q(s.rej, 50), q(s.rej, 99)
	}
	return st
}

// Result is the outcome of a run. Rates are per second of Elapsed.
type Result struct {
	// Mode is the loop mode of the run.
	Mode Mode
	// Workload is the workload's name.
	Workload string
	// Seed is the run's seed.
	Seed uint64
	// Elapsed is how long requests were issued: the configured Duration,
	// or the time until the run was cancelled.
	Elapsed time.Duration
	// Interrupted reports that the run was cancelled before Duration.
	Interrupted bool

	// Total covers every request.
	Total Stats
	// ByType, ByClass and ByClient break the requests down by request
	// type, class and client identity. ByClass and ByClient are empty when
	// no classes or clients were configured. Keys beyond a bound (64 types,
	// 32 classes, 64 clients) are folded into "other". Dropped requests
	// never reached a workload session and have type "none".
	ByType, ByClass, ByClient map[string]Stats

	// Series is the total per-second series, one row per second from 0 to
	// the last second with activity.
	Series []Second
	// SeriesByType, SeriesByClass and SeriesByClient are per-key series of
	// the same length.
	SeriesByType, SeriesByClass, SeriesByClient map[string][]Second

	// MaxInflight is the largest number of concurrent open-loop workers
	// (requests in flight) reached.
	MaxInflight int
	// MaxUsers is the largest number of closed-loop users active at once.
	MaxUsers int
	// Thinks and ThinkTotal are the number and sum of think times drawn by
	// closed-loop users (waits before retries are not think times).
	Thinks     int64
	ThinkTotal time.Duration
	// Retries is the number of closed-loop retries after a rejection.
	Retries int64

	// HistogramLog is the per-second HDR interval log of OK latencies (the
	// HdrHistogram log format, values in ns).
	HistogramLog []byte
}

func (r *Result) rate(n int64) float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(n) / r.Elapsed.Seconds()
}

// OfferedRPS is Total.Offered per second of Elapsed.
func (r *Result) OfferedRPS() float64 { return r.rate(r.Total.Offered) }

// CompletedRPS is Total.Completed per second of Elapsed.
func (r *Result) CompletedRPS() float64 { return r.rate(r.Total.Completed) }

// GoodputRPS is Total.OK per second of Elapsed.
func (r *Result) GoodputRPS() float64 { return r.rate(r.Total.OK) }

// ThinkMean is the mean think time drawn by closed-loop users, or 0.
func (r *Result) ThinkMean() time.Duration {
	if r.Thinks == 0 {
		return 0
	}
	return r.ThinkTotal / time.Duration(r.Thinks)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// round3 keeps summary numbers readable (3 decimals).
func round3(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return 0
	}
	return math.Round(x*1000) / 1000
}

// SummaryKey turns a type, class or client name into the form used in
// summary keys: characters other than letters, digits, '_' and '-' become
// '_' ("/a/b" → "_a_b").
func SummaryKey(name string) string {
	b := []byte(name)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	if len(b) == 0 {
		return "_"
	}
	return string(b)
}

// Summary returns the flat summary object written to summary.json:
// "scenario" (the workload name), "mode" and "seed", then numeric metrics
// (see the package documentation for the list), then per-key breakdowns as
// flat keys "type.KEY.METRIC", "class.KEY.METRIC" and "client.KEY.METRIC",
// with KEY passed through SummaryKey.
func (r *Result) Summary() map[string]any {
	m := map[string]any{
		"scenario": r.Workload,
		"mode":     string(r.Mode),
		"seed":     r.Seed,
	}
	t := r.Total
	num := func(k string, v float64) { m[k] = round3(v) }
	num("duration_s", r.Elapsed.Seconds())
	num("requests", float64(t.Offered))
	num("offered", float64(t.Offered))
	num("offered_rps", r.OfferedRPS())
	num("completed", float64(t.Completed))
	num("completed_rps", r.CompletedRPS())
	num("ok", float64(t.OK))
	num("goodput_rps", r.GoodputRPS())
	num("rejected", float64(t.Rejected))
	num("rejected_rps", r.rate(t.Rejected))
	frac := 0.0
	if t.Offered > 0 {
		frac = float64(t.Rejected) / float64(t.Offered)
	}
	num("reject_fraction", frac)
	num("errors", float64(t.Errors))
	num("http_errors", float64(t.HTTPErrors))
	num("transport_errors", float64(t.TransportErrors))
	num("dropped", float64(t.Dropped))
	num("timeouts", float64(t.Timeouts))
	num("aborted", float64(t.Aborted))
	num("bytes", float64(t.Bytes))
	num("bytes_per_s", r.rate(t.Bytes))
	num("p50_ms", ms(t.P50))
	num("p90_ms", ms(t.P90))
	num("p99_ms", ms(t.P99))
	num("p999_ms", ms(t.P999))
	num("mean_ms", ms(t.Mean))
	num("max_ms", ms(t.Max))
	num("rejected_p50_ms", ms(t.RejectedP50))
	num("rejected_p99_ms", ms(t.RejectedP99))
	interrupted := 0.0
	if r.Interrupted {
		interrupted = 1
	}
	num("interrupted", interrupted)
	switch r.Mode {
	case ModeOpen:
		num("inflight_max", float64(r.MaxInflight))
	case ModeClosed:
		num("users_max", float64(r.MaxUsers))
		num("think_mean_ms", ms(r.ThinkMean()))
		num("retries", float64(r.Retries))
	}
	for _, d := range []struct {
		prefix string
		by     map[string]Stats
	}{{"type", r.ByType}, {"class", r.ByClass}, {"client", r.ByClient}} {
		for k, s := range d.by {
			p := d.prefix + "." + SummaryKey(k) + "."
			num(p+"offered", float64(s.Offered))
			num(p+"offered_rps", r.rate(s.Offered))
			num(p+"completed", float64(s.Completed))
			num(p+"ok", float64(s.OK))
			num(p+"goodput_rps", r.rate(s.OK))
			num(p+"rejected", float64(s.Rejected))
			num(p+"errors", float64(s.Errors))
			num(p+"timeouts", float64(s.Timeouts))
			num(p+"dropped", float64(s.Dropped))
			num(p+"bytes", float64(s.Bytes))
			num(p+"p50_ms", ms(s.P50))
			num(p+"p90_ms", ms(s.P90))
			num(p+"p99_ms", ms(s.P99))
		}
	}
	return m
}

// OneLine is the one-line summary printed at the end of a run.
func (r *Result) OneLine() string {
	t := r.Total
	s := fmt.Sprintf("load %s %s %.1fs: offered %.1f/s completed %.1f/s goodput %.1f/s rejected %d errors %d timeouts %d p50 %.1fms p90 %.1fms p99 %.1fms",
		r.Workload, r.Mode, r.Elapsed.Seconds(), r.OfferedRPS(), r.CompletedRPS(), r.GoodputRPS(),
		t.Rejected, t.Errors, t.Timeouts, ms(t.P50), ms(t.P90), ms(t.P99))
	if r.Interrupted {
		s += " (interrupted)"
	}
	return s
}

// WriteDir writes the result files into dir, creating it if needed:
//
//	summary.json              Summary()
//	timeseries.csv            per-second totals
//	timeseries_by_type.csv    per-second rows per request type
//	timeseries_by_class.csv   per class (only with classes)
//	timeseries_by_client.csv  per client (only with clients)
//	latency.hgrm              HDR percentile distribution of OK latencies (ms)
//	latency_rejected.hgrm     the same for rejections (only with rejections)
//	latency.hlog              per-second HDR interval log of OK latencies
//	hgrm/TYPE.KEY.hgrm        OK latency distribution per type/class/client
//
// CSV columns: t_s,[key,]offered,completed,ok,rejected,errors,timeouts,
// dropped,aborted,bytes,p50_ms,p90_ms,p99_ms; percentiles are empty in
// seconds without OK responses.
func (r *Result) WriteDir(dir string) error {
	if err := os.MkdirAll(filepath.Join(dir, "hgrm"), 0o755); err != nil {
		return err
	}
	js, err := json.MarshalIndent(r.Summary(), "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "summary.json"), append(js, '\n'), 0o644); err != nil {
		return err
	}
	if err := writeSeriesCSV(filepath.Join(dir, "timeseries.csv"), "", map[string][]Second{"": r.Series}); err != nil {
		return err
	}
	for _, d := range []struct {
		name string
		s    map[string][]Second
		by   map[string]Stats
	}{{"type", r.SeriesByType, r.ByType}, {"class", r.SeriesByClass, r.ByClass}, {"client", r.SeriesByClient, r.ByClient}} {
		if len(d.s) == 0 {
			continue
		}
		if err := writeSeriesCSV(filepath.Join(dir, "timeseries_by_"+d.name+".csv"), d.name, d.s); err != nil {
			return err
		}
		for k, st := range d.by {
			if st.Latency.TotalCount() == 0 {
				continue
			}
			if err := writeHgrm(filepath.Join(dir, "hgrm", d.name+"."+SummaryKey(k)+".hgrm"), st.Latency); err != nil {
				return err
			}
		}
	}
	if err := writeHgrm(filepath.Join(dir, "latency.hgrm"), r.Total.Latency); err != nil {
		return err
	}
	if r.Total.RejectedLatency != nil && r.Total.RejectedLatency.TotalCount() > 0 {
		if err := writeHgrm(filepath.Join(dir, "latency_rejected.hgrm"), r.Total.RejectedLatency); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(dir, "latency.hlog"), r.HistogramLog, 0o644)
}

func writeHgrm(path string, h *hdrhistogram.Histogram) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	fmt.Fprintf(w, "# latency in ms, measured from the intended send time\n")
	if h.TotalCount() > 0 {
		if _, err := h.PercentilesPrint(w, 5, float64(time.Millisecond)); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func writeSeriesCSV(path, keyCol string, by map[string][]Second) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	head := "t_s,"
	if keyCol != "" {
		head += keyCol + ","
	}
	w.WriteString(head + "offered,completed,ok,rejected,errors,timeouts,dropped,aborted,bytes,p50_ms,p90_ms,p99_ms\n")
	keys := make([]string, 0, len(by))
	for k := range by {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	pct := func(d time.Duration, ok int64) string {
		if ok == 0 {
			return ""
		}
		return strconv.FormatFloat(ms(d), 'f', 3, 64)
	}
	var line []byte
	for _, k := range keys {
		for _, s := range by[k] {
			line = line[:0]
			line = strconv.AppendInt(line, int64(s.T), 10)
			line = append(line, ',')
			if keyCol != "" {
				line = append(line, csvField(k)...)
				line = append(line, ',')
			}
			for _, v := range []int64{s.Offered, s.Completed, s.OK, s.Rejected, s.Errors, s.Timeouts, s.Dropped, s.Aborted, s.Bytes} {
				line = strconv.AppendInt(line, v, 10)
				line = append(line, ',')
			}
			line = append(line, pct(s.P50, s.OK)+","+pct(s.P90, s.OK)+","+pct(s.P99, s.OK)+"\n"...)
			w.Write(line)
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func csvField(s string) string {
	if strings.ContainsAny(s, ",\"\n\r") {
		return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
	}
	return s
}

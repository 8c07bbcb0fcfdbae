// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/lab/reliability"
	"github.com/sluicehq/sluice/lab/tick"
)

// --- slow readers of large responses ------------------------------------------

// slowReadResult is one target of slowread: a proxy in front of the
// large-response backend under slowhttptest -X, with the probe's outcome,
// the backend's workers, and the proxy's memory and temporary files.
type slowReadResult struct {
	Target string              `json:"target"`
	Probe  reliability.Summary `json:"probe"`
	// BaselineRSSMB is the proxy's resident set after the warm-up (10
	// req/s of normal requests for 5 s), before the attack; PeakRSSMB
	// the highest reading, every second of the attack (nginx: master
	// and workers).
	BaselineRSSMB float64 `json:"baseline_rss_mb"`
	PeakRSSMB     float64 `json:"peak_rss_mb"`
	// BudgetMB is sluice's response_buffering.max_memory_bytes;
	// PeakBufferMB, PeakDiskMB and PeakFiles the most memory, temporary
	// file bytes and files its buffers held at a reading.
	BudgetMB       float64 `json:"buffer_budget_mb,omitempty"`
	PeakBufferMB   float64 `json:"peak_buffer_memory_mb,omitempty"`
	PeakDiskMB     float64 `json:"peak_buffer_disk_mb,omitempty"`
	PeakFiles      float64 `json:"peak_buffer_files,omitempty"`
	PeakGoroutines float64 `json:"peak_goroutines,omitempty"`
	// BusyMean and BusyMax are the backend's busy workers (of 16), read
	// every second of the attack; Hold* how long the requests the
	// backend finished during the attack held their worker (service 10
	// ms plus the time the answer took to leave).
	// PeakTCPMB is the host's TCP socket memory (/proc/net/sockstat, every
	// socket: the proxy's, the attack's, the backend's) at its highest.
	PeakTCPMB float64 `json:"peak_tcp_socket_memory_mb"`
	BusyMean  float64 `json:"backend_busy_workers_mean"`
	BusyMax   int     `json:"backend_busy_workers_max"`
	Answered  int     `json:"backend_answers"`
	HoldP50ms float64 `json:"worker_hold_p50_ms"`
	HoldP99ms float64 `json:"worker_hold_p99_ms"`
	HoldMaxMs float64 `json:"worker_hold_max_ms"`
	// After the attack: sluice's open temporary files and their bytes
	// (metrics), descriptors on its temporary directory, and files left
	// in the directory once it stopped.
	FilesAfter   float64 `json:"buffer_files_after"`
	DiskAfterMB  float64 `json:"buffer_disk_mb_after"`
	FDsAfter     int     `json:"temp_fds_after"`
	LeftInTmpDir int     `json:"temp_files_left"`
	// Buffered and Unbuffered are sluice's counters at the end.
	Buffered   map[string]float64 `json:"buffered,omitempty"`
	Unbuffered map[string]float64 `json:"unbuffered,omitempty"`
	Tool       string             `json:"slowhttptest"`
	Error      string             `json:"error,omitempty"`
}

// runSlowRead is the slow-reader figure (docs/reliability.md): 1,000 slow readers (slowhttptest -X,
// window 512–1024 B, 32 B every 5 s, 3 pipelined requests) of 1 MiB
// responses from a backend of 16 workers × 10 ms that holds its worker
// until its answer has left, while normal clients ask for the same at 10
// req/s; against sluice's quick start without flags (response buffering
// on), the same with --response-buffering=false (as before), and nginx.
func runSlowRead() (string, bool, error) {
	if _, err := exec.LookPath("slowhttptest"); err != nil {
		return "", false, fmt.Errorf("slowhttptest not installed (scripts/reliability.sh installs it)")
	}
	const workers, size, rate = 16, 1 << 20, 10
	be, err := reliability.NewLargeBackend(workers, 10*time.Millisecond, size)
	if err != nil {
		return "", false, err
	}
	defer be.Close()
	length := dur(60 * time.Second)
	targets := []string{"sluice", "sluice, no buffering"}
	if opt.nginx {
		targets = append(targets, "nginx")
	}
	var results []slowReadResult
	for _, target := range targets {
		r := slowReadTarget(be, target, length, rate)
		results = append(results, r)
	}
	ok := true
	nginxP99 := math.Inf(1)
	for _, r := range results {
		if r.Target == "nginx" && r.Error == "" {
			nginxP99 = r.Probe.P99ms
		}
	}
	for _, r := range results {
		if r.Target == "sluice" && (r.Error != "" || r.Probe.ServedPct < 99 || r.Probe.P99ms > nginxP99 || r.FilesAfter != 0 ||
			r.FDsAfter != 0 || r.LeftInTmpDir != 0 || r.PeakRSSMB > r.BaselineRSSMB+r.BudgetMB) {
			ok = false
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Backend %d workers × 10 ms, 1 MiB answers (a worker is held until its answer has left); slowhttptest -X, 1,000 connections, %v; probe %d req/s of GET /big from 10 s into the attack to 5 s before its end.\n\n",
		workers, length, rate)
	b.WriteString("| target | normal requests served | p50 | p99 | max | failed | backend busy workers, mean / max | worker hold p99 / max | RSS baseline → peak | buffers: memory peak / budget, disk peak, files | host TCP memory peak | temporary files after |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		if r.Error != "" {
			fmt.Fprintf(&b, "| %s | not run: %s | | | | | | | | | | |\n", r.Target, firstLine(r.Error))
			continue
		}
		bufs, after := "—", "—"
		if strings.HasPrefix(r.Target, "sluice") {
			bufs = fmt.Sprintf("%.1f / %.0f MB, %.0f MB, %.0f", r.PeakBufferMB, r.BudgetMB, r.PeakDiskMB, r.PeakFiles)
			after = fmt.Sprintf("%.0f open, %d descriptors, %d in the directory", r.FilesAfter, r.FDsAfter, r.LeftInTmpDir)
		}
		fmt.Fprintf(&b, "| %s | %.1f %% (%d of %d) | %.0f ms | %.0f ms | %.0f ms | %d | %.1f / %d | %.0f / %.0f ms | %.1f → %.1f MB | %s | %.0f MB | %s |\n",
			r.Target, r.Probe.ServedPct, r.Probe.Served, r.Probe.Requests, r.Probe.P50ms, r.Probe.P99ms, r.Probe.MaxMs, r.Probe.Failed,
			r.BusyMean, r.BusyMax, r.HoldP99ms, r.HoldMaxMs, r.BaselineRSSMB, r.PeakRSSMB, bufs, r.PeakTCPMB, after)
	}
	b.WriteString("\nTargets (sluice's quick start): ≥ 99 % served, p99 no worse than nginx's, RSS within its baseline plus the buffer budget, no temporary file left.")
	writeJSON("slowread", results)
	return b.String(), ok, nil
}

// slowReadTarget runs the attack against one target.
func slowReadTarget(be *reliability.LargeBackend, target string, length time.Duration, rate float64) slowReadResult {
	r := slowReadResult{Target: target}
	tmp := tempDir("slowread-tmp")
	defer os.RemoveAll(tmp)
	var p *reliability.Proc
	var err error
	switch target {
	case "nginx":
		p, err = reliability.StartNginx(tempDir("nginx"), be.URL)
	case "sluice":
		p, err = reliability.StartSluiceEnv(opt.sluice, tempDir("slowread"), be.URL, nil, "", []string{"TMPDIR=" + tmp})
	default:
		p, err = reliability.StartSluiceEnv(opt.sluice, tempDir("slowread"), be.URL, []string{"--response-buffering=false"}, "", []string{"TMPDIR=" + tmp})
	}
	if err != nil {
		r.Error = err.Error()
		return r
	}
	stopped := false
	defer func() {
		if !stopped {
			p.Stop()
		}
	}()
	url := "http://" + p.Addr + "/big"
	reliability.OpenLoop(context.Background(), newClient(10*time.Second), url, rate, dur(5*time.Second)) // warm-up
	time.Sleep(time.Second)
	if v, err := p.RSS(); err == nil {
		r.BaselineRSSMB = mb(float64(v))
	}
	if v, err := p.Metric("proxy_response_buffer_max_bytes"); err == nil {
		r.BudgetMB = mb(v)
	}
	be.Holds()

	var mu sync.Mutex
	var busy []int
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick.Every(stop, time.Second, func() {
			n := be.Busy()
			rss, rerr := p.RSS()
			tcp := tcpMemBytes()
			mu.Lock()
			busy = append(busy, n)
			if rerr == nil {
				r.PeakRSSMB = math.Max(r.PeakRSSMB, mb(float64(rss)))
			}
			r.PeakTCPMB = math.Max(r.PeakTCPMB, mb(tcp))
			mu.Unlock()
			if p.Admin == "" {
				return
			}
			for name, dst := range map[string]*float64{"proxy_response_buffer_bytes": &r.PeakBufferMB,
				"proxy_response_buffer_disk_bytes": &r.PeakDiskMB} {
				if v, err := p.Metric(name); err == nil {
					mu.Lock()
					*dst = math.Max(*dst, mb(v))
					mu.Unlock()
				}
			}
			for name, dst := range map[string]*float64{"proxy_response_buffer_files": &r.PeakFiles, "go_goroutines": &r.PeakGoroutines} {
				if v, err := p.Metric(name); err == nil {
					mu.Lock()
					*dst = math.Max(*dst, v)
					mu.Unlock()
				}
			}
		})
	})
	tag := map[string]string{"sluice": "sluice-buffered", "sluice, no buffering": "sluice-unbuffered", "nginx": "nginx"}[target]
	args := append(strings.Fields(strings.ReplaceAll("-X -w 512 -y 1024 -n 5 -z 32 -k 3 -p 3 -u URL", "URL", url)),
		"-c", "1000", "-r", "200", "-l", fmt.Sprint(int(math.Max(1, length.Seconds()))), "-g", "-o", filepath.Join(opt.out, "slowread-"+tag))
	r.Tool = strings.Join(args, " ")
	tool := exec.Command("slowhttptest", args...)
	logf, _ := os.Create(filepath.Join(opt.out, "slowread-"+tag+".log"))
	tool.Stdout, tool.Stderr = logf, logf
	if err := tool.Start(); err != nil {
		close(stop)
		wg.Wait()
		r.Error = err.Error()
		return r
	}
	time.Sleep(dur(10 * time.Second)) // the attack builds up to its 1,000 connections
	ss := reliability.OpenLoop(context.Background(), newClient(10*time.Second), url, rate, length-dur(15*time.Second))
	_ = tool.Wait()
	if logf != nil {
		logf.Close()
	}
	close(stop)
	wg.Wait()
	r.Probe = reliability.Summarize(ss)
	writeSamples("slowread-"+tag+"-probe.csv", ss)
	holds := be.Holds()
	r.Answered = len(holds)
	sort.Slice(holds, func(i, j int) bool { return holds[i] < holds[j] })
	q := func(f float64) float64 {
		if len(holds) == 0 {
			return 0
		}
		i := max(0, min(len(holds)-1, int(math.Ceil(f*float64(len(holds))))-1))
		return float64(holds[i]) / float64(time.Millisecond)
	}
	r.HoldP50ms, r.HoldP99ms, r.HoldMaxMs = q(0.5), q(0.99), q(1)
	sum := 0
	for _, n := range busy {
		sum += n
		r.BusyMax = max(r.BusyMax, n)
	}
	if len(busy) > 0 {
		r.BusyMean = math.Round(10*float64(sum)/float64(len(busy))) / 10
	}
	if p.Admin != "" {
		time.Sleep(3 * time.Second) // the attack's connections are closed: let the proxy end their requests
		r.FilesAfter, _ = p.Metric("proxy_response_buffer_files")
		if v, err := p.Metric("proxy_response_buffer_disk_bytes"); err == nil {
			r.DiskAfterMB = mb(v)
		}
		r.FDsAfter = fdsIn(p.Pid(), tmp)
		r.Buffered, r.Unbuffered = map[string]float64{}, map[string]float64{}
		for _, w := range []string{"memory", "disk"} {
			r.Buffered[w], _ = p.Metric(`proxy_responses_buffered_total{where="` + w + `"}`)
		}
		for _, w := range []string{"stream", "header", "config", "budget"} {
			r.Unbuffered[w], _ = p.Metric(`proxy_responses_unbuffered_total{reason="` + w + `"}`)
		}
	}
	p.Stop()
	stopped = true
	if ents, err := os.ReadDir(tmp); err == nil {
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), "sluice-resp-") {
				r.LeftInTmpDir++
			}
		}
	}
	return r
}

func mb(bytes float64) float64 { return math.Round(bytes/1e5) / 10 }

// tcpMemBytes returns the host's TCP socket memory from
// /proc/net/sockstat ("TCP: ... mem PAGES"), or 0.
func tcpMemBytes() float64 {
	b, err := os.ReadFile("/proc/net/sockstat")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(l, "TCP:") {
			continue
		}
		f := strings.Fields(l)
		for i := 0; i+1 < len(f); i++ {
			if f[i] == "mem" {
				var pages float64
				if _, err := fmt.Sscan(f[i+1], &pages); err == nil {
					return pages * float64(os.Getpagesize())
				}
			}
		}
	}
	return 0
}

// writeSamples writes a load's samples as CSV: seconds from the first
// intended send, status, latency in ms.
func writeSamples(name string, ss []reliability.Sample) {
	if len(ss) == 0 {
		return
	}
	var b strings.Builder
	b.WriteString("seconds,status,latency_ms\n")
	for _, x := range ss {
		fmt.Fprintf(&b, "%.3f,%d,%.1f\n", x.At.Sub(ss[0].At).Seconds(), x.Status, float64(x.Latency)/float64(time.Millisecond))
	}
	_ = os.WriteFile(filepath.Join(opt.out, name), []byte(b.String()), 0o644)
}

// fdsIn counts process pid's open descriptors on files in dir (an
// unlinked file reads "dir/name (deleted)").
func fdsIn(pid int, dir string) int {
	fdDir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(fdDir)
	if err != nil {
		return -1
	}
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join(fdDir, e.Name())); err == nil && strings.HasPrefix(l, dir+"/") {
			n++
		}
	}
	return n
}

// SPDX-License-Identifier: Apache-2.0

// Command sluice-reliability runs the long forms of sluice's reliability
// suite against the sluice binary, and the same tests against nginx
// (Debian's 1.22, its default limits) for comparison. make reliability
// runs it through scripts/reliability.sh, which installs nginx and
// slowhttptest when they are missing.
//
//	sluice-reliability [flags] TEST...
//
// Tests: corpus (the smuggling corpus, sluice and nginx), slow
// (slowhttptest -H, -B, -R, -X with 1,000 connections beside a probe
// load), slowread (slowhttptest -X against 1 MiB responses of a backend
// of 16 workers × 10 ms, beside 10 req/s of normal requests for them:
// sluice's quick start, the same without response buffering, and nginx),
// stall (a backend that hangs under a constant open-loop rate:
// time from its return to ≥ 99 % served), conns (25,000 connections:
// idle keep-alives, then silent ones), reload (SIGHUP every 2 s under
// load), soak (3× capacity for 10 minutes: failures, RSS, goroutines),
// discard (CPU per refused connection attempt: the policer's kernel
// path, its user-space reset, a 503), all. --scale shortens every duration for a quick check. Results go to
// --out as JSON and as a Markdown table (results.md). Load goes only to
// 127.0.0.1, bounded in time.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/lab/reliability"
	"github.com/sluicehq/sluice/lab/tick"
)

type options struct {
	sluice string
	out    string
	scale  float64
	nginx  bool
	modes  string
	seda   string
}

var opt options

func main() {
	if len(os.Args) == 5 && os.Args[1] == "_flood" {
		os.Exit(flood(os.Args[2], os.Args[3], os.Args[4]))
	}
	flag.StringVar(&opt.sluice, "sluice", "bin/sluice", "the sluice binary")
	flag.StringVar(&opt.out, "out", "out/reliability", "results directory")
	flag.Float64Var(&opt.scale, "scale", 1, "multiply every duration by this (e.g. 0.1 for a quick check; figures need 1)")
	flag.BoolVar(&opt.nginx, "nginx", true, "run the same tests against nginx when it is installed")
	flag.StringVar(&opt.modes, "modes", "default,seda", "stall and soak: sluice modes, comma-separated: default (the quick start with no controller flag), seda")
	flag.StringVar(&opt.seda, "seda", "--controller seda --target-p90 200ms", "the quick-start flags of the seda mode")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: sluice-reliability [flags] corpus|slow|slowread|stall|conns|reload|soak|discard|all ...")
		flag.PrintDefaults()
	}
	flag.Parse()
	tests := flag.Args()
	if len(tests) == 0 {
		flag.Usage()
		os.Exit(2)
	}
	if len(tests) == 1 && tests[0] == "all" {
		tests = []string{"corpus", "slow", "slowread", "stall", "conns", "reload", "soak", "discard"}
	}
	if err := os.MkdirAll(opt.out, 0o755); err != nil {
		fatal(err)
	}
	if _, err := exec.LookPath("nginx"); err != nil {
		if _, serr := os.Stat("/usr/sbin/nginx"); serr != nil && opt.nginx {
			fmt.Fprintln(os.Stderr, "nginx not installed: sluice only")
			opt.nginx = false
		}
	}
	reliability.ChildFDLimit = raiseFDLimit()
	failed := false
	for _, t := range tests {
		fn, ok := map[string]func() (string, bool, error){"corpus": runCorpus, "slow": runSlow, "slowread": runSlowRead, "stall": runStall,
			"conns": runConns, "reload": runReload, "soak": runSoak, "discard": runDiscard}[t]
		if !ok {
			fmt.Fprintf(os.Stderr, "unknown test %q\n", t)
			os.Exit(2)
		}
		fmt.Printf("== %s (scale %g)\n", t, opt.scale)
		table, ok, err := fn()
		if err != nil {
			fatal(fmt.Errorf("%s: %w", t, err))
		}
		fmt.Println(table)
		appendResults(t, table)
		if !ok {
			failed = true
		}
	}
	if failed {
		fmt.Println("some targets were not met (see above)")
		os.Exit(1)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "sluice-reliability:", err)
	os.Exit(1)
}

func dur(d time.Duration) time.Duration { return time.Duration(float64(d) * opt.scale) }

// raiseFDLimit lets this process hold the 25,000 client connections of
// conns (root may raise the hard limit) and returns the limit it had, for
// the processes under test.
func raiseFDLimit() int {
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) != nil {
		return 0
	}
	orig := int(rl.Cur)
	want := uint64(65536)
	if rl.Max < want {
		rl.Max = want
	}
	rl.Cur = rl.Max
	_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl)
	return orig
}

func appendResults(test, table string) {
	f, err := os.OpenFile(filepath.Join(opt.out, "results.md"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "## %s — %s, scale %g\n\n%s\n\n", test, time.Now().UTC().Format(time.RFC3339), opt.scale, table)
}

func writeJSON(name string, v any) {
	b, _ := json.MarshalIndent(v, "", "  ")
	_ = os.WriteFile(filepath.Join(opt.out, name+".json"), b, 0o644)
}

func tempDir(name string) string {
	d, err := os.MkdirTemp("", "sluice-rel-"+name+"-")
	if err != nil {
		fatal(err)
	}
	return d
}

// proxies starts sluice (with args or config) and, if enabled, nginx in
// front of backend.
func proxies(backend string, args []string, config string) ([]*reliability.Proc, error) {
	s, err := reliability.StartSluice(opt.sluice, tempDir("sluice"), backend, args, config)
	if err != nil {
		return nil, err
	}
	out := []*reliability.Proc{s}
	if opt.nginx {
		n, err := reliability.StartNginx(tempDir("nginx"), backend)
		if err != nil {
			s.Stop()
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

func stopAll(ps []*reliability.Proc) {
	for _, p := range ps {
		p.Stop()
	}
}

func newClient(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &http.Transport{MaxIdleConnsPerHost: 4096, MaxIdleConns: 4096}}
}

// --- corpus ---------------------------------------------------------------

func runCorpus() (string, bool, error) {
	rec, err := reliability.NewRecorder()
	if err != nil {
		return "", false, err
	}
	defer rec.Close()
	ps, err := proxies(rec.URL, nil, `listeners: [{addr: ADDR}]
admin: {addr: ADMIN}
backends: {servers: [{url: BACKEND}]}
`)
	if err != nil {
		return "", false, err
	}
	defer stopAll(ps)
	cases := reliability.Corpus()
	res := map[string][]reliability.Outcome{}
	for _, p := range ps {
		// nginx answers some cases only at client_body_timeout (60 s):
		// 5 s without an answer is recorded as none.
		outs, err := reliability.RunCorpus(p.Addr, cases, rec, 8, 5*time.Second, time.Second, 300*time.Millisecond)
		if err != nil {
			return "", false, err
		}
		res[p.Name] = outs
	}
	var b strings.Builder
	b.WriteString("| # | case | sluice answers | sluice forwarded | nginx answers | nginx forwarded | sluice |\n|---|---|---|---|---|---|---|\n")
	ok := true
	passed, stricter := 0, 0
	for i, c := range cases {
		so := res["sluice"][i]
		probs := so.Problems()
		verdict := "pass"
		if len(probs) > 0 {
			verdict, ok = "FAIL: "+strings.Join(probs, "; "), false
		} else {
			passed++
		}
		nAns, nFwd := "—", "—"
		if no, have := res["nginx"]; have {
			nAns, nFwd = fmt.Sprint(no[i].Statuses), fwd(no[i].Forwarded)
			if !subset(so.Forwarded, no[i].Forwarded) {
				verdict += "; forwards what nginx does not"
				ok = false
			} else {
				stricter++
			}
		}
		fmt.Fprintf(&b, "| %d | %s | %v | %s | %s | %s | %s |\n", i, c.Name, so.Statuses, fwd(so.Forwarded), nAns, nFwd, verdict)
	}
	fmt.Fprintf(&b, "\n%d of %d cases pass (only the client's own valid requests reach the backend, malformed bodies 400, no 502)", passed, len(cases))
	if _, have := res["nginx"]; have {
		fmt.Fprintf(&b, "; on %d of %d sluice forwards nothing nginx 1.22 does not", stricter, len(cases))
	}
	writeJSON("corpus", res)
	return b.String(), ok, nil
}

func fwd(f []string) string {
	if len(f) == 0 {
		return "nothing"
	}
	var out []string
	for _, x := range f {
		if len(x) > 40 {
			x = x[:40] + "…"
		}
		out = append(out, strings.NewReplacer("|", "\\|", "\r", `\r`, "\n", `\n`).Replace(x))
	}
	return strings.Join(out, "<br>")
}

// subset reports whether every request of a (by method and path) is in b.
func subset(a, b []string) bool {
	key := func(s string) string {
		s = strings.TrimPrefix(s, "TRUNCATED ")
		f := strings.SplitN(s, " ", 3)
		if len(f) < 2 {
			return s
		}
		return f[0] + " " + f[1]
	}
	in := map[string]bool{}
	for _, x := range b {
		in[key(x)] = true
	}
	for _, x := range a {
		if !in[key(x)] {
			return false
		}
	}
	return true
}

// --- slow clients ------------------------------------------------------------

type slowResult struct {
	Proxy  string              `json:"proxy"`
	Attack string              `json:"attack"`
	Probe  reliability.Summary `json:"probe"`
	Tool   string              `json:"slowhttptest"`
}

func runSlow() (string, bool, error) {
	if _, err := exec.LookPath("slowhttptest"); err != nil {
		return "", false, fmt.Errorf("slowhttptest not installed (scripts/reliability.sh installs it)")
	}
	be, err := reliability.NewSiteBackend()
	if err != nil {
		return "", false, err
	}
	defer be.Close()
	length := dur(60 * time.Second)
	attacks := []struct{ name, flags string }{
		{"slowloris -H", "-H -i 10 -x 24 -p 3 -u URL/"},
		{"slow body -B", "-B -i 10 -s 8192 -x 10 -p 3 -u URL/"},
		{"range -R", "-R -a 10 -b 3000 -u URL/big"},
		{"slow read -X", "-X -w 512 -y 1024 -n 5 -z 32 -k 3 -p 3 -u URL/big"},
	}
	var results []slowResult
	ok := true
	for _, a := range attacks {
		ps, err := proxies(be.URL, strings.Fields(opt.seda), "")
		if err != nil {
			return "", false, err
		}
		for _, p := range ps {
			args := append(strings.Fields(strings.ReplaceAll(a.flags, "URL", "http://"+p.Addr)),
				"-c", "1000", "-r", "200", "-l", fmt.Sprint(int(math.Max(1, length.Seconds()))), "-g", "-o", filepath.Join(opt.out, "slowhttptest-"+p.Name+"-"+a.name[len(a.name)-1:]))
			tool := exec.Command("slowhttptest", args...)
			logf, _ := os.Create(filepath.Join(opt.out, "slowhttptest-"+p.Name+"-"+a.name[len(a.name)-1:]+".log"))
			tool.Stdout, tool.Stderr = logf, logf
			if err := tool.Start(); err != nil {
				stopAll(ps)
				return "", false, err
			}
			time.Sleep(dur(10 * time.Second)) // let the attack build up to its 1,000 connections
			ss := reliability.OpenLoop(context.Background(), newClient(10*time.Second), "http://"+p.Addr+"/", 100, length-dur(15*time.Second))
			_ = tool.Wait()
			logf.Close()
			sum := reliability.Summarize(ss)
			results = append(results, slowResult{Proxy: p.Name, Attack: a.name, Probe: sum, Tool: strings.Join(args, " ")})
			if p.Name == "sluice" && (sum.ServedPct < 99 || sum.P99ms >= 100) {
				ok = false
			}
		}
		stopAll(ps)
	}
	var b strings.Builder
	b.WriteString("| attack (1,000 connections) | proxy | normal requests served | p99 | failed |\n|---|---|---|---|---|\n")
	for _, r := range results {
		fmt.Fprintf(&b, "| %s | %s | %.1f %% | %.0f ms | %d |\n", r.Attack, r.Proxy, r.Probe.ServedPct, r.Probe.P99ms, r.Probe.Failed)
	}
	b.WriteString("\nProbe: 100 req/s of GET / from 10 s into the attack to 5 s before its end; target: ≥ 99 % served with p99 < 100 ms.")
	writeJSON("slow", results)
	return b.String(), ok, nil
}

// --- stall -------------------------------------------------------------------

type stallResult struct {
	Mode     string              `json:"mode"`
	Recovery float64             `json:"recovery_s"` // -1: not within the run
	Rejected int                 `json:"rejected_after_return"`
	During   reliability.Summary `json:"during_stall"`
	After    reliability.Summary `json:"after_return"`
	// ServedAfter is the fraction served in each second after the
	// backend's return (of intended send times; -1: no request).
	ServedAfter []float64 `json:"served_by_second_after_return"`
	Error       string    `json:"error,omitempty"`
	Stall, Rate string
}

func runStall() (string, bool, error) {
	warm, stall, after := dur(20*time.Second), dur(40*time.Second), dur(40*time.Second)
	const rate = 300
	var results []stallResult
	ok := true
	for _, mode := range strings.Split(opt.modes, ",") {
		be, err := reliability.NewCapacityBackend(4, 10*time.Millisecond) // 400 req/s
		if err != nil {
			return "", false, err
		}
		r := stallResult{Mode: mode, Stall: stall.String(), Rate: fmt.Sprint(rate)}
		p, err := reliability.StartSluice(opt.sluice, tempDir("stall"), be.URL, modeArgs(mode), "")
		if err != nil {
			be.Close()
			r.Error, r.Recovery = err.Error(), -1
			results = append(results, r)
			ok = false
			continue
		}
		backc := make(chan time.Time, 1)
		go func() {
			time.Sleep(warm)
			be.Stall()
			time.Sleep(stall)
			backc <- time.Now()
			be.Resume()
		}()
		ss := reliability.OpenLoop(context.Background(), newClient(10*time.Second), "http://"+p.Addr+"/", rate, warm+stall+after)
		back := <-backc
		p.Stop()
		be.Close()
		rec, rej := reliability.Recovery(ss, back, 0.99)
		r.Recovery, r.Rejected = rec.Seconds(), rej
		served, _ := reliability.ServedBySecond(ss, back)
		for _, f := range served {
			r.ServedAfter = append(r.ServedAfter, math.Round(f*1000)/1000)
		}
		var during, afterS []reliability.Sample
		for _, s := range ss {
			switch {
			case s.At.Before(back) && !s.At.Before(back.Add(-stall)):
				during = append(during, s)
			case !s.At.Before(back):
				afterS = append(afterS, s)
			}
		}
		r.During, r.After = reliability.Summarize(during), reliability.Summarize(afterS)
		limit := 2.0
		if mode == "seda" {
			limit = 10
		}
		if rec < 0 || r.Recovery > limit {
			ok = false
		}
		results = append(results, r)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Backend 4 workers × 10 ms (400 req/s), %d req/s open loop, stalled %v after %v.\n\n", rate, stall, warm)
	b.WriteString("| mode | ≥ 99 % served again after the backend's return | 503s after the return | served during the stall | served after the return |\n|---|---|---|---|---|\n")
	for _, r := range results {
		if r.Error != "" {
			fmt.Fprintf(&b, "| %s | not run: %s | | | |\n", r.Mode, firstLine(r.Error))
			continue
		}
		rec := fmt.Sprintf("%.0f s", r.Recovery)
		if r.Recovery < 0 {
			rec = "not within the run"
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %.1f %% | %.1f %% |\n", r.Mode, rec, r.Rejected, r.During.ServedPct, r.After.ServedPct)
	}
	b.WriteString("\nTargets: default mode within 2 s, seda within 10 s (1-second bins of intended send time).")
	writeJSON("stall", results)
	return b.String(), ok, nil
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return s
}

func modeArgs(mode string) []string {
	switch mode {
	case "seda":
		return strings.Fields(opt.seda)
	case "default":
		return nil
	}
	return strings.Fields(mode) // any quick-start flags
}

// --- connection exhaustion -------------------------------------------------

type connsResult struct {
	Proxy      string              `json:"proxy"`
	Flood      string              `json:"flood"`
	Opened     int                 `json:"opened"`
	Refused    int                 `json:"refused"`
	Probe      reliability.Summary `json:"probe"`
	AdminOK    bool                `json:"admin_ok"`
	ConnsAfter float64             `json:"open_after"`
}

func runConns() (string, bool, error) {
	be, err := reliability.NewSiteBackend()
	if err != nil {
		return "", false, err
	}
	defer be.Close()
	n := int(25000 * math.Min(opt.scale, 1))
	var results []connsResult
	ok := true
	for _, flood := range []string{"idle keep-alive", "silent"} {
		ps, err := proxies(be.URL, strings.Fields(opt.seda), "")
		if err != nil {
			return "", false, err
		}
		for _, p := range ps {
			r := connsResult{Proxy: p.Name, Flood: flood}
			stopFlood, held, refused, err := startFlood(p.Addr, n, flood == "idle keep-alive")
			if err != nil {
				stopAll(ps)
				return "", false, err
			}
			r.Opened, r.Refused = held, refused
			ss := reliability.OpenLoop(context.Background(), newClient(5*time.Second), "http://"+p.Addr+"/", 50, dur(10*time.Second))
			r.Probe = reliability.Summarize(ss)
			if p.Admin != "" {
				if resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(p.Admin + "/state"); err == nil {
					resp.Body.Close()
					r.AdminOK = resp.StatusCode == 200
				}
			}
			stopFlood()
			if p.Admin != "" {
				time.Sleep(2 * time.Second)
				r.ConnsAfter, _ = p.Metric("proxy_client_connections_open")
				if !r.AdminOK {
					ok = false
				}
				if flood == "idle keep-alive" && r.Probe.ServedPct < 99 {
					ok = false
				}
			}
			results = append(results, r)
		}
		stopAll(ps)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d connections attempted; then 50 req/s of new clients for %v.\n\n", n, dur(10*time.Second))
	b.WriteString("| flood | proxy | connections held | refused/reset at connect | new clients served | p99 | admin API | open after |\n|---|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		admin := "—"
		if r.Proxy == "sluice" {
			admin = map[bool]string{true: "ok", false: "FAILED"}[r.AdminOK]
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %.1f %% | %.0f ms | %s | %.0f |\n", r.Flood, r.Proxy, r.Opened, r.Refused, r.Probe.ServedPct, r.Probe.P99ms, admin, r.ConnsAfter)
	}
	writeJSON("conns", results)
	return b.String(), ok, nil
}

// startFlood opens n connections to addr from helper processes of
// 12,500 connections each (one process's descriptors would not do), and
// returns a function that closes them all.
func startFlood(addr string, n int, request bool) (stop func(), held, refused int, err error) {
	self, err := os.Executable()
	if err != nil {
		return nil, 0, 0, err
	}
	mode := "silent"
	if request {
		mode = "request"
	}
	var stdins []interface{ Close() error }
	var cmds []*exec.Cmd
	stop = func() {
		for _, in := range stdins {
			in.Close()
		}
		for _, c := range cmds {
			_ = c.Wait()
		}
	}
	for n > 0 {
		k := min(n, 12500)
		n -= k
		cmd := exec.Command(self, "_flood", addr, fmt.Sprint(k), mode)
		in, err := cmd.StdinPipe()
		if err != nil {
			stop()
			return nil, 0, 0, err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			stop()
			return nil, 0, 0, err
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			stop()
			return nil, 0, 0, err
		}
		stdins, cmds = append(stdins, in), append(cmds, cmd)
		var h, r int
		if _, err := fmt.Fscan(out, &h, &r); err != nil {
			stop()
			return nil, 0, 0, fmt.Errorf("flood helper: %w", err)
		}
		held, refused = held+h, refused+r
	}
	return stop, held, refused, nil
}

// flood is the helper process: it opens n connections to addr, prints
// how many it holds and how many were refused, and holds them until its
// standard input closes.
func flood(addr, count, mode string) int {
	raiseFDLimit()
	var n int
	if _, err := fmt.Sscan(count, &n); err != nil {
		return 2
	}
	conns, refused := openMany(addr, n, mode == "request")
	fmt.Println(len(conns), refused)
	_, _ = io.Copy(io.Discard, os.Stdin)
	for _, c := range conns {
		c.Close()
	}
	return 0
}

// openMany opens n connections to addr from 127.0.0.1–127.0.0.8 (for
// source ports); with request, each sends a GET and reads its answer
// first (an idle keep-alive), else it sends nothing.
func openMany(addr string, n int, request bool) ([]net.Conn, int) {
	var mu sync.Mutex
	var conns []net.Conn
	refused := 0
	sem := make(chan struct{}, 256)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(1+i%8))}}
			c, err := d.Dial("tcp", addr)
			if err == nil && request {
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				if _, err = c.Write([]byte("GET / HTTP/1.1\r\nHost: a\r\n\r\n")); err == nil {
					buf := make([]byte, 512)
					_, err = c.Read(buf)
				}
				_ = c.SetDeadline(time.Time{})
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				refused++
				if c != nil {
					c.Close()
				}
				return
			}
			conns = append(conns, c)
		})
	}
	wg.Wait()
	return conns, refused
}

// --- reload under load --------------------------------------------------------

func runReload() (string, bool, error) {
	be, err := reliability.NewCapacityBackend(4, 10*time.Millisecond)
	if err != nil {
		return "", false, err
	}
	defer be.Close()
	p, err := reliability.StartSluice(opt.sluice, tempDir("reload"), be.URL, nil, `listeners: [{addr: ADDR}]
admin: {addr: ADMIN}
backends: {servers: [{url: BACKEND}]}
stages:
  - name: all
    match: {path_prefix: /}
    controller: seda
    params: {target: 200ms, rate_max: 1000000, initial_rate: 1000000}
`)
	if err != nil {
		return "", false, err
	}
	defer p.Stop()
	length := dur(60 * time.Second)
	stop := make(chan struct{})
	reloads := 0
	go func() {
		tick.Every(stop, 2*time.Second, func() {
			if p.Signal(syscall.SIGHUP) == nil {
				reloads++
			}
		})
	}()
	ss := reliability.OpenLoop(context.Background(), newClient(10*time.Second), "http://"+p.Addr+"/", 600, length)
	close(stop)
	sum := reliability.Summarize(ss)
	version, _ := p.Metric("proxy_config_version")
	table := fmt.Sprintf("| load | reloads (SIGHUP) | config version | served | 503 | failed |\n|---|---|---|---|---|---|\n| 600 req/s for %v (1.5× capacity) | %d | %.0f | %d | %d | %d |",
		length, reloads, version, sum.Served, sum.Rejected, sum.Failed)
	writeJSON("reload", sum)
	return table, sum.Failed == 0, nil
}

// --- soak ---------------------------------------------------------------------

type soakResult struct {
	Mode          string              `json:"mode"`
	Load          reliability.Summary `json:"load"`
	RSS2, RSS10   float64             `json:"-"`
	RSSGrowthPct  float64             `json:"rss_growth_pct"` // minute 2 to the end
	GoroutinesPre float64             `json:"goroutines_before"`
	GoroutinesMax float64             `json:"goroutines_peak"`
	BackAfter     float64             `json:"goroutines_back_after_s"` // -1: not within 2 minutes
	// RSSMB and HeapMB are the proxy's resident set and Go heap in use
	// (go_memstats_heap_inuse_bytes), in MB, every 10 s of the load: a
	// growing heap is a leak, a growing RSS over a flat heap is the
	// runtime's and the allocator's.
	RSSMB  []float64 `json:"rss_mb_every_10s"`
	HeapMB []float64 `json:"heap_inuse_mb_every_10s"`
	Error  string    `json:"error,omitempty"`
}

func runSoak() (string, bool, error) {
	length := dur(10 * time.Minute)
	var results []soakResult
	ok := true
	for _, mode := range strings.Split(opt.modes, ",") {
		be, err := reliability.NewCapacityBackend(4, 10*time.Millisecond) // 400 req/s
		if err != nil {
			return "", false, err
		}
		r := soakResult{Mode: mode}
		p, err := reliability.StartSluice(opt.sluice, tempDir("soak"), be.URL, modeArgs(mode), "")
		if err != nil {
			be.Close()
			r.Error = err.Error()
			results = append(results, r)
			ok = false
			continue
		}
		r.GoroutinesPre, _ = p.Metric("go_goroutines")
		var mu sync.Mutex
		var rss []float64 // one per 10 s
		stop := make(chan struct{})
		go func() {
			tick.Every(stop, 10*time.Second, func() {
				v, err := p.RSS()
				g, _ := p.Metric("go_goroutines")
				h, herr := p.Metric("go_memstats_heap_inuse_bytes")
				mu.Lock()
				if err == nil {
					rss = append(rss, float64(v))
					r.RSSMB = append(r.RSSMB, math.Round(float64(v)/1e5)/10)
				}
				if herr == nil {
					r.HeapMB = append(r.HeapMB, math.Round(h/1e5)/10)
				}
				r.GoroutinesMax = math.Max(r.GoroutinesMax, g)
				mu.Unlock()
			})
		}()
		c := newClient(10 * time.Second)
		ss := reliability.OpenLoop(context.Background(), c, "http://"+p.Addr+"/", 1200, length)
		c.Transport.(*http.Transport).CloseIdleConnections() // the clients leave
		close(stop)
		r.Load = reliability.Summarize(ss)
		mu.Lock()
		if len(rss) >= 3 {
			from := min(len(rss)-1, int(dur(2*time.Minute)/(10*time.Second)))
			r.RSS2, r.RSS10 = rss[from], rss[len(rss)-1]
			r.RSSGrowthPct = 100 * (r.RSS10 - r.RSS2) / r.RSS2
		}
		mu.Unlock()
		r.BackAfter = -1
		end := time.Now()
		for time.Since(end) < 2*time.Minute {
			if g, err := p.Metric("go_goroutines"); err == nil && g <= r.GoroutinesPre+5 {
				r.BackAfter = time.Since(end).Seconds()
				break
			}
			time.Sleep(time.Second)
		}
		p.Stop()
		be.Close()
		if r.Load.Failed > 0 || math.Abs(r.RSSGrowthPct) > 5 || r.BackAfter < 0 {
			ok = false
		}
		results = append(results, r)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Backend 4 workers × 10 ms (400 req/s), 1200 req/s (3×) open loop for %v.\n\n", length)
	b.WriteString("| mode | requests | served | 503 | failed | RSS minute 2 → end | goroutines before / peak | back to baseline after |\n|---|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		if r.Error != "" {
			fmt.Fprintf(&b, "| %s | not run: %s | | | | | | |\n", r.Mode, firstLine(r.Error))
			continue
		}
		back := fmt.Sprintf("%.0f s", r.BackAfter)
		if r.BackAfter < 0 {
			back = "not within 2 min"
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %.1f → %.1f MB (%+.1f %%) | %.0f / %.0f | %s |\n", r.Mode, r.Load.Requests, r.Load.Served,
			r.Load.Rejected, r.Load.Failed, r.RSS2/1e6, r.RSS10/1e6, r.RSSGrowthPct, r.GoroutinesPre, r.GoroutinesMax, back)
	}
	b.WriteString("\nTargets: 0 failures beyond explicit 503s, RSS within 5 % between minute 2 and the end, goroutines back to baseline within 2 minutes.")
	writeJSON("soak", results)
	return b.String(), ok, nil
}

package live

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/dist"
	"github.com/sluicehq/sluice/figure"
	"github.com/sluicehq/sluice/loadgen"
	"github.com/sluicehq/sluice/monitor"
	"github.com/sluicehq/sluice/policy"
	"github.com/sluicehq/sluice/report"
	"github.com/sluicehq/sluice/testbed"
)

// peers puts sluice next to the tools operators use today, on this
// machine: the same open-loop overload (a flash crowd at ten times the
// backend's capacity (peersCrowd), and in the middle of it the backend's capacity
// halved) against no admission control, nginx's limit_req set at the
// measured capacity, HAProxy's per-server maxconn with a queue timeout,
// and sluice's adaptive SEDA and Yaksha stages. nginx and HAProxy run as
// child processes in the foreground with configurations generated in a
// temporary directory, on free loopback ports, and are stopped at the end
// (and on Ctrl-C). When they are missing, the experiment installs the
// Debian packages if it runs as root and otherwise says how to.
//
// The point is the capacity change. A static rate (limit_req) tuned for
// the first capacity admits twice what the backend can do once it slows
// down, and its backlog grows until every answer misses the client's
// timeout; a concurrency limit (maxconn) follows the capacity but keeps a
// standing queue as long as its queue timeout; the adaptive controllers
// measure response times and follow the change without being told the
// capacity.

// The backend and the targets of the peers experiment. The backend is
// the queue testbed with peersWorkers FIFO servers of exponential service
// of mean peersService (peersWorkers/peersService = 400 req/s), which
// doubles at the capacity change.
const (
	peersWorkers = 4
	peersService = 10 * time.Millisecond
	// peersTarget is the response-time target: SEDA's p90 target (as in
	// the demo), three times Yaksha's Tref, and the latency a request must
	// meet to count as goodput.
	peersTarget = 250 * time.Millisecond
	// peersPeerWait is the longest time nginx (burst/rate) and HAProxy
	// (timeout queue) make a request wait before the backend: half the
	// target, so that a delayed request still answers within it.
	peersPeerWait = peersTarget / 2
	// peersTimeout is the client timeout.
	peersTimeout = 2 * time.Second
	// peersProxyConns bounds the sluice proxy's upstream connections (it
	// never binds: the controllers are the only control).
	peersProxyConns = 2048
	// peersClientConns bounds the load generator's connections. At 10×
	// capacity a system that holds requests for up to peersPeerWait has
	// about 10·capacity·peersPeerWait ≈ 500 in flight; with loadgen's
	// default of 256 the load generator itself would become the queue.
	peersClientConns = 2048
	// peersCrowd is the crowd's offered load in multiples of the measured
	// capacity (the field notes compare the peers at 10× capacity).
	peersCrowd = 10.0
	// peersInstallTimeout bounds each apt-get command.
	peersInstallTimeout = 5 * time.Minute
)

// peersSystems are the systems compared, in order; the names are the
// suffixes of the summary's metrics.
var peersSystems = []struct{ name, label string }{
	{"uncontrolled", "no control (sluice proxy, controller none)"},
	{"nginx", "nginx limit_req at the measured capacity"},
	{"haproxy", "HAProxy maxconn + timeout queue"},
	{"seda", "sluice seda (p90 target)"},
	{"yaksha", "sluice yaksha (mean target)"},
}

func peers() Experiment {
	return Experiment{
		Name: "peers",
		Run:  runPeers,
	}
}

// peersTimeline is the shape of one run: the base load until from, the
// crowd from from to length, the capacity halved at half; each window is
// measured from settle after its start.
type peersTimeline struct {
	from, half, length, settle, capLength time.Duration
}

func peersTimelineFor(env *Env) peersTimeline {
	return pick(env,
		peersTimeline{from: 4 * time.Second, half: 16 * time.Second, length: 30 * time.Second, settle: 2 * time.Second, capLength: 2 * time.Second},
		peersTimeline{from: time.Second, half: 5 * time.Second, length: 9 * time.Second, settle: time.Second, capLength: 1500 * time.Millisecond})
}

// peersSEDAPolicy is the seda stage: the p90 target, a run every 250 ms
// or 100 samples, an additive increase of 2% of the capacity (the tuning
// notes' advice) and the measured capacity as its initial rate: what
// nginx's limit_req is told, and what the demo does. Without it the stage
// admits everything in the crowd's first run, a backlog of seconds at 10×
// that no later cut can undo (a full run measured 35 req/s within the
// target before the halving, against nginx's 387).
func peersSEDAPolicy(capacity float64) policy.Config {
	return mainPolicy("seda", params{"target": peersTarget, "timeout": 250 * time.Millisecond,
		"initial_rate": math.Round(capacity), "adj_i": math.Max(1, math.Round(0.02*capacity))})
}

// peersYakshaPolicy is the self-tuning yaksha stage with Tref a third of
// the target (the demo's parameters).
func peersYakshaPolicy() policy.Config {
	return mainPolicy("yaksha", params{"tref": peersTarget / 3, "period": 250 * time.Millisecond, "pole": -1.0,
		"tune_window": 2 * time.Second})
}

// ---- the external programs ----

// peerTool is an external program the experiment runs and the Debian
// package that provides it.
type peerTool struct{ name, pkg string }

var peerTools = []peerTool{{"nginx", "nginx"}, {"haproxy", "haproxy"}}

// peerSbinDirs are searched after PATH, which often lacks the sbin
// directories for ordinary users.
var peerSbinDirs = []string{"/usr/sbin", "/usr/local/sbin", "/sbin"}

// findPeerTool returns the path of the named program: lookPath(name)
// (PATH), else the first of dirs/name that lookPath accepts.
func findPeerTool(name string, lookPath func(string) (string, error), dirs []string) (string, bool) {
	if p, err := lookPath(name); err == nil {
		return p, true
	}
	for _, d := range dirs {
		if p, err := lookPath(filepath.Join(d, name)); err == nil {
			return p, true
		}
	}
	return "", false
}

// planPeerInstall decides what to do about missing programs: nothing when
// none is missing; as root (euid 0) with apt-get (its path, "" when
// absent), the apt-get commands to run; otherwise an error saying exactly
// how to install them.
func planPeerInstall(missing []peerTool, euid int, aptGet string) ([][]string, error) {
	if len(missing) == 0 {
		return nil, nil
	}
	var names, pkgs []string
	for _, t := range missing {
		names = append(names, t.name)
		if !slices.Contains(pkgs, t.pkg) {
			pkgs = append(pkgs, t.pkg)
		}
	}
	what := fmt.Sprintf("the peers experiment runs %s, not found in PATH or %s", strings.Join(names, " and "), strings.Join(peerSbinDirs, ", "))
	if aptGet == "" {
		return nil, fmt.Errorf("%s, and apt-get is not available to install them: install the packages providing %s with this system's package manager (on Debian and Ubuntu: apt-get install -y %s) and run the experiment again",
			what, strings.Join(names, " and "), strings.Join(pkgs, " "))
	}
	if euid != 0 {
		return nil, fmt.Errorf("%s; install them with\n    sudo apt-get update && sudo apt-get install -y %s\nand run the experiment again (run as root, it installs them itself)",
			what, strings.Join(pkgs, " "))
	}
	install := []string{aptGet, "install", "-y", "-q", "--no-install-recommends",
		"-o", "Dpkg::Options::=--force-confdef", "-o", "Dpkg::Options::=--force-confold"}
	return [][]string{{aptGet, "update", "-q"}, append(install, pkgs...)}, nil
}

// ensurePeerTools finds nginx and haproxy, installing them first when
// planPeerInstall says so, and returns their paths by name.
func ensurePeerTools(ctx context.Context, env *Env) (map[string]string, error) {
	find := func() (map[string]string, []peerTool) {
		found := map[string]string{}
		var missing []peerTool
		for _, t := range peerTools {
			if p, ok := findPeerTool(t.name, exec.LookPath, peerSbinDirs); ok {
				found[t.name] = p
			} else {
				missing = append(missing, t)
			}
		}
		return found, missing
	}
	found, missing := find()
	if len(missing) == 0 {
		return found, nil
	}
	aptGet, _ := findPeerTool("apt-get", exec.LookPath, []string{"/usr/bin", "/bin"})
	cmds, err := planPeerInstall(missing, os.Geteuid(), aptGet)
	if err != nil {
		return nil, err
	}
	for _, argv := range cmds {
		if err := runInstallStep(ctx, env, argv); err != nil {
			return nil, err
		}
	}
	found, missing = find()
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s still not found in PATH or %s after installing", missing[0].name, strings.Join(peerSbinDirs, ", "))
	}
	return found, nil
}

// runInstallStep runs one apt-get command non-interactively, at most
// peersInstallTimeout, with a progress line every 10 s.
func runInstallStep(ctx context.Context, env *Env, argv []string) error {
	env.Phasef("installing: %s (non-interactive, at most %v)", strings.Join(argv, " "), peersInstallTimeout)
	ictx, cancel := context.WithTimeout(ctx, peersInstallTimeout)
	defer cancel()
	cmd := exec.CommandContext(ictx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive", "APT_LISTCHANGES_FRONTEND=none")
	out := newTailBuffer(8 << 10)
	cmd.Stdout, cmd.Stderr = out, out
	// Interrupt apt-get first: killing it in the middle of dpkg leaves the
	// package database locked.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 30 * time.Second
	start := time.Now()
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: %w", argv[0], err)
	}
	go func() { done <- cmd.Wait() }()
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err != nil {
				return fmt.Errorf("%s failed after %v: %w; its last output:\n%s", strings.Join(argv, " "),
					time.Since(start).Round(time.Second), err, out.String())
			}
			env.Logf("done in %v", time.Since(start).Round(100*time.Millisecond))
			return nil
		case <-tick.C:
			env.Logf("still running (%v): %s", time.Since(start).Round(time.Second), lastLine(out.String()))
		}
	}
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}

// tailBuffer keeps the last max bytes written to it. It is safe for
// concurrent use.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func newTailBuffer(max int) *tailBuffer { return &tailBuffer{max: max} }

// Write appends p, dropping the oldest bytes beyond the limit. It never
// fails.
func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

// String returns the bytes kept.
func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// nginxConf is the generated nginx configuration: one worker, a global
// limit_req zone at Rate with Burst, reverse-proxying to Backend.
type nginxConf struct {
	// Dir is the absolute prefix directory: pid file and temporary paths.
	Dir string
	// Listen and the Backends are host:port addresses (round-robin, nginx's
	// default, over several).
	Listen   string
	Backends []string
	// Rate is limit_req's rate in requests per second (≥ 1).
	Rate int
	// Burst is limit_req's burst (≥ 0): requests beyond the rate wait, up
	// to Burst/Rate seconds, instead of being refused.
	Burst int
	// TempPaths are the *_temp_path directives to point into Dir (those
	// of the modules compiled in; see nginxTempDirectives).
	TempPaths []string
}

// Validate reports the first invalid field, naming it and its value.
func (c nginxConf) Validate() error {
	switch {
	case !filepath.IsAbs(c.Dir):
		return fmt.Errorf("nginx configuration: Dir=%q: want an absolute path", c.Dir)
	case strings.ContainsAny(c.Dir, "\"\\\n;{}"):
		return fmt.Errorf("nginx configuration: Dir=%q: contains a character nginx's configuration cannot hold", c.Dir)
	case c.Rate < 1:
		return fmt.Errorf("nginx configuration: Rate=%d: want at least 1 req/s", c.Rate)
	case c.Burst < 0:
		return fmt.Errorf("nginx configuration: Burst=%d: want ≥ 0", c.Burst)
	}
	return checkHostPorts("nginx", c.Listen, c.Backends)
}

// checkHostPorts reports the first of listen and backends (at least one)
// that is not host:port, naming it.
func checkHostPorts(prog, listen string, backends []string) error {
	if len(backends) == 0 {
		return fmt.Errorf("%s configuration: Backends=%q: want at least one host:port", prog, backends)
	}
	if _, _, err := net.SplitHostPort(listen); err != nil {
		return fmt.Errorf("%s configuration: Listen=%q: want host:port: %v", prog, listen, err)
	}
	for i, b := range backends {
		if _, _, err := net.SplitHostPort(b); err != nil {
			return fmt.Errorf("%s configuration: Backends[%d]=%q: want host:port: %v", prog, i, b, err)
		}
	}
	return nil
}

// Text returns the configuration file.
func (c nginxConf) Text() string {
	var b strings.Builder
	path := func(name string) string { return strconv.Quote(filepath.Join(c.Dir, name)) }
	fmt.Fprintf(&b, "# Generated by sluice experiment peers.\nworker_processes 1;\npid %s;\nerror_log stderr error;\n", path("nginx.pid"))
	b.WriteString("events {\n    worker_connections 4096;\n}\nhttp {\n    access_log off;\n")
	for _, d := range c.TempPaths {
		fmt.Fprintf(&b, "    %s %s;\n", d, path(strings.TrimSuffix(d, "_path")))
	}
	fmt.Fprintf(&b, `    limit_req_zone $server_name zone=sluice_peers:1m rate=%dr/s;
    limit_req_status 503;
    limit_req_log_level warn;
    upstream backend {
%s        keepalive 64;
    }
    server {
        listen %s;
        server_name sluice-peers;
        location / {
            limit_req zone=sluice_peers burst=%d;
            proxy_pass http://backend;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }
    }
}
`, c.Rate, nginxServers(c.Backends), c.Listen, c.Burst)
	return b.String()
}

// nginxServers returns the upstream block's server lines.
func nginxServers(backends []string) string {
	var b strings.Builder
	for _, s := range backends {
		fmt.Fprintf(&b, "        server %s;\n", s)
	}
	return b.String()
}

// nginxTempDirectives returns the temporary-path directives to set for an
// nginx built with configureArgs (the output of nginx -V): those of the
// core and the proxy module always, the others unless compiled out.
// Every one must be set, or nginx, not running as root, fails to create
// its compiled-in /var/lib/nginx paths.
func nginxTempDirectives(configureArgs string) []string {
	out := []string{"client_body_temp_path", "proxy_temp_path"}
	for _, m := range []string{"fastcgi", "uwsgi", "scgi"} {
		if !strings.Contains(configureArgs, "--without-http_"+m+"_module") {
			out = append(out, m+"_temp_path")
		}
	}
	return out
}

// haproxyConf is the generated HAProxy configuration: one frontend, one
// server limited to MaxConn concurrent requests, a queue for the others
// of at most QueueTimeout.
type haproxyConf struct {
	// Listen and the Backends are host:port addresses (round-robin,
	// HAProxy's default, over several).
	Listen   string
	Backends []string
	// MaxConn is each server's maxconn (≥ 1).
	MaxConn int
	// QueueTimeout is timeout queue (≥ 1 ms): a request waiting longer
	// for a server slot is answered 503.
	QueueTimeout time.Duration
	// IdleTimeout is timeout client and timeout server (≥ 1 ms).
	IdleTimeout time.Duration
}

// Validate reports the first invalid field, naming it and its value.
func (c haproxyConf) Validate() error {
	switch {
	case c.MaxConn < 1:
		return fmt.Errorf("haproxy configuration: MaxConn=%d: want at least 1", c.MaxConn)
	case c.QueueTimeout < time.Millisecond:
		return fmt.Errorf("haproxy configuration: QueueTimeout=%v: want at least 1ms", c.QueueTimeout)
	case c.IdleTimeout < time.Millisecond:
		return fmt.Errorf("haproxy configuration: IdleTimeout=%v: want at least 1ms", c.IdleTimeout)
	}
	return checkHostPorts("haproxy", c.Listen, c.Backends)
}

// Text returns the configuration file.
func (c haproxyConf) Text() string {
	ms := func(d time.Duration) string { return fmt.Sprintf("%dms", d.Milliseconds()) }
	return fmt.Sprintf(`# Generated by sluice experiment peers.
global
    maxconn 4096
    nbthread 1

defaults
    mode http
    timeout connect 5s
    timeout client %s
    timeout server %s
    timeout queue %s

frontend sluice_peers
    bind %s
    maxconn 4096
    default_backend app

backend app
%s`, ms(c.IdleTimeout), ms(c.IdleTimeout), ms(c.QueueTimeout), c.Listen, haproxyServers(c.Backends, c.MaxConn))
}

// haproxyServers returns the backend's server lines.
func haproxyServers(backends []string, maxConn int) string {
	var b strings.Builder
	for i, s := range backends {
		fmt.Fprintf(&b, "    server app%d %s maxconn %d\n", i+1, s, maxConn)
	}
	return b.String()
}

// peerProcPrepare and peerProcSignal are the platform's process handling:
// on Linux (peers_linux.go) the child gets its own process group, which
// is signalled as a whole (nginx's workers too), and is sent SIGTERM if
// sluice dies first. Elsewhere only the child itself is signalled.
var (
	peerProcPrepare = func(*exec.Cmd) {}
	peerProcSignal  = func(p *os.Process, sig syscall.Signal) error { return p.Signal(sig) }
)

// peerProc is nginx or HAProxy running as a child process in the
// foreground.
type peerProc struct {
	name string
	// URL is the base URL it serves.
	URL    string
	cmd    *exec.Cmd
	output *tailBuffer
	done   chan struct{}
	err    error // cmd.Wait's, once done is closed
	once   sync.Once
}

// startPeerProc picks a free loopback port, calls conf(port), which
// writes the program's configuration for listening on 127.0.0.1:port and
// returns its command line, starts the program and waits until it
// answers. A port taken in the meantime is retried with another, at most
// three times.
func startPeerProc(ctx context.Context, name string, conf func(port int) ([]string, error)) (*peerProc, error) {
	var lastErr error
	for range 3 {
		port, err := freeLoopbackPort()
		if err != nil {
			return nil, err
		}
		argv, err := conf(port)
		if err != nil {
			return nil, err
		}
		p, err := launchPeerProc(ctx, name, argv, fmt.Sprintf("http://127.0.0.1:%d", port))
		if err == nil {
			return p, nil
		}
		lastErr = err
		if !strings.Contains(err.Error(), "in use") {
			break
		}
	}
	return nil, lastErr
}

// freeLoopbackPort returns a port free on 127.0.0.1 a moment ago.
func freeLoopbackPort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	return port, ln.Close()
}

func launchPeerProc(ctx context.Context, name string, argv []string, url string) (*peerProc, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	out := newTailBuffer(16 << 10)
	cmd.Stdout, cmd.Stderr = out, out
	peerProcPrepare(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", strings.Join(argv, " "), err)
	}
	p := &peerProc{name: name, URL: url, cmd: cmd, output: out, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{Proxy: nil}}
	defer client.CloseIdleConnections()
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-p.done:
			return nil, fmt.Errorf("%s exited before serving (%v); command: %s; its output:\n%s", name, p.err,
				strings.Join(argv, " "), strings.TrimSpace(out.String()))
		default:
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/", nil)
		if err != nil {
			return nil, errors.Join(err, p.Close())
		}
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			return p, nil
		}
		if ctx.Err() != nil {
			return nil, errors.Join(ctx.Err(), p.Close())
		}
		if time.Now().After(deadline) {
			return nil, errors.Join(fmt.Errorf("%s did not answer at %s within 10s; its output:\n%s", name, url, out.String()), p.Close())
		}
		select {
		case <-ctx.Done():
		case <-p.done:
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Close stops the program: SIGTERM to it (and, on Linux, its workers),
// SIGKILL after 5 s. It returns an error only when it had to kill.
// Close is idempotent.
func (p *peerProc) Close() error {
	var err error
	p.once.Do(func() {
		select {
		case <-p.done:
			return
		default:
		}
		_ = peerProcSignal(p.cmd.Process, syscall.SIGTERM)
		select {
		case <-p.done:
			return
		case <-time.After(5 * time.Second):
		}
		_ = peerProcSignal(p.cmd.Process, syscall.SIGKILL)
		<-p.done
		err = fmt.Errorf("%s did not stop within 5s of SIGTERM; killed", p.name)
	})
	return err
}

// peerVersion returns the first line a program prints for its version
// flag ("" if it fails).
func peerVersion(ctx context.Context, argv ...string) string {
	vctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(vctx, argv[0], argv[1:]...).CombinedOutput()
	return strings.TrimSpace(string(out))
}

// ---- the backend ----

// capacityStep is the queue testbed whose mean service time doubles at a
// set instant: the testbed's service distribution has mean 2·peersService
// and each request asks for half of it (quality 0.5 in the testbed's
// quality header) before the instant and all of it after. The header is
// set here, behind every proxy, so no client or proxy can change it.
type capacityStep struct {
	testbed.Backend
	at atomic.Int64 // Unix nanoseconds of the change; 0 = never
}

func newCapacityStep(seed uint64) (*capacityStep, error) {
	cfg := testbed.DefaultQueueConfig()
	cfg.Workers, cfg.Discipline, cfg.Seed = peersWorkers, testbed.DisciplineFIFO, seed
	cfg.Service = "exp:" + (2 * peersService).String()
	q, err := testbed.NewQueue(cfg)
	if err != nil {
		return nil, err
	}
	return &capacityStep{Backend: q}, nil
}

// halveAt makes the capacity halve at t.
func (c *capacityStep) halveAt(t time.Time) { c.at.Store(t.UnixNano()) }

// stepQuality is the quality header value of a request arriving at now
// (Unix ns) when the capacity halves at at (Unix ns, 0 = never).
func stepQuality(now, at int64) string {
	if at != 0 && now >= at {
		return "1"
	}
	return "0.5"
}

func (c *capacityStep) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	r.Header.Set(testbed.QualityHeader, stepQuality(time.Now().UnixNano(), c.at.Load()))
	c.Backend.ServeHTTP(w, r)
}

// ---- analysis ----

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

func (w peerWindow) goodput() float64        { return ratio(float64(w.good), w.seconds) }
func (w peerWindow) throughput() float64     { return ratio(float64(w.ok), w.seconds) }
func (w peerWindow) offeredRate() float64    { return ratio(float64(w.offered), w.seconds) }
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

// peerBins cuts [0, end) into intervals of width.
func peerBins(recs []record, width, end, target, timeout time.Duration) []peerBin {
	n := int(math.Ceil(float64(end) / float64(width)))
	bins := make([]peerBin, n)
	ok := make([][]float64, n)
	adm := make([][]float64, n)
	idx := func(d time.Duration) int {
		if d < 0 || d >= end {
			return -1
		}
		return int(d / width)
	}
	for i := range recs {
		r := &recs[i]
		if r.out == outAborted {
			continue
		}
		if j := idx(r.intended); j >= 0 {
			bins[j].offered++
		}
		j := idx(r.done)
		if j < 0 {
			continue
		}
		switch r.out {
		case outOK:
			bins[j].ok++
			if r.lat <= target {
				bins[j].good++
			}
			ok[j] = append(ok[j], msOf(r.lat))
			adm[j] = append(adm[j], msOf(r.lat))
		case outRejected:
			bins[j].rejected++
		case outTimeout:
			bins[j].fails++
			adm[j] = append(adm[j], msOf(max(r.lat, timeout)))
		default:
			bins[j].fails++
			adm[j] = append(adm[j], msOf(r.lat))
		}
	}
	for i := range bins {
		bins[i].t = (time.Duration(i) * width).Seconds()
		bins[i].p90 = monitor.Percentile(ok[i], 0.9)
		bins[i].p90Admitted = monitor.Percentile(adm[i], 0.9)
	}
	return bins
}

// ---- the run ----

// peersSystem is one system's run.
type peersSystem struct {
	name, label, detail string
	res                 *phaseResult
}

// peersSetup is what every system's run shares.
type peersSetup struct {
	tl               peersTimeline
	tools            map[string]string
	nginxArgs        string
	dir              string
	capacity         float64
	nginxRate, burst int
	rate             dist.Schedule
}

func runPeers(ctx context.Context, env *Env) (*figure.Result, error) {
	tools, err := ensurePeerTools(ctx, env)
	if err != nil {
		return nil, err
	}
	nginxV := peerVersion(ctx, tools["nginx"], "-V")
	haproxyV := peerVersion(ctx, tools["haproxy"], "-v")
	dir, err := os.MkdirTemp("", "sluice-peers-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	// nginx's workers run as an unprivileged user when sluice is root.
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	tl := peersTimelineFor(env)

	env.Phasef("measuring the backend's capacity (%v each, %d closed-loop users without think time, directly)", tl.capLength, 8*peersWorkers)
	capacity, err := peersCapacity(ctx, env, tl.capLength, false)
	if err != nil {
		return nil, err
	}
	capAfter, err := peersCapacity(ctx, env, tl.capLength, true)
	if err != nil {
		return nil, err
	}
	env.Phasef("capacity %.0f req/s, %.0f req/s once halved (nominal %.0f and %.0f)", capacity, capAfter,
		peersWorkers/peersService.Seconds(), peersWorkers/(2*peersService).Seconds())
	if capacity < 20 {
		return nil, fmt.Errorf("the backend answered only %.1f req/s while measuring its capacity", capacity)
	}
	baseLoad, crowdLoad := 0.6*capacity, peersCrowd*capacity
	rate, err := stepSchedule(0, baseLoad, tl.from.Seconds(), crowdLoad)
	if err != nil {
		return nil, err
	}
	setup := &peersSetup{tl: tl, tools: tools, nginxArgs: nginxV, dir: dir, capacity: capacity, rate: rate,
		nginxRate: int(math.Round(capacity)), burst: int(math.Round(capacity * peersPeerWait.Seconds()))}

	systems := make([]*peersSystem, len(peersSystems))
	for i, ps := range peersSystems {
		sys := &peersSystem{name: ps.name, label: ps.label}
		if err := setup.run(ctx, env, sys); err != nil {
			return nil, err
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		systems[i] = sys
	}
	return peersResult(env, setup, systems, capAfter, firstLine(nginxV), firstLine(haproxyV))
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// peersCapacity measures the backend's throughput with 8 users per
// worker sending without think time, directly, over length (the first
// quarter left out); slow measures it with the capacity halved.
func peersCapacity(ctx context.Context, env *Env, length time.Duration, slow bool) (float64, error) {
	be, err := newCapacityStep(env.Seed)
	if err != nil {
		return 0, err
	}
	if slow {
		be.halveAt(time.Now())
	}
	srv, err := serveHTTP(be)
	if err != nil {
		return 0, errors.Join(err, be.Close())
	}
	users, err := dist.ConstantSchedule(8 * peersWorkers)
	if err != nil {
		return 0, errors.Join(err, srv.Close(), be.Close())
	}
	load, err := closedLoad("capacity", env.Seed, users, 0, 0, peersTimeout, length, nil)
	if err != nil {
		return 0, errors.Join(err, srv.Close(), be.Close())
	}
	name := "capacity"
	if slow {
		name = "capacity/2"
	}
	ph := phase{name: name, length: length, loads: []loadgen.Config{load}, target: srv.URL}
	res, err := ph.run(ctx, env)
	if err := errors.Join(err, srv.Close(), be.Close()); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	warm := length / 4
	return float64(countSent(res.recs, warm, length, nil).ok) / (length - warm).Seconds(), nil
}

// run serves a fresh backend, starts the system in front of it, runs the
// load and stops everything, also on error and on Ctrl-C.
func (ps *peersSetup) run(ctx context.Context, env *Env, sys *peersSystem) (err error) {
	var closers []func() error
	defer func() {
		for i := len(closers) - 1; i >= 0; i-- {
			err = errors.Join(err, closers[i]())
		}
		if err != nil {
			err = fmt.Errorf("%s: %w", sys.name, err)
		}
	}()
	be, err := newCapacityStep(env.Seed)
	if err != nil {
		return err
	}
	closers = append(closers, be.Close)
	srv, err := serveHTTP(be)
	if err != nil {
		return err
	}
	closers = append(closers, srv.Close)
	backend := strings.TrimPrefix(srv.URL, "http://")
	ph := phase{name: sys.name, length: ps.tl.length}
	switch sys.name {
	case "uncontrolled", "seda", "yaksha":
		policy := nonePolicy()
		switch sys.name {
		case "seda":
			policy = peersSEDAPolicy(ps.capacity)
		case "yaksha":
			policy = peersYakshaPolicy()
		}
		px, err := startProxy(ctx, proxyConfig(srv.URL, peersProxyConns, policy, ""))
		if err != nil {
			return err
		}
		closers = append(closers, px.Close)
		ph.target, ph.proxy, ph.stageName = px.URL, px, mainStage
		if err := waitReady(ctx, px.URL+"/", 10*time.Second); err != nil {
			return err
		}
	case "nginx":
		sub := filepath.Join(ps.dir, "nginx")
		if err := os.MkdirAll(sub, 0o755); err != nil {
			return err
		}
		p, err := startPeerProc(ctx, "nginx", func(port int) ([]string, error) {
			conf := nginxConf{Dir: sub, Listen: fmt.Sprintf("127.0.0.1:%d", port), Backends: []string{backend}, Rate: ps.nginxRate,
				Burst: ps.burst, TempPaths: nginxTempDirectives(ps.nginxArgs)}
			if err := conf.Validate(); err != nil {
				return nil, err
			}
			path := filepath.Join(sub, "nginx.conf")
			if err := os.WriteFile(path, []byte(conf.Text()), 0o644); err != nil {
				return nil, err
			}
			return []string{ps.tools["nginx"], "-p", sub + "/", "-c", path, "-g", "daemon off;"}, nil
		})
		if err != nil {
			return err
		}
		closers = append(closers, p.Close)
		ph.target = p.URL
		env.Logf("nginx (pid %d) at %s: limit_req rate=%dr/s burst=%d → %s", p.cmd.Process.Pid, p.URL, ps.nginxRate, ps.burst, srv.URL)
	case "haproxy":
		p, err := startPeerProc(ctx, "haproxy", func(port int) ([]string, error) {
			conf := haproxyConf{Listen: fmt.Sprintf("127.0.0.1:%d", port), Backends: []string{backend}, MaxConn: peersWorkers,
				QueueTimeout: peersPeerWait, IdleTimeout: 30 * time.Second}
			if err := conf.Validate(); err != nil {
				return nil, err
			}
			path := filepath.Join(ps.dir, "haproxy.cfg")
			if err := os.WriteFile(path, []byte(conf.Text()), 0o644); err != nil {
				return nil, err
			}
			return []string{ps.tools["haproxy"], "-f", path, "-db"}, nil
		})
		if err != nil {
			return err
		}
		closers = append(closers, p.Close)
		ph.target = p.URL
		env.Logf("haproxy (pid %d) at %s: server maxconn %d, timeout queue %v → %s", p.cmd.Process.Pid, p.URL, peersWorkers, peersPeerWait, srv.URL)
	default:
		return fmt.Errorf("unknown system %q", sys.name)
	}
	load, err := openLoad("peers", env.Seed, ps.rate, peersTimeout, ps.tl.length)
	if err != nil {
		return err
	}
	load.MaxConns = peersClientConns
	ph.loads = []loadgen.Config{load}
	ph.sampleEvery = 250 * time.Millisecond
	be.halveAt(time.Now().Add(ps.tl.half))
	sys.res, err = ph.run(ctx, env)
	return err
}

// peersResult builds the summary, tables, figures and checks.
func peersResult(env *Env, ps *peersSetup, systems []*peersSystem, capAfter float64, nginxV, haproxyV string) (*figure.Result, error) {
	tl := ps.tl
	s := newSummary(env)
	res := &figure.Result{Bundle: report.NewBundle(s)}
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
	cmp := report.NewTable("system", "label", "window", "from_s", "to_s", "offered_rps", "throughput_rps", "goodput_rps",
		"reject_fraction", "timeouts", "errors", "p50_ms", "p90_ms", "p99_ms", "mean_ms", "p90_admitted_ms")
	ts := report.NewTable("system", "time_s", "offered_rps", "ok_rps", "goodput_rps", "rejected_rps", "failed_rps", "p90_ms", "p90_admitted_ms")
	ctl := report.NewTable("system", "time_s", "setting")
	width := pick(env, time.Second, 500*time.Millisecond)
	per := width.Seconds()
	vlines := []report.RefLine{{Value: tl.from.Seconds()}, {Value: tl.half.Seconds()}}
	p90 := report.Panel{Title: fmt.Sprintf("open-loop crowd at %g× capacity from t = %gs; the backend's capacity halves at t = %gs", peersCrowd, tl.from.Seconds(), tl.half.Seconds()),
		XLabel: "time (s)", YLabel: "p90 of admitted requests (ms)", LogY: true, LegendLeft: true,
		HLines: []report.RefLine{{Value: msOf(peersTarget), Label: fmt.Sprintf("target %v", peersTarget)}}, VLines: vlines}
	good := report.Panel{XLabel: "time (s)", YLabel: fmt.Sprintf("answers within %v (per s)", peersTarget), YMin: 0, LegendLeft: true,
		HLines: []report.RefLine{{Value: ps.capacity, Label: fmt.Sprintf("capacity %.0f req/s", ps.capacity)},
			{Value: capAfter, Label: fmt.Sprintf("halved %.0f req/s", capAfter)}}, VLines: vlines}
	rej := report.Panel{XLabel: "time (s)", YLabel: "fraction rejected", YMin: 0, YMax: 1.05, LegendLeft: true, VLines: vlines}
	rate := report.Panel{Title: "sluice SEDA: admission rate", XLabel: "time (s)", YLabel: "token rate (req/s)", LogY: true, LegendLeft: true, VLines: vlines,
		HLines: []report.RefLine{{Value: ps.capacity, Label: "capacity"}, {Value: capAfter, Label: "halved"}}}
	drop := report.Panel{Title: "sluice Yaksha: drop probability", XLabel: "time (s)", YLabel: "drop probability", YMin: 0, YMax: 1, LegendLeft: true, VLines: vlines}
	for _, sys := range systems {
		recs := sys.res.recs
		for _, w := range windows {
			st := summarizeWindow(recs, w.from, w.to, peersTarget, peersTimeout)
			if err := cmp.Append(sys.name, sys.label, w.name, w.from.Seconds(), w.to.Seconds(), st.offeredRate(), st.throughput(), st.goodput(),
				st.rejectFraction(), st.timeouts, st.err, st.p50, st.p90, st.p99, st.mean, st.p90Admitted); err != nil {
				return nil, err
			}
			s.Set(metric("goodput_rps", w.name, sys.name), st.goodput())
			s.Set(metric("throughput_rps", w.name, sys.name), st.throughput())
			s.Set(metric("p50_ms", w.name, sys.name), st.p50)
			s.Set(metric("p90_ms", w.name, sys.name), st.p90)
			s.Set(metric("mean_rt_ms", w.name, sys.name), st.mean)
			s.Set(metric("p90_admitted_ms", w.name, sys.name), st.p90Admitted)
			s.Set(metric("reject_fraction", w.name, sys.name), st.rejectFraction())
			s.Set(metric("errors", w.name, sys.name), float64(st.timeouts+st.err))
		}
		bins := peerBins(recs, width, tl.length, peersTarget, peersTimeout)
		var x, yp, yg, yr []float64
		for _, b := range bins {
			if err := ts.Append(sys.name, b.t, float64(b.offered)/per, float64(b.ok)/per, float64(b.good)/per, float64(b.rejected)/per,
				float64(b.fails)/per, b.p90, b.p90Admitted); err != nil {
				return nil, err
			}
			x = append(x, b.t)
			yp = append(yp, b.p90Admitted)
			yg = append(yg, float64(b.good)/per)
			yr = append(yr, ratio(float64(b.rejected), float64(b.ok+b.rejected+b.fails)))
		}
		p90.Series = append(p90.Series, report.Series{Label: sys.name, X: x, Y: yp})
		good.Series = append(good.Series, report.Series{Label: sys.name, X: x, Y: yg})
		rej.Series = append(rej.Series, report.Series{Label: sys.name, X: x, Y: yr})
		if sys.name == "seda" || sys.name == "yaksha" {
			var sx, sy []float64
			for _, st := range sys.res.states {
				sx, sy = append(sx, st.t.Seconds()), append(sy, st.setting)
				if err := ctl.Append(sys.name, st.t.Seconds(), st.setting); err != nil {
					return nil, err
				}
			}
			if sys.name == "seda" {
				rate.Series = append(rate.Series, report.Series{Label: "seda rate", X: sx, Y: sy})
			} else {
				drop.Series = append(drop.Series, report.Series{Label: "yaksha drop probability", X: sx, Y: sy})
			}
		}
	}
	T := msOf(peersTarget)
	s.Set("capacity_rps", ps.capacity)
	s.Set("capacity_after_rps", capAfter)
	s.Set("target_ms", T)
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
	res.AddTable("comparison.csv", cmp)
	res.AddTable("timeseries.csv", ts)
	res.AddTable("controller.csv", ctl)
	res.AddFigure("peers.png", &report.Figure{PanelHeight: 3.2, Panels: []report.Panel{p90, good, rej}})
	res.AddFigure("controllers.png", &report.Figure{PanelHeight: 2.6, Panels: []report.Panel{rate, drop}})

	after := fmt.Sprintf("after the capacity halves (requests sent %gs–%gs)", (tl.half + tl.settle).Seconds(), tl.length.Seconds())
	before := fmt.Sprintf("at %g× capacity before it halves (requests sent %gs–%gs)", peersCrowd, (tl.from + tl.settle).Seconds(), tl.half.Seconds())
	// The field notes' figures: sluice's goodput against the best static peer
	// (the better of nginx and HAProxy in each window), each of sluice's
	// controllers on its own.
	for _, w := range []string{"before", "after"} {
		s.Set("goodput_rps_"+w+"_best_static", math.Max(s.Metric("goodput_rps_"+w+"_nginx"), s.Metric("goodput_rps_"+w+"_haproxy")))
		s.Set("goodput_rps_"+w+"_best_sluice", math.Max(s.Metric("goodput_rps_"+w+"_seda"), s.Metric("goodput_rps_"+w+"_yaksha")))
	}
	res.Checks = []figure.Check{
		figure.AtLeast(s, "Field notes: sluice seda's goodput (answers within the target) "+before+" is at least the best static peer's", "goodput_rps_before_seda", s.Metric("goodput_rps_before_best_static")),
		figure.AtLeast(s, "Field notes: sluice yaksha's goodput "+before+" is at least the best static peer's", "goodput_rps_before_yaksha", s.Metric("goodput_rps_before_best_static")),
		figure.Below(s, "Field notes: sluice seda's goodput "+after+" is higher than the best static peer's", "goodput_rps_after_best_static", "goodput_rps_after_seda", 1),
		figure.Below(s, "Field notes: sluice yaksha's goodput "+after+" is higher than the best static peer's", "goodput_rps_after_best_static", "goodput_rps_after_yaksha", 1),
		figure.AtMost(s, "sluice seda holds its p90 near the target "+after+": ≤ 1.5 × target", "p90_ms_after_seda", 1.5*T),
		figure.AtMost(s, "sluice yaksha keeps the p90 near the target "+after+": ≤ 1.5 × target", "p90_ms_after_yaksha", 1.5*T),
		figure.AtMost(s, "sluice yaksha holds its mean near Tref = target/3 "+after+": ≤ 1.5 × Tref", "mean_rt_ms_after_yaksha", 1.5*T/3),
		figure.AtLeast(s, "sluice seda follows the halved capacity: goodput "+after+" ≥ 70% of the halved capacity", "goodput_rps_after_seda", 0.7*capAfter),
		figure.AtLeast(s, "sluice yaksha follows the halved capacity: goodput "+after+" ≥ 70% of the halved capacity", "goodput_rps_after_yaksha", 0.7*capAfter),
		figure.Below(s, "Before the capacity halves, nginx limit_req beats no control on the p90 of admitted requests", "p90_admitted_ms_before_nginx", "p90_admitted_ms_before_uncontrolled", 1),
		figure.AtLeast(s, "nginx limit_req, static at the first capacity, misses the target "+after+": p90 of admitted requests ≥ target", "p90_admitted_ms_after_nginx", T),
		figure.AtMost(s, "nginx limit_req's goodput collapses "+after+": < 50% of the halved capacity", "goodput_rps_after_nginx", 0.5*capAfter),
		figure.AtLeast(s, "HAProxy's maxconn follows the halved capacity: goodput "+after+" ≥ 70% of the halved capacity", "goodput_rps_after_haproxy", 0.7*capAfter),
		figure.Below(s, "sluice yaksha answers faster than HAProxy's standing queue "+after+": lower median", "p50_ms_after_yaksha", "p50_ms_after_haproxy", 1),
	}
	for _, sys := range []string{"haproxy", "seda", "yaksha"} {
		// At least 10% lower: both p90s can sit at the client timeout,
		// where a strict "<" would pass on a fraction of a millisecond.
		res.Checks = append(res.Checks, figure.Below(s, sys+" beats no control on the p90 of admitted requests over the whole crowd (by at least 10%)",
			"p90_admitted_ms_"+sys, "p90_admitted_ms_uncontrolled", 0.9))
	}
	for _, sys := range []string{"nginx", "haproxy", "seda", "yaksha"} {
		res.Checks = append(res.Checks, figure.AtLeast(s, sys+" answers more requests within the target than no control over the whole crowd",
			"goodput_rps_"+sys, s.Metric("goodput_rps_uncontrolled")*1.0000001+1e-9))
	}
	res.Key = []string{"capacity_rps", "capacity_after_rps", "goodput_rps_before_best_static", "goodput_rps_before_best_sluice",
		"goodput_rps_after_best_static", "goodput_rps_after_best_sluice"}
	for _, m := range []string{"goodput_rps_before_", "goodput_rps_after_", "p90_ms_after_", "p90_admitted_ms_after_", "reject_fraction_after_", "errors_after_"} {
		for _, sys := range systems {
			res.Key = append(res.Key, m+sys.name)
		}
	}
	res.Setup = []string{
		fmt.Sprintf("Backend: the queue testbed in this process on 127.0.0.1, %d FIFO workers with exponential service of mean %v (nominal %.0f req/s); at t = %gs of each run the mean service time doubles to %v (the testbed's demand is 2×%v scaled by its quality header, 0.5 before and 1 after, set behind every proxy). Capacity measured before the runs with %d closed-loop users without think time, directly: %.0f req/s, and %.0f req/s with the service time doubled.",
			peersWorkers, peersService, peersWorkers/peersService.Seconds(), tl.half.Seconds(), 2*peersService, peersService, 8*peersWorkers, ps.capacity, capAfter),
		fmt.Sprintf("Load: open-loop Poisson arrivals, the same seeded sequence for every system: %.0f req/s (0.6× capacity) until t = %gs, then %.0f req/s (%g× capacity, %g× the halved capacity) until t = %gs; client timeout %v, at most %d connections.",
			0.6*ps.capacity, tl.from.Seconds(), peersCrowd*ps.capacity, peersCrowd, 2*peersCrowd, tl.length.Seconds(), peersTimeout, peersClientConns),
		fmt.Sprintf("uncontrolled: the sluice proxy with controller none (pool of %d connections, which never binds). nginx (%s): one worker, limit_req rate=%dr/s (the measured capacity) burst=%d (%v of it: a request waits at most %v) without nodelay, status 503, upstream keepalive. HAProxy (%s): one thread, server maxconn %d (the backend's workers) and timeout queue %v (503 after it).",
			peersProxyConns, nginxV, ps.nginxRate, ps.burst, peersPeerWait, peersPeerWait, haproxyV, peersWorkers, peersPeerWait),
		fmt.Sprintf("sluice seda: p90 target %v, a run every 250ms or 100 samples, adj_i %g (2%% of the capacity), initial rate %.0f req/s (the measured capacity, as nginx is told), other parameters the paper's; Yaksha is told nothing about the capacity (its drop probability starts at 0). sluice yaksha: self-tuning, Tref %v (a third of the target), period 250ms, pole −1/s, tune window 2s. nginx and HAProxy run as child processes in the foreground with generated configurations in a temporary directory, on free loopback ports, and are stopped after their run.",
			peersTarget, math.Max(1, math.Round(0.02*ps.capacity)), ps.capacity, (peersTarget / 3).Round(100*time.Microsecond)),
		fmt.Sprintf("Windows by send time: crowd %gs–%gs, before %gs–%gs, after %gs–%gs (%v after each change left out). Goodput counts OK answers within the %v target per second; p90 is over OK answers; p90_admitted is over every request not rejected, a timeout counted at the %v client timeout; errors are timeouts and failed requests.",
			tl.from.Seconds(), tl.length.Seconds(), (tl.from + tl.settle).Seconds(), tl.half.Seconds(), (tl.half + tl.settle).Seconds(), tl.length.Seconds(),
			tl.settle, peersTarget, peersTimeout),
		"All processes share this machine's CPUs with the load generator (and with any other run on it at the same time), so numbers are noisy; no time compression.",
	}
	return res, nil
}

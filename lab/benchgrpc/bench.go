// SPDX-License-Identifier: Apache-2.0

// Package benchgrpc is the cost comparison of gRPC through sluice's
// proxy: unary calls of grpc-go's interop TestService, in one run,
// direct to the backend, through a plain h2c httputil.ReverseProxy (the
// baseline, NewPlainH2C) and through `sluice proxy` with a stage,
// reporting calls/s and each proxy's CPU per call (the utime+stime its
// process gained over the run, /proc/PID/stat) and the ratios of
// sluice's to the baseline's (`sluice-lab bench grpc-proxy`).
package benchgrpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/lab/child"
	"github.com/sluicehq/sluice/lab/dist"
	"github.com/sluicehq/sluice/lab/loadgen"
)

// Targets, in the order of the first round.
const (
	Direct = "direct" // the backend itself
	Plain  = "plain"  // NewPlainH2C
	Sluice = "sluice" // sluice proxy, one stage on the test service
)

// Config is one comparison.
type Config struct {
	// Exe is the sluice-lab binary: its hidden "proxy" and
	// "bench plain-h2c" commands are the two proxies, as child processes.
	Exe string
	// Rounds of every target (default 3); each round rotates the order by
	// one so that no target always runs first.
	Rounds int
	// Duration of one target's run (default 10s).
	Duration time.Duration
	// Streams is the number of concurrent calls: closed-loop callers with
	// no think time on one HTTP/2 connection (default 64).
	Streams int
	// Controller is the stage's controller in sluice's configuration
	// (default static-rate at 1e9/s: admission runs, nothing is shed).
	Controller string
	// Profile, when set, is the file that receives a CPU profile of the
	// sluice proxy over its first run (its admin API's /debug/pprof),
	// Profile+".allocs" its allocation profile after that run and
	// Profile+".plain" the plain proxy's CPU profile over its first run.
	Profile string
	// Log receives the progress lines; nil: none.
	Log io.Writer
}

func (c *Config) setDefaults() {
	if c.Rounds <= 0 {
		c.Rounds = 3
	}
	if c.Duration <= 0 {
		c.Duration = 10 * time.Second
	}
	if c.Streams <= 0 {
		c.Streams = 64
	}
	if c.Controller == "" {
		c.Controller = "static-rate"
	}
}

// Run is one target's run.
type Run struct {
	Target  string
	Round   int
	Load1   float64       // the 1-minute load average at its start
	Calls   int64         // calls answered OK
	Other   int64         // calls not OK (rejections, errors, timeouts)
	Rate    float64       // OK calls per second
	P99     time.Duration // of the OK calls
	CPU     time.Duration // utime+stime the proxy process gained; 0 for direct
	PerCall time.Duration // CPU / Calls
	// Reads and Writes are the proxy's read and write system calls per
	// call (/proc/PID/io's syscr, syscw).
	Reads, Writes float64
}

// Report is a comparison's runs and the medians per target.
type Report struct {
	Config Config
	Runs   []Run
	Median map[string]Run // Rate, P99, PerCall: the medians of the rounds
}

// Ratios returns sluice's CPU per call and calls/s over the baseline's
// (medians).
func (r *Report) Ratios() (cpu, rate float64) {
	s, p := r.Median[Sluice], r.Median[Plain]
	if p.PerCall > 0 {
		cpu = float64(s.PerCall) / float64(p.PerCall)
	}
	if p.Rate > 0 {
		rate = s.Rate / p.Rate
	}
	return cpu, rate
}

// Bench runs the comparison.
func Bench(ctx context.Context, cfg Config) (*Report, error) {
	cfg.setDefaults()
	logf := func(format string, a ...any) {
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, format+"\n", a...)
		}
	}
	be, stop, err := StartBackend()
	if err != nil {
		return nil, err
	}
	defer stop()
	dir, err := os.MkdirTemp("", "sluice-bench-grpc-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	plainAddr, sluiceAddr, adminAddr, plainPprof := freeAddr(), freeAddr(), freeAddr(), freeAddr()
	if plainAddr == "" || sluiceAddr == "" || adminAddr == "" || plainPprof == "" {
		return nil, errors.New("no free loopback port")
	}
	plain, err := child.Start(ctx, plainAddr, os.Interrupt, cfg.Exe, "bench", "plain-h2c", "--listen", plainAddr, "--backend", "http://"+be,
		"--pprof", plainPprof)
	if err != nil {
		return nil, err
	}
	defer func() { _ = plain.Stop(os.Interrupt) }()
	file := filepath.Join(dir, "sluice.yaml")
	if err := os.WriteFile(file, []byte(sluiceConfig(sluiceAddr, adminAddr, be, cfg.Controller)), 0o600); err != nil {
		return nil, err
	}
	sl, err := child.Start(ctx, sluiceAddr, os.Interrupt, cfg.Exe, "proxy", "--config", file, "--log-level", "warn")
	if err != nil {
		return nil, err
	}
	defer func() { _ = sl.Stop(os.Interrupt) }()
	addrs := map[string]string{Direct: be, Plain: plainAddr, Sluice: sluiceAddr}
	pids := map[string]int{Plain: plain.Cmd.Process.Pid, Sluice: sl.Cmd.Process.Pid}
	order := []string{Direct, Plain, Sluice}
	for _, t := range order { // warm up: connections, pools, the JIT of nothing
		if _, err := drive(ctx, addrs[t], cfg.Streams, time.Second); err != nil {
			return nil, fmt.Errorf("%s: warm-up: %w", t, err)
		}
	}
	rep := &Report{Config: cfg, Median: map[string]Run{}}
	for round := range cfg.Rounds {
		for i := range order {
			t := order[(i+round)%len(order)]
			run := Run{Target: t, Round: round + 1, Load1: load1()}
			before, err := cpuOf(pids[t])
			if err != nil {
				return nil, err
			}
			r0, w0 := syscallsOf(pids[t])
			var prof chan error
			if t != Direct && cfg.Profile != "" && round == 0 {
				prof = make(chan error, 1)
				admin, file := adminAddr, cfg.Profile
				if t == Plain {
					admin, file = plainPprof, cfg.Profile+".plain"
				}
				go func() { prof <- profile(ctx, admin, cfg.Duration-time.Second, file) }()
			}
			res, err := drive(ctx, addrs[t], cfg.Streams, cfg.Duration)
			if prof != nil {
				perr := <-prof
				if perr == nil && t == Sluice {
					perr = fetch(ctx, "http://"+adminAddr+"/debug/pprof/allocs", cfg.Profile+".allocs")
				}
				if perr != nil {
					return nil, fmt.Errorf("profiling sluice: %w", perr)
				}
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %w", t, err)
			}
			after, err := cpuOf(pids[t])
			if err != nil {
				return nil, err
			}
			run.Calls, run.Other = res.Total.OK, res.Total.Offered-res.Total.OK
			run.Rate = float64(run.Calls) / res.Elapsed.Seconds()
			run.P99 = res.Total.P99
			run.CPU = after - before
			r1, w1 := syscallsOf(pids[t])
			run.PerCall = run.CPU / time.Duration(run.Calls)
			run.Reads, run.Writes = float64(r1-r0)/float64(run.Calls), float64(w1-w0)/float64(run.Calls)
			logf("round %d %-6s load %5.2f  %8.0f calls/s  p99 %-9v  CPU %-7v  %-8v/call  %.2f reads %.2f writes/call  not OK %d",
				run.Round, t, run.Load1, run.Rate, run.P99.Round(time.Microsecond), run.CPU, run.PerCall, run.Reads, run.Writes, run.Other)
			rep.Runs = append(rep.Runs, run)
		}
	}
	for _, t := range order {
		var rates []float64
		var p99s, per []time.Duration
		for _, r := range rep.Runs {
			if r.Target == t {
				rates, p99s, per = append(rates, r.Rate), append(p99s, r.P99), append(per, r.PerCall)
			}
		}
		rep.Median[t] = Run{Target: t, Rate: median(rates), P99: median(p99s), PerCall: median(per)}
	}
	return rep, nil
}

// drive runs streams closed-loop callers of UnaryCall against addr for d.
func drive(ctx context.Context, addr string, streams int, d time.Duration) (*loadgen.Result, error) {
	w, err := loadgen.NewURLs("unary", "--paths", []loadgen.Weighted{{Name: loadgen.DefaultGRPCMethod, Weight: 1}})
	if err != nil {
		return nil, err
	}
	users, err := dist.ConstantSchedule(float64(streams))
	if err != nil {
		return nil, err
	}
	think, err := dist.ParseDuration("det:0")
	if err != nil {
		return nil, err
	}
	res, err := loadgen.Run(ctx, loadgen.Config{Target: "http://" + addr, Mode: loadgen.ModeClosed, Duration: d,
		Timeout: 5 * time.Second, Workload: w, Users: users, Think: think, GRPC: &loadgen.GRPCConfig{Conns: 1}})
	if err != nil {
		return nil, err
	}
	if res.Total.OK == 0 {
		return nil, fmt.Errorf("no call answered OK (%d offered, %d errors)", res.Total.Offered, res.Total.Errors)
	}
	return res, nil
}

// sluiceConfig is the proxy's configuration: an h2c listener, the
// backend, one stage on the test service.
func sluiceConfig(listen, admin, backend, controller string) string {
	params := ""
	if controller == "static-rate" {
		params = ", params: {rate: 1e9}, burst: 1000000"
	}
	return fmt.Sprintf(`listeners:
  - addr: %s
admin: {addr: %s, pprof: true}
backends:
  servers: [{url: http://%s}]
stages:
  - {name: grpc, match: {grpc_service: grpc.testing.TestService}, controller: %s%s}
`, listen, admin, backend, controller, params)
}

// profile writes a CPU profile of d from the proxy whose admin API is
// admin to file.
func profile(ctx context.Context, admin string, d time.Duration, file string) error {
	return fetch(ctx, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", admin, max(int(d.Seconds()), 1)), file)
}

// fetch writes the body of a GET of url to file.
func fetch(ctx context.Context, url, file string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", req.URL, res.Status)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, res.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// freeAddr returns a loopback address that was free a moment ago.
func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return ""
	}
	defer l.Close()
	return l.Addr().String()
}

// clockTick is the unit of /proc/PID/stat's times (USER_HZ, 100 on
// Linux).
const clockTick = 10 * time.Millisecond

// cpuOf returns the utime+stime of process pid (0 for pid 0).
func cpuOf(pid int) (time.Duration, error) {
	if pid == 0 {
		return 0, nil
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after the name", pid, len(f))
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return time.Duration(ut+st) * clockTick, nil
}

// syscallsOf returns the read and write system calls process pid made
// (/proc/PID/io; zeros for pid 0 or when unreadable).
func syscallsOf(pid int) (reads, writes int64) {
	if pid == 0 {
		return 0, 0
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/io")
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ": ")
		n, _ := strconv.ParseInt(v, 10, 64)
		switch {
		case !ok:
		case k == "syscr":
			reads = n
		case k == "syscw":
			writes = n
		}
	}
	return reads, writes
}

// load1 is the 1-minute load average (0 when unreadable).
func load1() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	v, _ := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
	return v
}

func median[T int64 | float64 | time.Duration](v []T) T {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

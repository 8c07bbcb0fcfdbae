// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/lab/dist"
	"github.com/sluicehq/sluice/lab/loadgen"
)

// loadFlags holds the flags of `sluice-lab load`.
type loadFlags struct {
	target   string
	duration time.Duration
	seed     uint64
	timeout  time.Duration
	out      string
	quiet    bool
	logReqs  bool
	noKeep   bool

	rate        float64
	schedule    string
	arrival     string
	maxInflight int
	maxConns    int

	users         int
	usersSchedule string
	think         string
	retryWait     time.Duration

	workload string
	urls     string
	paths    string
	markov   string
	mix      string

	classes      string
	classHeader  string
	clients      string
	clientHeader string
	sourceAddrs  string

	grpc             bool
	grpcResponseSize int32
	grpcResponses    int
	grpcConns        int
}

func newLoadCmd() *cobra.Command {
	var f loadFlags
	cmd := &cobra.Command{
		Use:   "load",
		Short: "Generate open- or closed-loop HTTP load against a loopback target",
		Long: `load sends HTTP GET load to a target on this machine (127.0.0.0/8, ::1 or
localhost only) and records what happened.

Open loop (--rate R or --schedule "0s:300,50s:850,70s:300", --arrival
poisson|constant): requests leave at their arrival times whatever the
server does. Latency is measured from the intended send time, so queueing
(in the server or in the generator) is never hidden. A request still
unanswered --timeout after its intended send time is aborted and counted
as a timeout. At most --max-inflight requests are in flight; an arrival
beyond that is not sent and counts as dropped (an error). --max-conns
bounds the connections; a request waiting for one is still timed from its
intended send time.

Closed loop (--users N or --users-schedule "0s:3,10s:1000"): each user
sends a request, waits for the answer, thinks (--think, e.g.
exp:0.7s,max=7s or det:20ms) and sends the next. With --retry-wait D a
rejected request (503/429) is resent after D instead (SEDA's users wait
5s).

Workloads: the target URL itself (default); --urls FILE|LIST (a file of
"URL [weight]" lines, or "/a:0.7,/b:0.3"); --paths "/a:0.7,/b:0.3"
(independent weighted choice); --markov FILE (Markov navigation, YAML:
states, start, transitions); --workload surge (Zipf file popularity from
the static testbed's /_meta); --workload tpcw --mix
browsing|shopping|ordering (the 14 TPC-W interactions against the
bookstore testbed, ids from /_meta, SHOPPING_ID carried through each
session). URLs may contain {rand:A-B}, replaced by a random integer.

Classes and clients: --classes "gold:0.2,bronze:0.8" sends a class per
user (closed loop) or request (open loop) in --class-header; --clients
"A:1,B:3" a client id in --client-header; --source-addrs
127.0.0.2-127.0.0.5 binds each client (or each address, if no --clients)
to its own source address.

gRPC (--grpc): every request is a call to grpc-go's interop test service
grpc.testing.TestService (as sluice-lab testbed grpc serves it), over h2c
for an http target and TLS (ALPN h2) for https. The target's path, or
--paths, names the methods: "/grpc.testing.TestService/UnaryCall" (the
default), EmptyCall, StreamingOutputCall, StreamingInputCall,
FullDuplexCall, HalfDuplexCall; --grpc-responses messages per streaming
call, --grpc-response-size bytes per response. Each call's deadline is its
intended send time plus --timeout (sent as grpc-timeout); classes and
clients travel as metadata (--class-header X-Sluice-Priority sends
priorities). OK is ok, RESOURCE_EXHAUSTED and UNAVAILABLE rejected,
DEADLINE_EXCEEDED a timeout, other codes errors.

Statuses: 2xx/3xx ok, 503/429 rejected, other 4xx/5xx errors, transport
failures errors, timeouts separate. Results go to --out: summary.json,
timeseries*.csv, latency.hgrm, latency.hlog, hgrm/. Ctrl-C stops the run
and writes the partial results.`,
		Example: `  sluice-lab load --target http://127.0.0.1:8080/ --rate 800 --duration 60s
  sluice-lab load --target http://127.0.0.1:8080 --schedule "0s:300,50s:850,70s:300" --arrival constant --timeout 2s --duration 100s
  sluice-lab load --target http://127.0.0.1:8081 --workload tpcw --mix browsing --users 400 --think exp:0.7s,max=7s --duration 120s
  sluice-lab load --target http://127.0.0.1:8082 --workload surge --rate 200 --classes gold:0.2,bronze:0.8
  sluice-lab load --grpc --target http://127.0.0.1:9090 --rate 300 --timeout 500ms --classes CRITICAL:0.2,SHEDDABLE:0.8 --class-header X-Sluice-Priority
  sluice-lab load --grpc --target http://127.0.0.1:9090 --paths "/grpc.testing.TestService/FullDuplexCall:1" --grpc-responses 10 --users 20 --think det:0
  sluice-lab load --target http://127.0.0.1:8080 --users-schedule "0s:3,10s:1000" --think det:20ms --retry-wait 5s --markov mail.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runLoad(cmd, &f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.target, "target", "", "base URL of the target, on loopback (required)")
	fl.DurationVar(&f.duration, "duration", 30*time.Second, "how long to issue requests")
	fl.Uint64Var(&f.seed, "seed", 1, "seed of every random choice")
	fl.DurationVar(&f.timeout, "timeout", loadgen.DefaultTimeout, "abort a request this long after its intended send time")
	fl.StringVar(&f.out, "out", "", "result directory (default ./out/load-YYYYMMDD-HHMMSS)")
	fl.BoolVar(&f.quiet, "quiet", false, "no progress output")
	fl.BoolVar(&f.logReqs, "log-requests", false, "also write every request to requests.csv")
	fl.BoolVar(&f.noKeep, "no-keepalive", false, "open a new connection per request")

	fl.Float64Var(&f.rate, "rate", 0, "open loop: requests per second")
	fl.StringVar(&f.schedule, "schedule", "", `open loop: rate schedule "OFFSET:RATE,..." e.g. "0s:300,50s:850,70s:300"`)
	fl.StringVar(&f.arrival, "arrival", "poisson", "open loop: arrival process, poisson or constant")
	fl.IntVar(&f.maxInflight, "max-inflight", loadgen.DefaultMaxInflight, "open loop: most requests in flight; more arrivals are dropped")
	fl.IntVar(&f.maxConns, "max-conns", 0, "open loop: most connections per source address; requests wait for one (default 256, at most --max-inflight)")

	fl.IntVar(&f.users, "users", 0, "closed loop: number of users")
	fl.StringVar(&f.usersSchedule, "users-schedule", "", `closed loop: user schedule "OFFSET:USERS,..." e.g. "0s:3,10s:1000"`)
	fl.StringVar(&f.think, "think", "exp:0.7s,max=7s", "closed loop: think time distribution (exp:MEAN[,max=CAP], det:V, lognormal:MEAN,SIGMA, pareto:MIN,MAX,ALPHA, uniform:A,B)")
	fl.DurationVar(&f.retryWait, "retry-wait", 0, "closed loop: after a 503/429, wait this long and resend (0: think and move on)")

	fl.StringVar(&f.workload, "workload", "", "urls, paths, markov, surge or tpcw (default: from --urls/--paths/--markov, else the target URL)")
	fl.StringVar(&f.urls, "urls", "", `URL list: a file of "URL [weight]" lines or "URL:weight,..."`)
	fl.StringVar(&f.paths, "paths", "", `independent weighted paths "/a:0.7,/b:0.3"`)
	fl.StringVar(&f.markov, "markov", "", "Markov navigation file (YAML: states, start, transitions)")
	fl.StringVar(&f.mix, "mix", "browsing", "tpcw: browsing, shopping or ordering")

	fl.StringVar(&f.classes, "classes", "", `request classes and weights "gold:0.2,bronze:0.8"`)
	fl.StringVar(&f.classHeader, "class-header", loadgen.DefaultClassHeader, "header carrying the class")
	fl.StringVar(&f.clients, "clients", "", `client identities and weights "A:1,B:3"`)
	fl.StringVar(&f.clientHeader, "client-header", loadgen.DefaultClientHeader, "header carrying the client identity")
	fl.BoolVar(&f.grpc, "grpc", false, "send gRPC calls to grpc.testing.TestService instead of HTTP GETs")
	fl.Int32Var(&f.grpcResponseSize, "grpc-response-size", 0, "gRPC: payload bytes per response (0: the server's default)")
	fl.IntVar(&f.grpcResponses, "grpc-responses", 1, "gRPC: messages per streaming call")
	fl.IntVar(&f.grpcConns, "grpc-conns", 1, "gRPC: HTTP/2 connections per source address")
	fl.StringVar(&f.sourceAddrs, "source-addrs", "", "source addresses in 127.0.0.0/8, e.g. 127.0.0.2-127.0.0.5 (one per client)")
	return cmd
}

// buildLoadConfig turns flags into a config; every error is a usage error
// naming the flag. The workload is built separately (it may need /_meta).
func buildLoadConfig(cmd *cobra.Command, f *loadFlags) (loadgen.Config, error) {
	changed := cmd.Flags().Changed
	cfg := loadgen.Config{Seed: f.seed, DisableKeepAlives: f.noKeep}
	if f.target == "" {
		return cfg, cli.Usagef("--target is required (e.g. --target http://127.0.0.1:8080/)")
	}
	if _, err := loadgen.CheckLoopbackURL("--target", f.target); err != nil {
		return cfg, cli.Usage(err)
	}
	cfg.Target = f.target
	if f.duration <= 0 {
		return cfg, cli.Usagef("--duration: %v must be positive", f.duration)
	}
	cfg.Duration = f.duration
	if f.timeout <= 0 {
		return cfg, cli.Usagef("--timeout: %v must be positive", f.timeout)
	}
	cfg.Timeout = f.timeout
	if f.grpc {
		cfg.GRPC = &loadgen.GRPCConfig{ResponseSize: f.grpcResponseSize, Responses: f.grpcResponses, Conns: f.grpcConns}
	} else {
		for _, n := range []string{"grpc-response-size", "grpc-responses", "grpc-conns"} {
			if changed(n) {
				return cfg, cli.Usagef("--%s applies to --grpc", n)
			}
		}
	}

	open := changed("rate") || changed("schedule")
	closed := changed("users") || changed("users-schedule")
	switch {
	case open && closed:
		return cfg, cli.Usagef("--rate/--schedule (open loop) and --users/--users-schedule (closed loop) exclude each other")
	case !open && !closed:
		return cfg, cli.Usagef("choose a load: --rate or --schedule (open loop), or --users or --users-schedule (closed loop)")
	}
	if open {
		cfg.Mode = loadgen.ModeOpen
		for _, name := range []string{"think", "retry-wait"} {
			if changed(name) {
				return cfg, cli.Usagef("--%s applies to closed loop (--users); this is an open-loop run", name)
			}
		}
		var sched dist.Schedule
		var err error
		switch {
		case changed("rate") && changed("schedule"):
			return cfg, cli.Usagef("--rate and --schedule exclude each other")
		case changed("rate"):
			if !(f.rate > 0) || math.IsInf(f.rate, 0) {
				return cfg, cli.Usagef("--rate: %v must be a positive number of requests per second", f.rate)
			}
			sched, err = dist.ConstantSchedule(f.rate)
		default:
			sched, err = dist.ParseSchedule(f.schedule)
			if err == nil && sched.Max() <= 0 {
				err = fmt.Errorf("the rate is never positive")
			}
		}
		if err != nil {
			if changed("schedule") {
				return cfg, cli.Usagef("--schedule %q: %v", f.schedule, err)
			}
			return cfg, cli.Usagef("--rate %v: %v", f.rate, err)
		}
		switch f.arrival {
		case "poisson":
			cfg.Arrivals = dist.Poisson{Rate: sched}
		case "constant":
			cfg.Arrivals = dist.Constant{Rate: sched}
		default:
			return cfg, cli.Usagef("--arrival: %q must be poisson or constant", f.arrival)
		}
		if f.maxInflight < 1 || f.maxInflight > 100000 {
			return cfg, cli.Usagef("--max-inflight: %d must be in [1, 100000]", f.maxInflight)
		}
		cfg.MaxInflight = f.maxInflight
		if changed("max-conns") {
			if f.maxConns < 1 || f.maxConns > f.maxInflight {
				return cfg, cli.Usagef("--max-conns: %d must be in [1, --max-inflight=%d]", f.maxConns, f.maxInflight)
			}
			cfg.MaxConns = f.maxConns
		}
	} else {
		cfg.Mode = loadgen.ModeClosed
		for _, name := range []string{"arrival", "max-inflight", "max-conns"} {
			if changed(name) {
				return cfg, cli.Usagef("--%s applies to open loop (--rate); this is a closed-loop run", name)
			}
		}
		switch {
		case changed("users") && changed("users-schedule"):
			return cfg, cli.Usagef("--users and --users-schedule exclude each other")
		case changed("users"):
			if f.users < 1 || f.users > 100000 {
				return cfg, cli.Usagef("--users: %d must be in [1, 100000]", f.users)
			}
			cfg.Users, _ = dist.ConstantSchedule(float64(f.users))
		default:
			s, err := dist.ParseSchedule(f.usersSchedule)
			if err != nil {
				return cfg, cli.Usagef("--users-schedule %q: %v", f.usersSchedule, err)
			}
			if s.Max() < 0.5 || s.Max() > 100000 {
				return cfg, cli.Usagef("--users-schedule %q: must reach between 1 and 100000 users", f.usersSchedule)
			}
			cfg.Users = s
		}
		d, err := dist.ParseDuration(f.think)
		if err != nil {
			return cfg, cli.Usagef("--think %q: %v", f.think, err)
		}
		cfg.Think = d
		if f.retryWait < 0 {
			return cfg, cli.Usagef("--retry-wait: %v must be >= 0", f.retryWait)
		}
		cfg.RetryWait = f.retryWait
	}

	var err error
	if changed("classes") {
		if cfg.Classes, err = loadgen.ParseWeighted("--classes", f.classes); err != nil {
			return cfg, cli.Usage(err)
		}
	}
	if changed("clients") {
		if cfg.Clients, err = loadgen.ParseWeighted("--clients", f.clients); err != nil {
			return cfg, cli.Usage(err)
		}
	}
	if changed("source-addrs") {
		if cfg.SourceAddrs, err = loadgen.ParseAddrs("--source-addrs", f.sourceAddrs); err != nil {
			return cfg, cli.Usage(err)
		}
		if len(cfg.Clients) > 0 && len(cfg.Clients) != len(cfg.SourceAddrs) {
			return cfg, cli.Usagef("--source-addrs: %d addresses but --clients has %d; client i uses address i", len(cfg.SourceAddrs), len(cfg.Clients))
		}
	}
	cfg.ClassHeader, cfg.ClientHeader = f.classHeader, f.clientHeader
	return cfg, nil
}

// workloadKind decides the workload from the flags.
func workloadKind(cmd *cobra.Command, f *loadFlags) (string, error) {
	changed := cmd.Flags().Changed
	var given []string
	for _, n := range []string{"urls", "paths", "markov"} {
		if changed(n) {
			given = append(given, n)
		}
	}
	if len(given) > 1 {
		return "", cli.Usagef("--%s and --%s exclude each other", given[0], given[1])
	}
	kind := f.workload
	switch kind {
	case "":
		kind = "target"
		if len(given) == 1 {
			kind = given[0]
		}
	case "urls", "paths", "markov":
		if len(given) == 0 || given[0] != kind {
			return "", cli.Usagef("--workload %s needs --%s", kind, kind)
		}
	case "surge", "tpcw":
		if len(given) == 1 {
			return "", cli.Usagef("--workload %s takes its URLs from the target's /_meta; drop --%s", kind, given[0])
		}
	default:
		return "", cli.Usagef("--workload: %q must be urls, paths, markov, surge or tpcw", kind)
	}
	if f.grpc && kind != "target" && kind != "paths" {
		return "", cli.Usagef("--grpc takes its methods from the target's path or --paths, not --workload %s", kind)
	}
	if changed("mix") && kind != "tpcw" {
		return "", cli.Usagef("--mix applies to --workload tpcw")
	}
	return kind, nil
}

// buildWorkload makes the workload; surge and tpcw read the target's /_meta.
func buildWorkload(ctx context.Context, kind string, f *loadFlags) (loadgen.Workload, error) {
	switch kind {
	case "target":
		u, _ := loadgen.CheckLoopbackURL("--target", f.target)
		p := u.RequestURI()
		if f.grpc {
			if p == "/" {
				p = loadgen.DefaultGRPCMethod
			}
			if err := loadgen.CheckGRPCMethod("--target", p); err != nil {
				return nil, cli.Usage(err)
			}
		}
		return loadgen.NewURLs("target", "--target", []loadgen.Weighted{{Name: p, Weight: 1}})
	case "urls":
		ws, err := loadgen.ReadURLList("--urls", f.urls)
		if err != nil {
			return nil, cli.Usage(err)
		}
		w, err := loadgen.NewURLs("urls", "--urls", ws)
		if err != nil {
			return nil, cli.Usage(err)
		}
		return w, nil
	case "paths":
		ws, err := loadgen.ParseWeighted("--paths", f.paths)
		if err != nil {
			return nil, cli.Usage(err)
		}
		for _, w := range ws {
			if f.grpc {
				if err := loadgen.CheckGRPCMethod("--paths", w.Name); err != nil {
					return nil, cli.Usage(err)
				}
			}
		}
		w, err := loadgen.NewURLs("paths", "--paths", ws)
		if err != nil {
			return nil, cli.Usage(err)
		}
		return w, nil
	case "markov":
		w, err := loadgen.LoadMarkov(f.markov)
		if err != nil {
			return nil, cli.Usagef("--markov: %v", err)
		}
		return w, nil
	case "surge", "tpcw":
		if kind == "tpcw" {
			if _, err := loadgen.TPCWMix(f.mix); err != nil {
				return nil, cli.Usagef("--mix: %v", err)
			}
		}
		m, err := loadgen.FetchMeta(ctx, nil, f.target)
		if err != nil {
			return nil, fmt.Errorf("--workload %s: %v", kind, err)
		}
		if kind == "surge" {
			return loadgen.NewSurge(m)
		}
		return loadgen.NewTPCW(m, f.mix)
	}
	return nil, fmt.Errorf("unknown workload %q", kind)
}

func runLoad(cmd *cobra.Command, f *loadFlags) error {
	cfg, err := buildLoadConfig(cmd, f)
	if err != nil {
		return err
	}
	kind, err := workloadKind(cmd, f)
	if err != nil {
		return err
	}
	dir := f.out
	if dir == "" {
		dir = filepath.Join("out", "load-"+time.Now().Format("20060102-150405"))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	w, err := buildWorkload(ctx, kind, f)
	if err != nil {
		return err
	}
	cfg.Workload = w
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return cli.Usage(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("--out: %v", err)
	}

	stderr := cmd.ErrOrStderr()
	var reqLog *requestLog
	if f.logReqs {
		if reqLog, err = newRequestLog(filepath.Join(dir, "requests.csv")); err != nil {
			return fmt.Errorf("--log-requests: %v", err)
		}
		cfg.OnRequest = reqLog.add
	}
	var prog *progressPrinter
	if !f.quiet {
		prog = newProgressPrinter(stderr, cfg.Duration)
		cfg.Progress = prog.update
	}
	res, err := loadgen.Run(ctx, cfg)
	stop()
	if prog != nil {
		prog.finish()
	}
	if reqLog != nil {
		if cerr := reqLog.close(); cerr != nil && err == nil {
			err = fmt.Errorf("requests.csv: %v", cerr)
		}
	}
	if err != nil {
		return err
	}
	if err := res.WriteDir(dir); err != nil {
		return fmt.Errorf("writing results to %s: %v", dir, err)
	}
	cmdline := "sluice " + strings.Join(os.Args[1:], " ") + "\n"
	if err := os.WriteFile(filepath.Join(dir, "command.txt"), []byte(cmdline), 0o644); err != nil {
		return fmt.Errorf("writing results to %s: %v", dir, err)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%s -> %s\n", res.OneLine(), dir)
	return nil
}

// progressPrinter shows a progress bar on a terminal, or a plain line
// every 5 seconds otherwise.
type progressPrinter struct {
	w        io.Writer
	bar      *progressbar.ProgressBar
	lastLine time.Duration
}

func newProgressPrinter(w io.Writer, d time.Duration) *progressPrinter {
	p := &progressPrinter{w: w}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.bar = progressbar.NewOptions64(int64(d/time.Second),
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription("load"),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionThrottle(200*time.Millisecond),
			progressbar.OptionClearOnFinish(),
		)
	}
	return p
}

func progressText(pr loadgen.Progress) string {
	s := fmt.Sprintf("ok %d rejected %d errors %d timeouts %d in-flight %d", pr.OK, pr.Rejected, pr.Errors, pr.Timeouts, pr.InFlight)
	if pr.Users > 0 {
		s += fmt.Sprintf(" users %d", pr.Users)
	}
	if pr.HaveLast {
		l := pr.Last
		s += fmt.Sprintf(" | last s: offered %d ok %d p99 %.1fms", l.Offered, l.OK, float64(l.P99)/1e6)
	}
	return s
}

func (p *progressPrinter) update(pr loadgen.Progress) {
	if p.bar != nil {
		p.bar.Describe(progressText(pr))
		_ = p.bar.Set64(int64(min(pr.Elapsed, pr.Duration) / time.Second))
		return
	}
	if pr.Elapsed-p.lastLine >= 5*time.Second {
		p.lastLine = pr.Elapsed
		fmt.Fprintf(p.w, "load %5.1fs/%.0fs %s\n", pr.Elapsed.Seconds(), pr.Duration.Seconds(), progressText(pr))
	}
}

func (p *progressPrinter) finish() {
	if p.bar != nil {
		_ = p.bar.Finish()
	}
}

// requestLog writes one CSV row per request.
type requestLog struct {
	mu  sync.Mutex
	f   *os.File
	buf *bufio.Writer
	w   *csv.Writer
	err error
}

func newRequestLog(path string) (*requestLog, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	b := bufio.NewWriterSize(f, 256<<10)
	l := &requestLog{f: f, buf: b, w: csv.NewWriter(b)}
	l.err = l.w.Write([]string{"intended_s", "sent_s", "done_s", "latency_ms", "outcome", "status", "bytes", "type", "class", "client", "url", "error"})
	return l, nil
}

func (l *requestLog) add(r loadgen.RequestRecord) {
	sec := func(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 6, 64) }
	e := ""
	if r.Err != nil {
		e = r.Err.Error()
	}
	row := []string{sec(r.Intended), sec(r.Sent), sec(r.Done), strconv.FormatFloat(float64(r.Latency)/1e6, 'f', 3, 64),
		r.Outcome, strconv.Itoa(r.Status), strconv.FormatInt(r.Bytes, 10), r.Type, r.Class, r.Client, r.URL, e}
	l.mu.Lock()
	if l.err == nil {
		l.err = l.w.Write(row)
	}
	l.mu.Unlock()
}

func (l *requestLog) close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.w.Flush()
	if l.err == nil {
		l.err = l.w.Error()
	}
	if err := l.buf.Flush(); l.err == nil {
		l.err = err
	}
	if err := l.f.Close(); l.err == nil {
		l.err = err
	}
	return l.err
}

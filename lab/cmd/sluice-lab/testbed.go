// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/grpc"

	"github.com/sluicehq/sluice/control/auto"
	"github.com/sluicehq/sluice/grpcsluice"
	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/strictyaml"
	"github.com/sluicehq/sluice/lab/retry"
	"github.com/sluicehq/sluice/lab/testbed"
	"github.com/sluicehq/sluice/policy"
)

// testbedFlags are the flags shared by every `sluice-lab testbed` kind.
type testbedFlags struct {
	listen      string
	allowPublic bool
}

// serve checks --listen and listens there, with a context that ends on
// Ctrl-C or SIGTERM: what every testbed kind does before it serves. The
// caller calls stop and closes ln; kind names the testbed in errors.
func (f *testbedFlags) serve(cmd *cobra.Command, kind string) (ctx context.Context, stop context.CancelFunc, ln net.Listener, err error) {
	if err := testbed.CheckListenAddr(f.listen, f.allowPublic); err != nil {
		return nil, nil, nil, cli.Usagef("--listen: %v", err)
	}
	ctx, stop = signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	if ln, err = net.Listen("tcp", f.listen); err != nil {
		stop()
		return nil, nil, nil, fmt.Errorf("testbed %s: %w", kind, err)
	}
	return ctx, stop, ln, nil
}

func newTestbedCmd() *cobra.Command {
	var f testbedFlags
	cmd := &cobra.Command{
		Use:   "testbed KIND [flags]",
		Short: "Run a test backend: queue, tier, grpc, cgi, static or bookstore",
		Long: `testbed runs an HTTP backend with known costs, to protect and to overload.

  queue      fixed capacity: --workers C servers, FIFO or processor sharing,
             service times from a distribution, emulated with timers
  tier       a service of a chain: calls --next for every request, naive,
             with a retry budget, grpc-go's retry throttling or sluice
  grpc       the queue's model served over gRPC (h2c): grpc-go's interop
             test service grpc.testing.TestService, all four call shapes
  cgi        real CPU work: generate and sum N random numbers per request
  static     a SURGE-like file set (heavy-tailed sizes, Zipf popularity,
             /islarge/ for files over 50 KB, 20% dynamic under /cgi-bin/)
  bookstore  a TPC-W-like shop: 14 interactions over real SQL
             (SQLite by default, PostgreSQL with --db postgres://...)

Every kind honours X-Sluice-Quality (lower quality, less work), reports
X-Sluice-Utilization, and serves GET /_meta (a JSON manifest) and /healthz.
It listens on 127.0.0.1:8081 unless --listen says otherwise; addresses that
are not loopback need --allow-public. Ctrl-C stops it and prints a summary.`,
		Example: `  sluice-lab testbed queue --workers 4 --service det:10ms
  sluice-lab testbed queue --listen 127.0.0.1:9000 --workers 8 --discipline ps --service exp:20ms
  sluice-lab testbed grpc --listen 127.0.0.1:9090 --workers 4 --service det:10ms
  sluice-lab testbed cgi --work "/cgi-bin/=200000,/=1000"
  sluice-lab testbed static --files 2000 --seed 7
  sluice-lab testbed bookstore --scale 1
  sluice-lab testbed bookstore --db postgres://user:pass@127.0.0.1:5432/shop?sslmode=disable`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return cli.Usagef("testbed: KIND required: queue, tier, grpc, cgi, static or bookstore (see sluice-lab testbed --help)")
		},
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&f.listen, "listen", "127.0.0.1:8081", "address to listen on (host:port; port 0 picks a free port)")
	pf.BoolVar(&f.allowPublic, "allow-public", false, "allow a listen address that is not loopback")
	cmd.AddCommand(newTestbedQueueCmd(&f), newTestbedTierCmd(&f), newTestbedGRPCCmd(&f), newTestbedCGICmd(&f), newTestbedStaticCmd(&f), newTestbedBookstoreCmd(&f), newTestbedHotelCmd(&f))
	return cmd
}

func newTestbedQueueCmd(f *testbedFlags) *cobra.Command {
	cfg := testbed.DefaultQueueConfig()
	cmd := &cobra.Command{
		Use:   "queue",
		Short: "A server with a fixed capacity and a service-time distribution",
		Long: `queue emulates a server with --workers servers ("CPUs"). With
--discipline fifo, at most --workers requests are served at a time and the
others wait in arrival order; with ps (processor sharing) all requests
present share the servers, each progressing at min(1, C/n). Each request's
demand is a draw from --service times its quality (X-Sluice-Quality, floor
0.1); service is emulated with timers, so capacity is exactly
workers/mean(service) requests per second. X-Sluice-Utilization is the busy
fraction min(n, C)/C over the last second. With --queue-limit L, requests
beyond C+L in the system are answered 503 at once.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := validateQueue(cfg); err != nil {
				return err
			}
			return serveTestbed(cmd, f, "queue", func(context.Context) (testbed.Backend, string, error) {
				q, err := testbed.NewQueue(cfg)
				if err != nil {
					return nil, "", err
				}
				return q, fmt.Sprintf("%d %s workers, service %s, capacity %.1f req/s", cfg.Workers, cfg.Discipline,
					cfg.Service, q.Capacity()), nil
			})
		},
	}
	queueFlags(cmd.Flags(), &cfg, queueHelp{
		size:     "response body size in bytes",
		record:   "keep a record of every request, served as CSV at GET /_records",
		control:  "serve POST /_scale?factor=F: multiply the demand of new requests by F (F = 3: a third of the capacity), and POST /_workers?n=N: serve with N workers",
		freeGone: "end the handler of a request whose client has gone at once; its work is still done",
	})
	return cmd
}

// queueHelp holds the help texts of the queue model's flags that differ
// between the HTTP and the gRPC testbed.
type queueHelp struct{ size, record, control, freeGone string }

// queueFlags declares the queue model's flags, shared by the HTTP and the
// gRPC queue testbeds.
func queueFlags(fl *pflag.FlagSet, cfg *testbed.QueueConfig, help queueHelp) {
	fl.IntVar(&cfg.Workers, "workers", cfg.Workers, "number of servers (CPUs)")
	fl.StringVar(&cfg.Discipline, "discipline", cfg.Discipline, "fifo or ps (processor sharing)")
	fl.StringVar(&cfg.Service, "service", cfg.Service, "service-time distribution: exp:20ms, det:10ms, lognormal:20ms,1.5, pareto:1ms,2s,1.2")
	fl.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the service-time draws")
	fl.IntVar(&cfg.QueueLimit, "queue-limit", cfg.QueueLimit, "requests allowed to wait beyond the workers (0 = unlimited)")
	fl.IntVar(&cfg.Size, "size", cfg.Size, help.size)
	fl.BoolVar(&cfg.Record, "record", false, help.record)
	fl.BoolVar(&cfg.Control, "control", false, help.control)
	fl.BoolVar(&cfg.FreeGone, "free-gone", false, help.freeGone)
}

// validateQueue checks the queue model's configuration; an error names
// the flag.
func validateQueue(cfg testbed.QueueConfig) error {
	if err := cfg.Validate(); err != nil {
		return flagError(err, map[string]string{"workers": "workers", "discipline": "discipline",
			"service": "service", "queue_limit": "queue-limit", "size": "size"})
	}
	return nil
}

func newTestbedTierCmd(f *testbedFlags) *cobra.Command {
	cfg := testbed.DefaultTierConfig()
	var policyFile string
	var slo time.Duration
	var grpcTier bool
	cmd := &cobra.Command{
		Use:   "tier",
		Short: "A service of a chain: calls the next hop for every request",
		Long: `tier is one service of a chain (the graph figures): for every request it
calls --next once and relays the answer (504 when the call ran out of
time, 503 when sluice's client side throttled it, 502 otherwise). The
call carries the request's context: it ends when the caller leaves.

  naive          no overload control: each call retried up to --attempts
                 times after --backoff, each attempt bounded by --per-try
  budget         the same within a retry budget per destination (Finagle,
                 Envoy): --budget-ratio of the calls + --budget-min per
                 second over --budget-window
  grpc-throttle  the same while grpc-go's token count (--max-tokens,
                 --token-ratio) allows retries (gRFC A6)
  sluice         sluice's middleware with --policy (default: one stage,
                 auto told --slo) in front, sluice's client side (its
                 defaults) on the calls: the deadline and the priority
                 travel on

The headers named by --forward are passed on as they came.

With --grpc the tier is a gRPC service instead (h2c, on the same port as
/healthz): grpc-go's interop TestService, whose EmptyCall and UnaryCall
call --next's once (an h2c gRPC server, e.g. testbed grpc), x-sluice-class
and x-lab-deadline passed on, the deadline travelling as grpc-timeout.
Its modes:

  grpc-go        no overload control; grpc-go's own retry, as the library
                 ships it: a service config with a retryPolicy (--attempts;
                 UNAVAILABLE and RESOURCE_EXHAUSTED) and retryThrottling
                 (--max-tokens, --token-ratio)
  sluice         grpcsluice's server interceptors with the policy above,
                 its client interceptors on the calls`,
		Example: `  sluice-lab testbed tier --next http://127.0.0.1:8081 --mode naive --per-try 300ms
  sluice-lab testbed tier --listen 127.0.0.1:8082 --next http://127.0.0.1:8081 --mode sluice --slo 250ms`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case policyFile != "":
				p, err := policy.Load(policyFile)
				if err != nil {
					return cli.Usagef("--policy: %v", err)
				}
				cfg.Policy = *p
			case slo > 0:
				c := auto.DefaultConfig()
				c.SLO = slo
				cfg.Policy.Stages[0].Control = &c
			}
			if grpcTier {
				return serveTestbed(cmd, f, "tier", func(context.Context) (testbed.Backend, string, error) {
					gc := testbed.GRPCTierConfig{Next: cfg.Next, Mode: cfg.Mode, MaxAttempts: cfg.Retry.MaxAttempts,
						MaxTokens: cfg.Retry.MaxTokens, TokenRatio: cfg.Retry.TokenRatio, Policy: cfg.Policy,
						Client: cfg.Client, Seed: cfg.Seed}
					t, err := testbed.NewGRPCTier(gc)
					if err != nil {
						return nil, "", cli.Usagef("%v", err)
					}
					return t, fmt.Sprintf("gRPC over h2c, mode %s, next %s", cfg.Mode, cfg.Next), nil
				})
			}
			return serveTestbed(cmd, f, "tier", func(context.Context) (testbed.Backend, string, error) {
				t, err := testbed.NewTier(cfg)
				if err != nil {
					return nil, "", cli.Usagef("%v", err)
				}
				return t, fmt.Sprintf("mode %s, next %s", cfg.Mode, cfg.Next), nil
			})
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&cfg.Next, "next", "", "base URL of the next hop (loopback; required)")
	fl.StringVar(&cfg.Mode, "mode", cfg.Mode, "naive, budget, grpc-throttle or sluice; with --grpc: grpc-go or sluice")
	fl.BoolVar(&grpcTier, "grpc", false, "serve gRPC (h2c) and call --next over gRPC")
	fl.IntVar(&cfg.Retry.MaxAttempts, "attempts", retry.DefaultMaxAttempts, "most attempts of a call (naive, budget, grpc-throttle)")
	fl.DurationVar(&cfg.Retry.PerTry, "per-try", 0, "each attempt's timeout (0: none)")
	fl.DurationVar(&cfg.Retry.Backoff, "backoff", 0, "wait before a retry (0: at once)")
	fl.Float64Var(&cfg.Retry.BudgetRatio, "budget-ratio", retry.DefaultBudgetRatio, "budget: retries per call")
	fl.Float64Var(&cfg.Retry.BudgetMinPerSecond, "budget-min", retry.DefaultBudgetMinPerSecond, "budget: retries per second always allowed")
	fl.DurationVar(&cfg.Retry.BudgetWindow, "budget-window", retry.DefaultBudgetWindow, "budget: how far back calls and retries count")
	fl.Float64Var(&cfg.Retry.MaxTokens, "max-tokens", retry.DefaultMaxTokens, "grpc-throttle: maxTokens")
	fl.Float64Var(&cfg.Retry.TokenRatio, "token-ratio", retry.DefaultTokenRatio, "grpc-throttle: tokenRatio")
	fl.StringVar(&policyFile, "policy", "", "sluice: the admission policy's YAML (package policy: classes, stages, ...)")
	fl.DurationVar(&slo, "slo", 0, "sluice without --policy: the SLO of the one auto stage (0: auto's default)")
	fl.StringSliceVar(&cfg.Forward, "forward", cfg.Forward, "request headers passed on to the next hop")
	fl.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the client side's and the policies' draws")
	return cmd
}

func newTestbedGRPCCmd(f *testbedFlags) *cobra.Command {
	cfg := testbed.DefaultQueueConfig()
	var policyFile string
	cmd := &cobra.Command{
		Use:   "grpc",
		Short: "The queue's capacity model served over gRPC",
		Long: `grpc serves the queue backend's model (the same flags as testbed queue)
over gRPC without TLS (h2c): grpc-go's own interop test service,
grpc.testing.TestService, from google.golang.org/grpc/interop/grpc_testing
at the version the lab's go.mod pins, and the health service. EmptyCall
and UnaryCall are one unit of work each; StreamingOutputCall one per
response; StreamingInputCall one after the last message; FullDuplexCall
and HalfDuplexCall one per response to each message. The quality is the
x-sluice-quality metadata; responses carry x-sluice-utilization and
x-sluice-demand-ms header metadata. A full queue (--queue-limit) answers
RESOURCE_EXHAUSTED with a RetryInfo of 1s. With --record or --control the
port also answers HTTP/1.1 (GET /_records, POST /_scale, /healthz, as
testbed queue does), gRPC then served through grpc.Server's ServeHTTP.

With --policy FILE (a policy configuration: classes, stages, reject, hops;
the middleware's YAML, stages matched with match.grpc_service or
match.grpc_method) the server runs sluice's gRPC server interceptors
(package grpcsluice) in front of the service, as a Go service would, and
prints each stage's admitted and rejected calls when it stops.`,
		Example: `  sluice-lab testbed grpc --listen 127.0.0.1:9090 --workers 4 --service det:10ms
  sluice-lab load --grpc --target http://127.0.0.1:9090 --rate 300 --duration 10s`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := validateQueue(cfg); err != nil {
				return err
			}
			var pol *policy.Policy
			if policyFile != "" {
				var err error
				if pol, err = loadPolicy(policyFile); err != nil {
					return cli.Usagef("--policy: %v", err)
				}
			}
			return serveGRPCTestbed(cmd, f, cfg, pol)
		},
	}
	cmd.Flags().StringVar(&policyFile, "policy", "", "policy YAML: run sluice's gRPC server interceptors in front of the service")
	queueFlags(cmd.Flags(), &cfg, queueHelp{
		size:     "default response payload size in bytes",
		record:   "keep a record of every call (its x-lab-deadline metadata as the user's deadline), served as CSV at GET /_records over HTTP on the same port",
		control:  "serve POST /_scale?factor=F over HTTP on the same port: multiply the demand of new calls by F",
		freeGone: "end the handler of a call whose client has gone at once; its work is still done",
	})
	return cmd
}

// loadPolicy reads a policy configuration strictly: errors name the file,
// the line and the field.
func loadPolicy(name string) (*policy.Policy, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	var pc policy.Config
	root, err := strictyaml.DecodeFile(name, data, &pc, "classes, stages, reject, hops")
	if err != nil {
		return nil, err
	}
	pc.SetDefaults()
	if err := pc.Validate(); err != nil {
		return nil, strictyaml.Locate(name, root, err)
	}
	return policy.New(pc, policy.Options{})
}

// serveGRPCTestbed serves the queue model over gRPC until the context
// ends and prints a one-line summary.
func serveGRPCTestbed(cmd *cobra.Command, f *testbedFlags, cfg testbed.QueueConfig, pol *policy.Policy) error {
	ctx, stop, ln, err := f.serve(cmd, "grpc")
	if err != nil {
		return err
	}
	defer stop()
	defer ln.Close()
	q, err := testbed.NewQueue(cfg)
	if err != nil {
		return fmt.Errorf("testbed grpc: %w", err)
	}
	defer q.Close()
	var opts []grpc.ServerOption
	protected := ""
	if pol != nil {
		go pol.Run(ctx)
		s := grpcsluice.NewServer(pol, grpcsluice.ServerOptions{})
		opts = append(opts, s.ServerOptions()...) // interceptors and tap handle
		protected = fmt.Sprintf("; sluice interceptors, %d stages", len(pol.Stages()))
	}
	g := testbed.NewGRPCServer(q, opts...)
	served := make(chan error, 1)
	var hs *http.Server
	if cfg.Record || cfg.Control {
		// The chain experiments' endpoints over HTTP beside gRPC, one port
		// (grpc.Server's ServeHTTP: slower than its own transport).
		var p http.Protocols
		p.SetHTTP1(true)
		p.SetUnencryptedHTTP2(true)
		hs = &http.Server{Handler: testbed.GRPCHandler(q, g), Protocols: &p, ReadHeaderTimeout: 10 * time.Second}
		go func() { served <- hs.Serve(ln) }()
	} else {
		go func() { served <- g.Serve(ln) }()
	}
	start := time.Now()
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "testbed grpc listening on http://%s (h2c; %d %s workers, service %s, capacity %.1f calls/s%s)\n",
		ln.Addr(), cfg.Workers, cfg.Discipline, cfg.Service, q.Capacity(), protected)
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-served:
	}
	stopped := make(chan struct{})
	go func() {
		if hs != nil {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = hs.Shutdown(sctx)
			cancel()
		}
		g.GracefulStop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		if hs != nil {
			_ = hs.Close()
		}
		g.Stop()
	}
	_ = q.Close()
	st := q.Stats()
	fmt.Fprintf(out, "testbed grpc: served %d calls (%d rejected, %d errors) in %s\n",
		st.Requests, st.Rejected, st.Errors, time.Since(start).Round(time.Millisecond))
	if pol != nil {
		pol.Step(time.Now().Add(time.Hour)) // collect the last counts
		for _, st := range pol.Stages() {
			var adm, rej, late uint64
			for c := range st.Classes() {
				tot := st.Totals(c)
				adm, rej, late = adm+tot.Admitted, rej+tot.Rejected, late+tot.Deadline
			}
			fmt.Fprintf(out, "  stage %s: admitted %d, rejected %d (deadline %d)\n", st.Name(), adm, rej, late)
		}
	}
	if serveErr != nil && !errors.Is(serveErr, grpc.ErrServerStopped) && !errors.Is(serveErr, http.ErrServerClosed) {
		return fmt.Errorf("testbed grpc: %w", serveErr)
	}
	return nil
}

func newTestbedCGICmd(f *testbedFlags) *cobra.Command {
	cfg := testbed.DefaultCGIConfig()
	work := testbed.FormatWork(cfg.Work)
	cmd := &cobra.Command{
		Use:   "cgi",
		Short: "Real CPU work per request: generate and sum N random numbers",
		Long: `cgi does real CPU work per request, like the CGI scripts of the papers:
it generates N random numbers and replies with their sum. N is set per path
prefix with --work (the longest matching prefix wins; paths matching none
are 404) and scaled by the request's quality (X-Sluice-Quality, floor 0.1).
Summing one number takes about 4 ns. With --cpu-ns-per-number the work is
CPU time instead (Linux): a request of N numbers sums numbers until its
thread has run N × that many ns, so it costs the same CPU time however
fast the CPU runs (a busy sibling core, the hypervisor).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ws, err := testbed.ParseWork(work)
			if err != nil {
				return cli.Usagef("--work: %v", err)
			}
			cfg.Work = ws
			if err := cfg.Validate(); err != nil {
				return cli.Usagef("--work/--cpu-ns-per-number: %v", err)
			}
			return serveTestbed(cmd, f, "cgi", func(context.Context) (testbed.Backend, string, error) {
				c, err := testbed.NewCGI(cfg)
				return c, "work " + testbed.FormatWork(cfg.Work), err
			})
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&work, "work", work, "random numbers per request by path prefix: PREFIX=N,PREFIX=N")
	fl.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the random numbers")
	fl.Float64Var(&cfg.CPUNsPerNumber, "cpu-ns-per-number", 0, "burn N × this many ns of the thread's CPU time per request instead of summing exactly N numbers (0: count; Linux only)")
	return cmd
}

func newTestbedStaticCmd(f *testbedFlags) *cobra.Command {
	cfg := testbed.DefaultStaticConfig()
	cmd := &cobra.Command{
		Use:   "static",
		Short: "A SURGE-like file set generated from a seed",
		Long: `static generates a file set like SURGE's and serves it: sizes from a
log-normal body (μ=9.357, σ=1.318) with a bounded Pareto tail (133 KB to
--max-size, α=1.1, 7% of files), Zipf popularity (weights in /_meta), files
over 50 KB under /islarge/, and 20% of the requests for small files dynamic
under /cgi-bin/ (CPU work plus generated bytes of the listed size). Files
are written to --dir (a temporary directory removed on exit by default; an
existing --dir generated with the same parameters is reused).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cfg.Validate(); err != nil {
				return flagError(err, map[string]string{"files": "files", "max_size": "max-size", "zipf": "zipf",
					"dynamic_fraction": "dynamic-fraction", "dynamic_work": "dynamic-work"})
			}
			return serveTestbed(cmd, f, "static", func(context.Context) (testbed.Backend, string, error) {
				s, err := testbed.NewStatic(cfg)
				if err != nil {
					return nil, "", err
				}
				var bytes int64
				for _, e := range s.Entries() {
					if !e.Dynamic {
						bytes += e.Size
					}
				}
				return s, fmt.Sprintf("%d entries, %.1f MB in %s", cfg.Files, float64(bytes)/1e6, s.Dir()), nil
			})
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&cfg.Dir, "dir", cfg.Dir, "directory of the files (default: a temporary directory removed on exit)")
	fl.IntVar(&cfg.Files, "files", cfg.Files, "number of entries")
	fl.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed of sizes, popularity and contents")
	fl.Int64Var(&cfg.MaxSize, "max-size", cfg.MaxSize, "largest file size in bytes")
	fl.Float64Var(&cfg.Zipf, "zipf", cfg.Zipf, "Zipf popularity exponent")
	fl.Float64Var(&cfg.DynamicFraction, "dynamic-fraction", cfg.DynamicFraction, "share of small-file requests that are dynamic")
	fl.IntVar(&cfg.DynamicWork, "dynamic-work", cfg.DynamicWork, "random numbers summed per dynamic request")
	return cmd
}

func newTestbedBookstoreCmd(f *testbedFlags) *cobra.Command {
	cfg := testbed.DefaultBookstoreConfig()
	cfg.Data = "./data/bookstore"
	cmd := &cobra.Command{
		Use:   "bookstore",
		Short: "A TPC-W-like online bookstore over real SQL",
		Long: `bookstore serves the 14 TPC-W interactions (home, new_products,
best_sellers, product_detail, search_request, search_results, shopping_cart,
customer_registration, buy_request, buy_confirm, order_inquiry,
order_display, admin_request, admin_confirm) as linked HTML pages over a
generated database: --scale N gives N×1000 items and N×2880 customers. The
database is SQLite in --data (generated on first start, reused afterwards
for the same scale and seed) or PostgreSQL with --db postgres://... (tables
in --schema). At quality below 0.5 (X-Sluice-Quality) pages skip
promotions, the best-seller sidebar and related items.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cfg.Validate(); err != nil {
				return flagError(err, map[string]string{"db": "db", "scale": "scale", "pool": "pool", "schema": "schema"})
			}
			return serveTestbed(cmd, f, "bookstore", func(ctx context.Context) (testbed.Backend, string, error) {
				start := time.Now()
				b, err := testbed.NewBookstore(ctx, cfg)
				if err != nil {
					return nil, "", err
				}
				how := "reused"
				if b.Generated() {
					how = fmt.Sprintf("generated in %s", time.Since(start).Round(time.Millisecond))
				}
				where := cfg.Data
				if b.Dialect() != "sqlite" {
					where = "PostgreSQL schema " + cfg.Schema
				}
				return b, fmt.Sprintf("%s, %d items, %d customers, %s (%s)", b.Dialect(), b.Items(), b.Customers(), where, how), nil
			})
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&cfg.DB, "db", cfg.DB, "PostgreSQL URL (postgres://...); empty for SQLite")
	fl.StringVar(&cfg.Data, "data", cfg.Data, "directory of the SQLite database (empty: a temporary directory)")
	fl.IntVar(&cfg.Scale, "scale", cfg.Scale, "population scale: N×1000 items, N×2880 customers")
	fl.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the generated data")
	fl.BoolVar(&cfg.Fresh, "fresh", false, "regenerate the data even if a matching database exists")
	fl.IntVar(&cfg.Pool, "pool", cfg.Pool, "database connections")
	fl.StringVar(&cfg.Schema, "schema", cfg.Schema, "PostgreSQL schema of the tables")
	return cmd
}

// flagError turns a config validation error into a usage error that names
// flags instead of config fields.
func flagError(err error, names map[string]string) error {
	msg := err.Error()
	for field, flag := range names {
		msg = strings.Replace(msg, " "+field+"=", " --"+flag+"=", 1)
	}
	return cli.Usagef("%s", msg)
}

// serveTestbed checks the listen address, listens, builds the backend,
// serves it until the context ends (Ctrl-C, SIGTERM) and prints a one-line
// summary.
func serveTestbed(cmd *cobra.Command, f *testbedFlags, kind string,
	build func(context.Context) (testbed.Backend, string, error)) error {
	ctx, stop, ln, err := f.serve(cmd, kind)
	if err != nil {
		return err
	}
	defer stop()
	defer ln.Close()
	backend, desc, err := build(ctx)
	if err != nil {
		return fmt.Errorf("testbed %s: %w", kind, err)
	}
	defer backend.Close()

	// HTTP/1.1, and HTTP/2 with prior knowledge for the gRPC tier (h2c).
	var protos http.Protocols
	protos.SetHTTP1(true)
	protos.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: backend, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, Protocols: &protos}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	start := time.Now()
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "testbed %s listening on http://%s (%s)\n", kind, ln.Addr(), desc)

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-served:
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		srv.Close()
	}
	closeErr := backend.Close()
	st := backend.Stats()
	fmt.Fprintf(out, "testbed %s: served %d requests (%d rejected, %d errors) in %s\n",
		kind, st.Requests, st.Rejected, st.Errors, time.Since(start).Round(time.Millisecond))
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return fmt.Errorf("testbed %s: %w", kind, serveErr)
	}
	if closeErr != nil {
		return fmt.Errorf("testbed %s: closing: %w", kind, closeErr)
	}
	return nil
}

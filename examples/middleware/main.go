// SPDX-License-Identifier: Apache-2.0

// Command middleware is a small Go service that controls its own overload
// with sluice, in-process:
//
//   - sluice.Middleware(pol) puts every request through an admission
//     policy: a degrading SEDA stage for /search (the handler reads the
//     quality level and returns fewer results under load), a per-class
//     SEDA stage for /orders (batch clients, marked with X-Batch: 1, are
//     shed before interactive ones);
//   - the stage API guards an internal resource: the /orders handler takes
//     one of a few "database" slots with stage.Admit before working;
//   - /metrics serves the policy's Prometheus metrics and /state its
//     per-stage state as JSON.
//
// Run it with
//
//	go run ./examples/middleware -listen 127.0.0.1:8080
//	curl -s 127.0.0.1:8080/search?q=x
//	curl -s 127.0.0.1:8080/metrics | grep sluice_
//
// and -config FILE to use another policy (the YAML of package policy: the
// classes, stages, reject, shadow and degrade sections of a proxy config).
package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/policy"
	"github.com/sluicehq/sluice/stage"
)

// defaultPolicy is the example's admission policy (policy.yaml).
//
//go:embed policy.yaml
var defaultPolicy []byte

func main() {
	listen := flag.String("listen", "127.0.0.1:8080", "address to listen on")
	cfgPath := flag.String("config", "", "policy YAML file (default: the built-in example policy)")
	work := flag.Duration("work", 20*time.Millisecond, "simulated work of a request at full quality")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	name, src := "policy.yaml", defaultPolicy
	if *cfgPath != "" {
		b, err := os.ReadFile(*cfgPath)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		name, src = *cfgPath, b
	}
	cfg, err := policy.Parse(name, src) // errors name the file, line and setting
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log.Info("listening", "addr", ln.Addr().String())
	if err := serve(ctx, ln, *cfg, *work, log); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// serve runs the service on ln until ctx ends, then drains for up to 5 s.
func serve(ctx context.Context, ln net.Listener, cfg policy.Config, work time.Duration, log *slog.Logger) error {
	reg := prometheus.NewRegistry()
	pol, err := policy.New(cfg, policy.Options{Logger: log, Registerer: reg})
	if err != nil {
		return err
	}
	// An internal resource guarded with the stage API: at most 4 requests
	// use the "database" at once, 16 more may wait up to 200 ms.
	dbCtrl := control.DefaultStaticConcurrencyConfig()
	dbCtrl.Limit = 4
	db, err := stage.New(stage.Options{Name: "db", Controller: &dbCtrl, MaxQueue: 16, QueueTimeout: 200 * time.Millisecond}, time.Now())
	if err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go pol.Run(runCtx)
	go db.Run(runCtx)

	app := http.NewServeMux()
	app.HandleFunc("/search", func(w http.ResponseWriter, r *http.Request) {
		q := sluice.QualityFrom(r.Context()) // 1 = full service
		// Do less work at lower quality: fewer results, less time.
		results := max(1, int(10*q))
		if !sleep(r.Context(), time.Duration(float64(work)*q)) {
			return
		}
		writeJSON(w, map[string]any{"query": r.URL.Query().Get("q"), "quality": q, "results": results})
	})
	app.HandleFunc("/orders", func(w http.ResponseWriter, r *http.Request) {
		done, err := db.Admit(r.Context(), 0)
		if err != nil {
			http.Error(w, "database busy", http.StatusServiceUnavailable)
			return
		}
		if !sleep(r.Context(), work) {
			// The caller left: its wait says nothing about the database.
			done(sluice.Ignore)
			return
		}
		done(sluice.Success)
		writeJSON(w, map[string]any{"order": "ok"})
	})

	root := http.NewServeMux()
	root.Handle("/", sluice.Middleware(pol)(app))
	root.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	root.HandleFunc("/state", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"policy": pol.State(10), "db": db.State(10)})
	})
	srv := &http.Server{Handler: root, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	if err := srv.Shutdown(sctx); err != nil {
		return err
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// sleep waits d or until ctx ends; it reports whether d elapsed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// SPDX-License-Identifier: Apache-2.0

package policy_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/control/auto"
	"github.com/sluicehq/sluice/policy"
)

// Parse reads a policy from YAML (Load from a file): decoded strictly,
// defaults filled, validated.
func ExampleParse() {
	src := []byte(`
classes:
  order: [interactive, batch]        # highest priority first
  default: interactive
  rules:
    - class: batch
      header: {name: X-Batch, value: "1", trust: any}
stages:
  - name: search
    match: {path_prefix: /search}
    controller: seda
    differentiate: false             # degradation: one controller for all classes
    params: {target: 100ms, nreq: 50, degrade: {enabled: true, quality_min: 0.2}}
  - name: orders
    match: {path_prefix: /orders, methods: [GET, POST]}
    controller: seda                 # one AIMD rate per class
    params: {target: 200ms}
    class_targets: {batch: 1s}
reject: {retry_after: 1s, retry_jitter: 2s}
`)
	cfg, err := policy.Parse("policy.yaml", src)
	if err != nil {
		panic(err) // a *policy.ConfigError: file, line, field
	}
	ctrls, err := cfg.StageControllers()
	if err != nil {
		panic(err)
	}
	orders := ctrls["orders"].(*control.SEDAConfig)
	fmt.Println(cfg.Stages[1].Controller, orders.Target, orders.Classes)
	// Output: seda 200ms 2
}

// A policy file's error names the file, the line and the setting.
func ExampleParse_error() {
	_, err := policy.Parse("policy.yaml", []byte(`
stages:
  - name: api
    controller: seda
    params: {target: 100ms, alpha: 1.5}
`))
	fmt.Println(err)
	// Output: policy.yaml:5: stages[0].params.alpha: 1.5 is invalid: must be within [0, 1)
}

// The same kind of policy written in Go: a stage's controller is its
// configuration as a Go value, validated as params are.
func ExampleStageConfig() {
	seda := control.DefaultSEDAConfig() // start from the defaults
	seda.Target = 200 * time.Millisecond
	cfg := policy.Config{
		Classes: policy.ClassesConfig{Order: []string{"interactive", "batch"}},
		Stages: []policy.StageConfig{
			{Name: "orders", Match: policy.MatchConfig{PathPrefix: "/orders"}, Control: &seda},
			{Name: "search", Match: policy.MatchConfig{PathPrefix: "/search"}}, // auto at its defaults
		},
	}
	pol, err := policy.New(cfg, policy.Options{})
	if err != nil {
		panic(err) // a *sluice.FieldError: "stages[0].params.target: …"
	}
	for _, name := range []string{"orders", "search"} {
		fmt.Println(name, pol.Stage(name).Controller().Current().Kind)
	}
	// Output:
	// orders rate
	// search concurrency
}

// Wrap is the one call of the common case: a handler behind auto told
// only its SLO, as the proxy's quick start (sluice proxy --slo 250ms).
func ExampleWrap() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // ends the control loop

	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "hello") })
	handler, pol, err := policy.Wrap(ctx, mux, policy.Auto(250*time.Millisecond), policy.Options{})
	if err != nil {
		panic(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(pol.Collector()) // sluice_requests_total{stage,class,outcome}, …

	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	fmt.Print(rec.Code, " ", rec.Body.String())
	// Output: 200 hello
}

// Auto is the policy of the quick start: one stage, all, running auto.
func ExampleAuto() {
	cfg := policy.Auto(250 * time.Millisecond)
	ctrls, err := cfg.StageControllers()
	if err != nil {
		panic(err)
	}
	auto := ctrls[policy.AutoStage].(*auto.Config)
	fmt.Println(policy.AutoStage, auto.SLO, auto.Period)
	// Output: all 250ms 100ms
}

// A service's own policy: read (Load from a file, or Parse), built, its
// control loop run and its metrics registered, then every request of the
// service's mux put through it.
func ExampleNew() {
	cfg, err := policy.Load("../examples/middleware/policy.yaml") // or policy.Parse(name, data)
	if err != nil {
		panic(err) // a *policy.ConfigError: "…/policy.yaml:15: stages[0].params.target: …"
	}
	pol, err := policy.New(*cfg, policy.Options{Logger: slog.Default()})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go pol.Run(ctx) // the control loop: one goroutine per stage, until ctx ends

	reg := prometheus.NewRegistry()
	reg.MustRegister(pol.Collector())

	mux := http.NewServeMux()
	mux.HandleFunc("/search", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "results") })
	handler := sluice.Middleware(pol)(mux) // http.ListenAndServe("127.0.0.1:8080", handler)

	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, httptest.NewRequest("GET", "/search?q=x", nil))
	fmt.Print(rec.Code, " ", rec.Body.String())
	// Output: 200 results
}

// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
	"gopkg.in/yaml.v3"

	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/internal/localredis"
	"github.com/sluicehq/sluice/internal/testkit"
	"github.com/sluicehq/sluice/policy"
	"github.com/sluicehq/sluice/share"
	"github.com/sluicehq/sluice/stage"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// instance is a runner with a static-rate stage of global rate 100 and
// client shares of B = 30 KB/s (a 10 %, b 20 %, others 70 %).
type instance struct {
	r   *Runner
	st  *stage.Stage
	sh  *share.Shares
	log *testkit.SyncBuffer
	m   *Metrics
	reg *prometheus.Registry
}

func newInstance(t *testing.T, addr, id string, initial int) *instance {
	t.Helper()
	rc := control.StaticRateConfig{Rate: 100, Period: time.Second}
	st, err := stage.New(stage.Options{Name: "api", Controller: &rc}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	scfg := share.DefaultConfig()
	scfg.TotalBandwidth = 30000
	scfg.Clients = []share.ClientConfig{{Name: "a", Share: 10}, {Name: "b", Share: 20}}
	sh, err := share.New(scfg)
	if err != nil {
		t.Fatal(err)
	}
	// A Redis exchange gets 250 ms (the default, a quarter of the
	// period, would be 25 ms at a 100 ms period: under the race detector
	// on a loaded machine a healthy local Redis misses that).
	cfg := Config{Addrs: []string{addr}, Instance: id, Prefix: "test-" + strings.ReplaceAll(t.Name(), "/", "_"),
		Period: 300 * time.Millisecond, Timeout: 250 * time.Millisecond, InitialInstances: initial}
	cfg.SetDefaults()
	in := &instance{st: st, sh: sh, log: &testkit.SyncBuffer{}, reg: prometheus.NewRegistry()}
	if in.m, err = NewMetrics(in.reg); err != nil {
		t.Fatal(err)
	}
	in.r, err = NewRunner(cfg, Targets{Stages: []StageTarget{{Stage: st, Global: 100}}, Shares: sh},
		Options{Logger: slog.New(slog.NewTextHandler(in.log, nil)), Metrics: in.m})
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func (in *instance) rate() float64 { return in.st.State(0).Setting }

// Two instances on a real Redis: before the first sync each enforces
// 1/initial_instances; synced, they split the rate and B between them;
// with Redis killed each falls back to 1/N with the N it knew, logs it
// and shows it in the metrics; with Redis back (empty) they resync.
func TestRunnerSyncFallbackResync(t *testing.T) {
	srv := localredis.ForTest(t)
	a := newInstance(t, srv.Addr, "a", 2)
	b := newInstance(t, srv.Addr, "b", 2)
	defer a.r.store.Close()
	defer b.r.store.Close()
	ctx := t.Context()
	a.r.Prime(time.Now())
	if a.rate() != 50 || a.sh.Snapshot().TotalBandwidth != 15000 {
		t.Fatalf("primed: rate %g, B %g; want 50 and 15000", a.rate(), a.sh.Snapshot().TotalBandwidth)
	}
	for range 2 {
		a.r.Sync(ctx, time.Now())
		b.r.Sync(ctx, time.Now())
	}
	for _, in := range []*instance{a, b} {
		v := in.r.View()
		if v.Mode != ModeSynced || v.Instances != 2 || strings.Join(v.Live, ",") != "a,b" {
			t.Fatalf("%s: view %+v", v.Instance, v)
		}
		if r := in.rate(); r != 50 {
			t.Fatalf("%s: rate %g, want 50 (no demand: an even split)", v.Instance, r)
		}
		if b := in.sh.Snapshot().TotalBandwidth; b < 14999 || b > 15001 {
			t.Fatalf("%s: B %g, want 15000", v.Instance, b)
		}
	}
	if err := testutil.CollectAndCompare(a.reg, strings.NewReader(`
# HELP sluice_cluster_fallback 1 while this instance enforces 1/N of every global budget locally (Redis unreachable, or no sync yet).
# TYPE sluice_cluster_fallback gauge
sluice_cluster_fallback 0
# HELP sluice_cluster_instances Instances this one counts in the cluster (N).
# TYPE sluice_cluster_instances gauge
sluice_cluster_instances 2
# HELP sluice_cluster_syncs_total Cluster syncs with Redis, by result (ok, error).
# TYPE sluice_cluster_syncs_total counter
sluice_cluster_syncs_total{result="error"} 0
sluice_cluster_syncs_total{result="ok"} 2
`), "sluice_cluster_fallback", "sluice_cluster_instances", "sluice_cluster_syncs_total"); err != nil {
		t.Fatal(err)
	}

	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	fa := a.r.Sync(ctx, time.Now())
	if fa.Mode != ModeFallback || !fa.Changed || a.rate() != 50 || fa.Instances != 2 {
		t.Fatalf("fallback: %+v, rate %g", fa, a.rate())
	}
	if !strings.Contains(a.log.String(), "Redis unreachable") {
		t.Fatalf("no warning logged: %s", a.log.String())
	}
	if v := a.r.View(); v.LastError == "" || v.Mode != ModeFallback {
		t.Fatalf("view %+v", v)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	back := a.r.Sync(ctx, time.Now())
	if back.Mode != ModeSynced || !back.Changed || back.Instances != 2 {
		t.Fatalf("resync: %+v (b must count until it re-registers)", back)
	}
	b.r.Sync(ctx, time.Now())
	a.r.Sync(ctx, time.Now())
	if a.rate()+b.rate() < 99.99 || a.rate()+b.rate() > 100.01 {
		t.Fatalf("after resync: %g + %g", a.rate(), b.rate())
	}
	if !strings.Contains(a.log.String(), "cluster: in sync") {
		t.Fatalf("no resync logged: %s", a.log.String())
	}
}

// A Redis that does not answer (paused) costs one sync its timeout, not
// a hang: the sync returns and the instance falls back.
func TestRunnerSlowRedisFallsBack(t *testing.T) {
	srv := localredis.ForTest(t)
	a := newInstance(t, srv.Addr, "a", 1)
	defer a.r.store.Close()
	if m := a.r.Sync(t.Context(), time.Now()).Mode; m != ModeSynced {
		t.Fatalf("first sync: %s", m)
	}
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	defer srv.Resume()
	done := make(chan Assignment, 1)
	go func() { done <- a.r.Sync(t.Context(), time.Now()) }()
	select {
	case fa := <-done:
		if fa.Mode != ModeFallback || !strings.Contains(fa.Reason, "no answer within") {
			t.Fatalf("paused Redis: %+v", fa)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a sync against a paused Redis did not return within 10 s")
	}
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	if m := a.r.Sync(t.Context(), time.Now()).Mode; m != ModeSynced {
		t.Fatalf("after resume: %s", m)
	}
}

// Run syncs on its ticker and stops with its context, announcing the
// shutdown when told to: the other instance stops counting it at once.
// TestMain checks that no goroutine is left behind.
func TestRunnerRunStopsAndLeaves(t *testing.T) {
	srv := localredis.ForTest(t)
	a := newInstance(t, srv.Addr, "a", 1)
	b := newInstance(t, srv.Addr, "b", 1)
	defer b.r.store.Close()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { a.r.Run(ctx); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for a.r.View().Syncs < 3 {
		if time.Now().After(deadline) {
			t.Fatal("Run did not sync three times within 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := b.r.Sync(t.Context(), time.Now()).Instances; n != 2 {
		t.Fatalf("b counts %d instances with a running", n)
	}
	a.r.SetLeaving()
	cancel()
	<-done
	if n := b.r.Sync(t.Context(), time.Now()).Instances; n != 1 {
		t.Fatalf("b counts %d instances after a left", n)
	}
	if b.rate() != 100 {
		t.Fatalf("b's rate %g, want the whole 100", b.rate())
	}
}

// NewRunner refuses a stage without a fixed budget and a bad budget.
func TestNewRunnerRefusesBadTargets(t *testing.T) {
	cfg := Config{Addrs: []string{"127.0.0.1:1"}, Instance: "x"}
	cfg.SetDefaults()
	sc := control.DefaultSEDAConfig()
	sc.Target = time.Second
	seda, err := stage.New(stage.Options{Name: "s", Controller: &sc}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewRunner(cfg, Targets{Stages: []StageTarget{{Stage: seda, Global: 5}}}, Options{}); err == nil {
		t.Fatal("a seda stage was accepted")
	}
	rc := control.StaticRateConfig{Rate: 10, Period: time.Second}
	st, err := stage.New(stage.Options{Name: "r", Controller: &rc}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewRunner(cfg, Targets{Stages: []StageTarget{{Stage: st, Global: -1}}}, Options{}); err == nil {
		t.Fatal("a negative budget was accepted")
	}
	cfg.PasswordFile = "/nonexistent/pw"
	if _, err := NewRunner(cfg, Targets{}, Options{}); err == nil || !strings.Contains(err.Error(), "password_file") {
		t.Fatalf("a missing password file: %v", err)
	}
}

// PolicyTargets picks a policy's static stages with their configured
// budgets, leaving out adaptive stages and the local ones.
func TestPolicyTargets(t *testing.T) {
	var cfg policy.Config
	for _, s := range []struct{ name, ctrl, params string }{
		{"rate", "static-rate", "rate: 300"}, {"conc", "static-concurrency", "limit: 12"},
		{"mine", "static-rate", "rate: 5"}, {"adaptive", "seda", "target: 1s"},
	} {
		sc := policy.StageConfig{Name: s.name, Controller: s.ctrl, Match: policy.MatchConfig{PathPrefix: "/" + s.name}}
		if err := yaml.Unmarshal([]byte(s.params), &sc.Params); err != nil {
			t.Fatal(err)
		}
		cfg.Stages = append(cfg.Stages, sc)
	}
	pol, err := policy.New(cfg, policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tg, err := PolicyTargets(pol, nil, []string{"mine"})
	if err != nil {
		t.Fatal(err)
	}
	if len(tg.Stages) != 2 || tg.Stages[0].Stage.Name() != "rate" || tg.Stages[0].Global != 300 ||
		tg.Stages[1].Stage.Name() != "conc" || tg.Stages[1].Global != 12 || tg.Shares != nil {
		t.Fatalf("targets %+v", tg)
	}
}

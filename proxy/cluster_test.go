// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/internal/localredis"
)

// A bad cluster section is refused with the file, line and
// cluster.<field>.
func TestClusterConfigErrors(t *testing.T) {
	for _, c := range []struct{ extra, want string }{
		{"cluster: {}\n", "cluster.addrs: [] is invalid"},
		{"cluster: {addrs: [redis]}\n", `cluster.addrs[0]: "redis" is invalid`},
		{"cluster: {addrs: [127.0.0.1:6379], period: 10ms}\n", "cluster.period: 10ms is invalid"},
		{"cluster: {addrs: [127.0.0.1:6379], heartbeat_ttl: 1s}\n", "cluster.heartbeat_ttl: 1s is invalid"},
		{"cluster: {addrs: [127.0.0.1:6379], instance: 'a b'}\n", `cluster.instance: "a b" is invalid`},
		{"cluster: {addrs: [127.0.0.1:6379], local_stages: [nope]}\n", `cluster.local_stages[0]: "nope" is invalid: no stage has that name`},
		{"stages: [{name: s, controller: seda, params: {target: 1s}}]\ncluster: {addrs: [127.0.0.1:6379], local_stages: [s]}\n",
			`cluster.local_stages[0]: "s" is invalid: stage "s" has controller "seda"; only static-concurrency or static-rate budgets are split`},
		{"cluster: {addrs: [127.0.0.1:6379], bogus: 1}\n", "bogus"},
	} {
		_, err := Parse("c.yaml", []byte(goodHead+c.extra))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.extra, err, c.want)
		}
	}
	cfg, err := Parse("c.yaml", []byte(goodHead+"cluster: {addrs: [127.0.0.1:6379], instance: edge-1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c := cfg.Cluster; c.Prefix != "sluice" || c.Period != time.Second || c.HeartbeatTTL != 3*time.Second || c.InitialInstances != 1 {
		t.Fatalf("defaults %+v", c)
	}
	if err := Check(cfg); err != nil {
		t.Fatal(err)
	}
}

// clusterProxyConfig is a proxy with a global static rate of 100 req/s
// and a local one, in a cluster on addr.
func clusterProxyConfig(backendURL, addr, id string) string {
	return baseConfig(backendURL, fmt.Sprintf(`stages:
  - {name: api, match: {path_prefix: /api}, controller: static-rate, params: {rate: 100}}
  - {name: own, match: {path_prefix: /own}, controller: static-rate, params: {rate: 40}}
cluster:
  addrs: [%s]
  instance: %s
  prefix: proxytest
  period: 100ms
  initial_instances: 2
  local_stages: [own]
`, addr, id))
}

// startClusterPair starts proxies a and b (clusterProxyConfig) on a
// Redis of their own and waits until both are synced with 2 live
// instances. config gives the configuration of instance id.
func startClusterPair(t *testing.T) (a, b *running, config func(id string) string) {
	t.Helper()
	rs := localredis.ForTest(t)
	be := backend(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) })
	config = func(id string) string { return clusterProxyConfig(be.URL, rs.Addr, id) }
	a, b = startProxy(t, config("a")), startProxy(t, config("b"))
	eventually(t, "both proxies synced with 2 instances", func() bool {
		for _, p := range []*running{a, b} {
			c := p.state(t).Cluster
			if c == nil || c.Mode != cluster.ModeSynced || c.Instances != 2 || len(c.Live) != 2 {
				return false
			}
		}
		return true
	})
	return a, b, config
}

func stageSetting(st StateDoc, name string) float64 {
	for _, s := range st.Stages {
		if s.Name == name {
			return s.Setting
		}
	}
	return -1
}

// Two proxies on one Redis split the global rate, leave the local one
// alone, show the cluster in /state and /metrics; when one shuts down
// the other takes the whole budget.
func TestClusterTwoProxies(t *testing.T) {
	a, b, _ := startClusterPair(t)
	sa, sb := a.state(t), b.state(t)
	if sum := stageSetting(sa, "api") + stageSetting(sb, "api"); sum < 99.9 || sum > 100.1 {
		t.Fatalf("api parts sum to %g, want 100", sum)
	}
	if stageSetting(sa, "own") != 40 || stageSetting(sb, "own") != 40 {
		t.Fatalf("local stage split: %g, %g", stageSetting(sa, "own"), stageSetting(sb, "own"))
	}
	if len(sa.Cluster.Budgets) != 1 || sa.Cluster.Budgets[0].Stage != "api" || sa.Cluster.Budgets[0].Global != 100 {
		t.Fatalf("budgets %+v", sa.Cluster.Budgets)
	}
	m := a.metricsText(t)
	for _, want := range []string{"sluice_cluster_instances 2", "sluice_cluster_fallback 0", `sluice_cluster_budget{scope="global",stage="api"} 100`,
		`sluice_cluster_mode{mode="synced"} 1`} {
		if !strings.Contains(m, want) {
			t.Fatalf("metrics lack %q:\n%s", want, m)
		}
	}
	b.cancel()
	<-b.done
	b.done <- nil // for the cleanup
	eventually(t, "a alone with the whole rate", func() bool {
		st := a.state(t)
		return st.Cluster.Instances == 1 && stageSetting(st, "api") == 100
	})
}

// Without a cluster section nothing changes: no view, no metrics.
func TestNoClusterSectionNoCluster(t *testing.T) {
	be := backend(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) })
	p := startProxy(t, baseConfig(be.URL, "stages: [{name: api, controller: static-rate, params: {rate: 100}}]\n"))
	if st := p.state(t); st.Cluster != nil || stageSetting(st, "api") != 100 {
		t.Fatalf("cluster view %+v, api %g", st.Cluster, stageSetting(st, "api"))
	}
	if strings.Contains(p.metricsText(t), "sluice_cluster_") {
		t.Fatal("cluster metrics without a cluster section")
	}
}

// A proxy whose Redis is unreachable from the start primes with
// 1/initial_instances, falls back, and serves.
func TestClusterUnreachableRedisStillServes(t *testing.T) {
	be := backend(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) })
	ln := freeClosedAddr(t)
	p := startProxy(t, clusterProxyConfig(be.URL, ln, "a"))
	eventually(t, "fallback", func() bool {
		c := p.state(t).Cluster
		return c != nil && c.Mode == cluster.ModeFallback && c.LastError != ""
	})
	if s := stageSetting(p.state(t), "api"); s != 50 {
		t.Fatalf("api %g, want 50 (1/initial_instances)", s)
	}
	if code, _, _ := get(t, p.url+"/api/x", nil); code != 204 {
		t.Fatalf("request through a proxy without Redis: %d", code)
	}
}

// freeClosedAddr returns a loopback address nothing listens on.
func freeClosedAddr(t *testing.T) string {
	t.Helper()
	s := backend(t, func(http.ResponseWriter, *http.Request) {})
	addr := strings.TrimPrefix(s.URL, "http://")
	s.Close()
	return addr
}

// A reload replaces the runner: the new one keeps the cluster it knew
// (no return to initial_instances), applies the new global budget, and
// the old one stops.
func TestClusterReload(t *testing.T) {
	a, _, config := startClusterPair(t)
	old := a.srv.h.gen.Load().cluster
	next := strings.Replace(config("a"), "rate: 100}", "rate: 300}", 1)
	cfg, err := Parse("next.yaml", []byte(next))
	if err != nil {
		t.Fatal(err)
	}
	// The listeners of a running proxy are bound; keep them as they are.
	cfg.Listeners, cfg.Admin = a.srv.Config().Listeners, a.srv.Config().Admin
	if err := a.srv.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	g := a.srv.h.gen.Load()
	if g.cluster == old {
		t.Fatal("the runner was not replaced")
	}
	if v := g.cluster.View(); v.Instances != 2 {
		t.Fatalf("after the reload the runner counts %d instances, want the 2 it knew", v.Instances)
	}
	eventually(t, "the new global budget split", func() bool {
		st := a.state(t)
		return len(st.Cluster.Budgets) == 1 && st.Cluster.Budgets[0].Global == 300 && st.Cluster.Mode == cluster.ModeSynced
	})
	// b still has 100 configured: each splits its own, and both say so.
	eventually(t, "a warning about the different budgets", func() bool { return len(a.state(t).Cluster.Warnings) > 0 })
	syncs := old.View().Syncs
	time.Sleep(300 * time.Millisecond) // three of the old runner's periods
	if old.View().Syncs != syncs {
		t.Fatal("the old runner still syncs after the reload")
	}
}

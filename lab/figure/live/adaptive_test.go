// SPDX-License-Identifier: Apache-2.0

package live

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/control/auto"
	"github.com/sluicehq/sluice/lab/figure"
	"github.com/sluicehq/sluice/lab/testbed"
	"github.com/sluicehq/sluice/proxy"
	"github.com/sluicehq/sluice/stage"
)

// Every sluice row of the adaptive experiment builds a valid proxy
// configuration, typed and validated, with least-in-flight balancing over
// every backend; with --proxy-process it goes to a file that the proxy
// command loads as the same proxy: the row's controller and options, the
// backends, on the returned loopback ports.
func TestAdaptiveProxyConfigs(t *testing.T) {
	env := newEnv("adaptive", Options{AutoKnee: "overtakes", ProxyProcess: true})
	dir := t.TempDir()
	for _, row := range adaptiveRows {
		if row.controller == "" {
			continue
		}
		cfg, err := adaptiveProxyConfig(env, row, []string{"http://127.0.0.1:1", "http://127.0.0.1:2"})
		if err != nil {
			t.Fatalf("%s: %v", row.name, err)
		}
		if cfg.Backends.Balance != proxy.BalanceLeastInFlight || len(cfg.Backends.Servers) != 2 || cfg.Stages[0].Controller != row.controller {
			t.Errorf("%s: %+v", row.name, cfg.Backends)
		}
		file, listen, admin, err := writeChildConfig(dir, row.name, cfg)
		if err != nil {
			t.Fatalf("%s: %v", row.name, err)
		}
		got, err := proxy.LoadFile(file)
		if err != nil {
			t.Fatalf("%s: %v", row.name, err)
		}
		if len(got.Listeners) != 1 || got.Listeners[0].Addr != listen || got.Admin.Addr != admin ||
			!strings.HasPrefix(listen, "127.0.0.1:") || listen == admin {
			t.Errorf("%s: listeners %+v admin %q, want %s and %s", row.name, got.Listeners, got.Admin.Addr, listen, admin)
		}
		if got.Backends.Balance != proxy.BalanceLeastInFlight || len(got.Backends.Servers) != 2 ||
			got.Stages[0].Controller != row.controller {
			t.Errorf("%s: backends %+v, controller %s", row.name, got.Backends, got.Stages[0].Controller)
		}
		var p map[string]any
		if n := got.Stages[0].Params; n.Kind != 0 {
			if err := n.Decode(&p); err != nil {
				t.Fatalf("%s: %v", row.name, err)
			}
		}
		if row.controller == "auto" && p["knee"] != "overtakes" {
			t.Errorf("%s: knee %v in the file, want overtakes", row.name, p["knee"])
		}
	}
}

// --auto-knee, --auto-median-probe, --auto-burst-window and
// --auto-tail-pool reach the auto row's stage, and only it.
func TestAdaptiveAutoOptions(t *testing.T) {
	env := newEnv("adaptive", Options{AutoKnee: "overtakes", AutoMedianProbe: true, AutoBurstWindow: time.Second, AutoTailPool: 2000})
	for _, row := range adaptiveRows {
		if row.controller == "" {
			continue
		}
		cfg, err := adaptiveProxyConfig(env, row, []string{"http://127.0.0.1:1"})
		if err != nil {
			t.Fatalf("%s: %v", row.name, err)
		}
		got := "not auto"
		if a, ok := cfg.Stages[0].Control.(*auto.Config); ok {
			got = fmt.Sprint(a.Knee, " ", a.MedianProbe, " ", a.BurstWindow, " ", a.TailPool)
		}
		want := "not auto"
		if row.controller == "auto" {
			want = "overtakes true 1s 2000"
		}
		if got != want {
			t.Errorf("%s: knee, median_probe, burst_window, tail_pool = %s, want %s", row.name, got, want)
		}
	}
}

// The quick form fits in about a minute; the full one runs every row
// through every phase.
func TestAdaptivePlans(t *testing.T) {
	for _, quick := range []bool{false, true} {
		pl, err := planAdaptive(newEnv("adaptive", Options{Quick: quick}))
		if err != nil {
			t.Fatal(err)
		}
		var total time.Duration
		for _, ph := range pl.phases {
			total += time.Duration(len(pl.rows)) * pl.length(ph)
			if pl.at(ph) >= pl.length(ph) {
				t.Errorf("phase %s: event at %v after the end %v", ph.name, pl.at(ph), pl.length(ph))
			}
		}
		switch {
		case quick && total > 45*time.Second:
			t.Errorf("quick form: %v of load, want ≤ 45 s", total)
		case !quick && (len(pl.rows) != len(adaptiveRows) || len(pl.phases) != 5):
			t.Errorf("full form: %d rows, %d phases", len(pl.rows), len(pl.phases))
		}
	}
}

// --rows runs only the rows it names, in the table's order (auto and the
// two peers: the rows its checks read); an unknown name is an error that
// names it and the rows there are.
func TestAdaptivePlanRows(t *testing.T) {
	pl, err := planAdaptive(newEnv("adaptive", Options{Rows: []string{"auto", "haproxy", "nginx"}}))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range pl.rows {
		names = append(names, r.name)
	}
	if got := strings.Join(names, ","); got != "nginx,haproxy,auto" {
		t.Errorf("rows %s, want nginx,haproxy,auto", got)
	}
	_, err = planAdaptive(newEnv("adaptive", Options{Rows: []string{"auto", "envoy"}}))
	if err == nil || !strings.Contains(err.Error(), `"envoy"`) || !strings.Contains(err.Error(), "gradient2") {
		t.Errorf("unknown row: %v, want an error naming \"envoy\" and the rows", err)
	}
}

// nginx and HAProxy get one server line per backend.
func TestPeerConfsSeveralBackends(t *testing.T) {
	n := validNginx()
	n.Backends = []string{"127.0.0.1:1", "127.0.0.1:2"}
	h := validHAProxy()
	h.Backends = n.Backends
	for _, c := range []struct {
		text string
		want []string
	}{
		{n.Text(), []string{"server 127.0.0.1:1;", "server 127.0.0.1:2;"}},
		{h.Text(), []string{"server app1 127.0.0.1:1 maxconn 4", "server app2 127.0.0.1:2 maxconn 4"}},
	} {
		for _, w := range c.want {
			if !strings.Contains(c.text, w) {
				t.Errorf("configuration lacks %q:\n%s", w, c.text)
			}
		}
	}
}

// testBackend is the figure's backend of 4 workers in the test's process,
// closed when the test ends.
func testBackend(t *testing.T) *adaptiveBackend {
	t.Helper()
	be, err := startAdaptiveBackend(t.Context(), newEnv("adaptive", Options{}), 1, 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = be.Close() })
	return be
}

// A phase's change reaches a backend in the lab's process directly and a
// backend in a process of its own (--backend-process) over its control
// paths: the service time scaled, then the workers changed.
func TestAdaptiveBackendApply(t *testing.T) {
	in := testBackend(t)
	cfg := testbed.DefaultQueueConfig()
	cfg.Workers, cfg.Service, cfg.Control = 4, "exp:10ms", true
	q, err := testbed.NewQueue(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	srv := httptest.NewServer(q)
	defer srv.Close()
	child := &adaptiveBackend{url: srv.URL, close: func() error { return nil }}
	for _, c := range []struct {
		be *adaptiveBackend
		q  *testbed.Queue
	}{{in, in.q}, {child, q}} {
		if err := c.be.apply(t.Context(), figure.AdaptiveChange{Scale: 2}); err != nil {
			t.Fatal(err)
		}
		if got := c.q.Capacity(); math.Abs(got-200) > 1e-9 {
			t.Errorf("%s: capacity %v after scale 2, want 200", c.be.url, got)
		}
		if err := c.be.apply(t.Context(), figure.AdaptiveChange{Workers: 16}); err != nil {
			t.Fatal(err)
		}
		if got := c.q.Capacity(); math.Abs(got-800) > 1e-9 {
			t.Errorf("%s: capacity %v after 16 workers, want 800", c.be.url, got)
		}
	}
}

// The backends keep a record of every request, read in the lab's process
// or over HTTP from a child, and the figure's service p99 is over the
// demands of the requests served from the event on.
func TestAdaptiveBackendRecords(t *testing.T) {
	in := testBackend(t)
	child := &adaptiveBackend{url: in.url, close: func() error { return nil }}
	before := time.Now()
	for i := range 20 {
		if i == 10 {
			time.Sleep(2 * time.Millisecond)
			before = time.Now()
		}
		resp, err := http.Get(in.url + "/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	for _, be := range []*adaptiveBackend{in, child} {
		recs, err := be.records(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != 20 {
			t.Fatalf("%d records, want 20", len(recs))
		}
		all, late := servedDemands(recs, time.Time{}), servedDemands(recs, before)
		if len(all) != 20 || len(late) != 10 {
			t.Errorf("served demands: %d in all and %d from the 11th request, want 20 and 10", len(all), len(late))
		}
		for _, d := range all {
			if !(d > 0 && d < 1000) {
				t.Errorf("demand %v ms, want a service time of a few ms", d)
			}
		}
	}
	if _, err := (&adaptiveBackend{url: "http://127.0.0.1:1"}).records(t.Context()); err == nil {
		t.Error("records from a closed port: no error")
	}
}

// A child proxy's stage is read from its admin /state: the named stage,
// or false for another name or an admin listener that fails.
func TestChildProxyStage(t *testing.T) {
	var status = http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/state" || r.URL.Query().Get("decisions") != "0" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(proxy.StateDoc{Stages: []stage.State{{Name: "other"}, {Name: mainStage, Controller: "auto", Setting: 4}}})
	}))
	defer srv.Close()
	px := &childProxy{Admin: srv.URL, hc: srv.Client()}
	st, ok := px.stage(mainStage, 0)
	if !ok || st.Controller != "auto" || st.Setting != 4 {
		t.Fatalf("stage = %+v, %v", st, ok)
	}
	if _, ok := px.stage("missing", 0); ok {
		t.Error("a missing stage was found")
	}
	status = http.StatusInternalServerError
	if _, ok := px.stage(mainStage, 0); ok {
		t.Error("a failing /state gave a stage")
	}
	if _, ok := (&childProxy{hc: srv.Client()}).stage(mainStage, 0); ok {
		t.Error("a proxy without an admin address gave a stage")
	}
}

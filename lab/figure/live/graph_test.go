// SPDX-License-Identifier: Apache-2.0

package live

import (
	"context"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/lab/figure"
	"github.com/sluicehq/sluice/lab/testbed"
	"github.com/sluicehq/sluice/policy"
)

// The quick forms stay short; the full ones are the figure's defaults.
func TestGraphPlan(t *testing.T) {
	for _, name := range []string{"graph", "graph-crowd", "graph-recover"} {
		full := planGraph(newEnv(name, Options{}), name)
		if d := defaultGraph(name); full.c.End() != d.End() || len(full.c.Rows) != len(d.Rows) {
			t.Errorf("%s: the full form is not the figure's defaults", name)
		}
		quick := planGraph(newEnv(name, Options{Quick: true}), name)
		if load := time.Duration(len(quick.c.Rows)) * quick.c.End(); load > 70*time.Second {
			t.Errorf("%s: the quick form runs %v of load", name, load)
		}
	}
}

// Over gRPC (Options.Transport) the plan keeps the figure's spec and
// runs the rows that have a gRPC form, the quick form short too; a row
// without one is refused, and the clients are given their own retry or
// sluice's interceptors.
func TestGraphPlanGRPC(t *testing.T) {
	for _, name := range []string{"graph", "graph-crowd", "graph-recover"} {
		for _, quick := range []bool{false, true} {
			pl := planGraph(newEnv(name, Options{Quick: quick, Transport: "grpc"}), name)
			want := figure.GraphGRPCRows
			if name == "graph-recover" {
				want = figure.GraphRecoverGRPCRows
			}
			if pl.c.Transport != "grpc" || !slices.Equal(pl.c.Rows, want) {
				t.Errorf("%s quick %v: transport %q rows %v", name, quick, pl.c.Transport, pl.c.Rows)
			}
			if d := defaultGraph(name); !quick && pl.c.End() != d.End() {
				t.Errorf("%s: the full form is not the figure's defaults", name)
			}
			if load := time.Duration(len(pl.c.Rows)) * pl.c.End(); quick && load > 70*time.Second {
				t.Errorf("%s: the quick form runs %v of load", name, load)
			}
		}
	}
	pl := planGraph(newEnv("graph", Options{Transport: "grpc"}), "graph")
	if _, err := pl.runRowGRPC(context.Background(), newEnv("graph", Options{}), t.TempDir(), figure.GraphNaive, &graphProcs{}); err == nil {
		t.Error("the naive row accepted over gRPC")
	}
	for row, n := range map[string]int{figure.GraphThrottle: 2, figure.GraphInProcess: 1, figure.GraphInProcessWindow: 1} {
		// grpc-throttle: the service config and the deadline's stamp;
		// inprocess: one chain of both interceptors.
		g, err := pl.grpcClientOf(row, 1)
		if err != nil || len(g.DialOptions) != n {
			t.Errorf("%s: %v, %d dial options, want %d", row, err, len(g.DialOptions), n)
		}
	}
}

// The configurations the experiment writes are accepted by the programs
// that read them: the tiers' policy file and the proxies' configuration.
func TestGraphConfigs(t *testing.T) {
	pl := planGraph(newEnv("graph", Options{}), "graph")
	dir := t.TempDir()
	file, err := pl.writePolicy(dir)
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	if len(pol.Stages) != 1 || pol.Stages[0].Controller != "auto" || len(pol.Classes.Order) != 2 {
		t.Errorf("policy read back: %+v", pol)
	}
	written, err := pl.c.Policy()
	if err != nil {
		t.Fatal(err)
	}
	got, err := pol.StageControllers()
	if err != nil {
		t.Fatal(err)
	}
	if want, err := written.StageControllers(); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("controller read back %+v, written %+v (%v)", got[figure.GraphStage], want[figure.GraphStage], err)
	}
	if _, err := pl.proxyConfig("127.0.0.1:1", "127.0.0.1:2", "http://127.0.0.1:3"); err != nil {
		t.Errorf("proxy configuration: %v", err)
	}
}

func defaultGraph(name string) figure.GraphParams {
	if name == "graph-recover" {
		return figure.DefaultGraphRecover()
	}
	return figure.DefaultGraph(name == "graph-crowd")
}

// stampDeadline puts the context's deadline in the lab's header, on a
// copy of the request.
func TestStampDeadline(t *testing.T) {
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Get(testbed.LabDeadlineHeader)
	}))
	defer srv.Close()
	dl := time.Now().Add(time.Minute)
	ctx, cancel := context.WithDeadline(context.Background(), dl)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := stampDeadline{next: tr}.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got != strconv.FormatInt(dl.UnixNano(), 10) || req.Header.Get(testbed.LabDeadlineHeader) != "" {
		t.Errorf("the server saw %q, the caller's request has %q; want the deadline, and nothing", got, req.Header.Get(testbed.LabDeadlineHeader))
	}
}

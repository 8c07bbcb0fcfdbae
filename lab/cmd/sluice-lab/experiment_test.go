// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/lab/figure"
	"github.com/sluicehq/sluice/lab/figure/live"
	"github.com/sluicehq/sluice/lab/report"
)

func TestExperimentUsageErrors(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"experiment", "nosuch"}, `unknown experiment "nosuch" (valid: kihl-step,`},
		{[]string{"experiment"}, "name an experiment"},
		{[]string{"experiment", "--list", "seda-spike"}, "--list takes no name"},
		{[]string{"experiment", "a", "b"}, "accepts at most 1 arg"},
		{[]string{"experiment", "seda-spike", "--seed", "x"}, "invalid argument"},
		{[]string{"experiment", "voigt-sweep", "--policer-kernel", "maybe"}, `--policer-kernel "maybe": want auto, on or off`},
		{[]string{"experiment", "voigt-sweep", "--cgi-work", "wall"}, `--cgi-work "wall": want cpu-time or count`},
		{[]string{"experiment", "adaptive", "--auto-knee", "elbow"}, `--auto-knee "elbow": want probes or overtakes`},
		{[]string{"experiment", "adaptive", "--auto-burst-window", "-1s"}, `--auto-burst-window -1s: want a duration within [0, 1m]`},
		{[]string{"experiment", "adaptive", "--auto-tail-pool", "50"}, `--auto-tail-pool 50: want service times within [100, 1000000]`},
		{[]string{"demo", "extra"}, "unknown command"},
		{[]string{"demo", "--nosuch"}, "unknown flag"},
	}
	for _, c := range cases {
		wantUsageError(t, c.args, c.want)
	}
}

func TestExperimentHelp(t *testing.T) {
	for _, args := range [][]string{{"experiment", "--help"}, {"demo", "--help"}} {
		code, out, _ := runCLI(t, args...)
		if code != 0 || !strings.Contains(out, "report.html") {
			t.Errorf("%q: exit %d, help:\n%s", args, code, out)
		}
	}
}

// The adaptive experiment runs every part in a process of its own unless
// told otherwise.
func TestExperimentProcessFlags(t *testing.T) {
	cmd := newExperimentCmd()
	for _, name := range []string{"backend-process", "proxy-process"} {
		f := cmd.Flags().Lookup(name)
		if f == nil || f.DefValue != "true" {
			t.Errorf("--%s: %+v, want a flag that defaults to true", name, f)
		}
	}
	if err := cmd.Flags().Parse([]string{"--backend-process=false", "--proxy-process=false"}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"backend-process", "proxy-process"} {
		if v := cmd.Flags().Lookup(name).Value.String(); v != "false" {
			t.Errorf("--%s=false reads %s", name, v)
		}
	}
}

// outcome builds a finished run without running anything.
func outcome(name string, metrics map[string]float64, checks []figure.Check) *live.Outcome {
	s := report.NewSummary(name, string(figure.Live), 3)
	for k, v := range metrics {
		s.Set(k, v)
	}
	res := &figure.Result{Bundle: report.NewBundle(s), Checks: checks}
	for k := range metrics {
		res.Key = append(res.Key, k)
	}
	return &live.Outcome{Experiment: live.Experiment{Name: name}, Result: res, Dir: "out/x", Elapsed: 61 * time.Second}
}

func TestPrintOutcome(t *testing.T) {
	o := outcome("seda-spike", map[string]float64{"p90_ms_spike": 320.5, "quick": 1},
		[]figure.Check{{Claim: "p90 low", Measured: "p90 = 320", Pass: true}, {Claim: "rejects", Measured: "r = 0.5", Pass: false}})
	var buf bytes.Buffer
	if err := printOutcome(&buf, o); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"seda-spike (seed 3, quick form, 1m1s): 1 of 2 expectations met", "met      p90 low",
		"NOT met  rejects", "p90_ms_spike  320.5", "report: out/x/report.html"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, buf.String())
		}
	}
}

func TestPrintDemo(t *testing.T) {
	m := map[string]float64{"capacity_rps": 150, "users_low": 19, "users_high": 380}
	for i, run := range live.DemoRuns {
		m["goodput_rps_"+run] = float64(10 + 20*i)
		m["p90_ms_"+run] = []float64{12345, 180, 650, 700}[i]
		m["reject_fraction_"+run] = []float64{0, 0.88, 0.9, 0.91}[i]
		m["errors_"+run] = 0
	}
	o := outcome("demo", m, []figure.Check{{Claim: "seda beats", Pass: true}, {Claim: "yaksha beats", Measured: "x", Pass: false}})
	var buf bytes.Buffer
	if err := printDemo(&buf, o); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"capacity 150 pages/s", "19 → 380 users", "goodput (≤ 250ms)", "uncontrolled", "auto", "12.3 s", "180 ms",
		"650 ms", "90.0%", "1 of 2 checks met", "NOT met: yaksha beats (x)", "report: out/x/report.html"} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
}

// The demo's dashboard address: the one asked for when it is free, a free
// port when it is taken, an error when it is not loopback.
func TestDemoAdminAddr(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	taken := ln.Addr().String()
	got, err := demoAdminAddr(taken)
	if err != nil || got == taken || !strings.HasPrefix(got, "127.0.0.1:") {
		t.Errorf("demoAdminAddr(%s, taken) = %q, %v; want another port on 127.0.0.1", taken, got, err)
	}
	ln.Close()
	if got, err := demoAdminAddr(taken); err != nil || got != taken {
		t.Errorf("demoAdminAddr(%s, free) = %q, %v; want it back", taken, got, err)
	}
	for _, bad := range []string{"0.0.0.0:9901", "192.0.2.1:9901", "nonsense"} {
		if _, err := demoAdminAddr(bad); err == nil || !strings.Contains(err.Error(), "--admin") {
			t.Errorf("demoAdminAddr(%q): %v, want an error naming --admin", bad, err)
		}
	}
}

// SPDX-License-Identifier: Apache-2.0

package live

import (
	"bytes"
	"context"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/lab/figure"
	"github.com/sluicehq/sluice/lab/loadgen"
)

// The live tests run the --quick form of three experiments on 127.0.0.1
// (about 30–40 s each) and assert the direction of the paper's results with
// generous margins: on a noisy machine the exact figures vary, the
// direction does not. go test -short skips them.

func runQuick(t *testing.T, name string) *Outcome {
	t.Helper()
	if testing.Short() {
		t.Skip("live experiment: skipped with -short")
	}
	// The quick forms run side by side (two at a time on two CPUs): each
	// holds its figure's claim with a margin for other load on the
	// machine, as make test runs them beside other packages' tests
	// anyway, and side by side they take about 66 s instead of 105 s.
	t.Parallel()
	var progress bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := Run(ctx, name, Options{Quick: true, Seed: 1, Out: t.TempDir(), Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(progress.String(), "== ") || !strings.Contains(progress.String(), "ok ") {
		t.Errorf("no progress lines:\n%s", progress.String())
	}
	for _, c := range out.Checks {
		t.Logf("%v: %s — %s", c.Pass, c.Claim, c.Measured)
	}
	if out.Summary.Mode != string(figure.Live) || out.Summary.Scenario != name {
		t.Errorf("summary scenario %q mode %q", out.Summary.Scenario, out.Summary.Mode)
	}
	return out
}

func TestLiveSEDASpikeQuick(t *testing.T) {
	out := runQuick(t, "seda-spike")
	s := out.Summary
	ctl, unc, target := s.Metric("p90_ms_spike"), s.Metric("p90_ms_spike_uncontrolled"), s.Metric("target_ms")
	if !(ctl < unc/2) {
		t.Errorf("controlled p90 %.0f ms is not well below the uncontrolled %.0f ms", ctl, unc)
	}
	if !(unc > 2*target) {
		t.Errorf("uncontrolled p90 %.0f ms is not far above the target %.0f ms", unc, target)
	}
	if rf := s.Metric("reject_fraction_spike"); !(rf > 0.3 && rf < 0.995) {
		t.Errorf("reject fraction during the spike %.3f, want most but not all rejected", rf)
	}
	if rf := s.Metric("reject_fraction_spike_uncontrolled"); rf != 0 {
		t.Errorf("uncontrolled run rejected %.3f", rf)
	}
	if !(s.Metric("goodput_within_target_rps_spike") > s.Metric("goodput_within_target_rps_spike_uncontrolled")) {
		t.Errorf("controlled goodput within target %.1f/s not above uncontrolled %.1f/s",
			s.Metric("goodput_within_target_rps_spike"), s.Metric("goodput_within_target_rps_spike_uncontrolled"))
	}
}

func TestLiveYakshaSweepQuick(t *testing.T) {
	out := runQuick(t, "yaksha-load-sweep")
	s := out.Summary
	ctl, unc, tref := s.Metric("mean_rt_ms_at_3x"), s.Metric("mean_rt_ms_at_3x_uncontrolled"), s.Metric("tref_ms")
	// A burst at ρ ≈ 0.87 can lift one 4 s window's mean several-fold
	// (8.07 × Tref once under make test, the other packages' tests
	// sharing the two CPUs); uncontrolled, the mean is 40–50 × Tref.
	if !(ctl < unc/4) {
		t.Errorf("controlled mean RT at 3× %.1f ms is not well below the uncontrolled %.1f ms", ctl, unc)
	}
	if !(ctl < 10*tref) {
		t.Errorf("controlled mean RT at 3× %.1f ms is not bounded near Tref %.1f ms", ctl, tref)
	}
	if r := s.Metric("throughput_ratio_at_3x"); !(r > 0.5) {
		t.Errorf("controlled throughput at 3× is %.2f of the ideal", r)
	}
	if d := s.Metric("drop_fraction_at_3x"); !(d > 0.4 && d < 0.95) {
		t.Errorf("drop fraction at 3× %.2f, want about 1 − 1/3·(ideal/capacity) ≈ 0.7", d)
	}
}

func TestLiveLiJaminQuick(t *testing.T) {
	out := runQuick(t, "lijamin-epochs")
	s := out.Summary
	var prev float64
	for i, n := range figure.LiJaminClients {
		got := s.Metric("share_" + n + "_percent")
		if !(got > prev) {
			t.Errorf("share of %s %.1f %% is not above the previous client's %.1f %%: shares not ordered by allocation", n, got, prev)
		}
		// Generous: the documented accuracy is ±2 points; a noisy machine
		// gets ±5.
		if d := got - figure.LiJaminShares[i]; d < -5 || d > 5 {
			t.Errorf("share of %s %.1f %%, allocation %g %%", n, got, figure.LiJaminShares[i])
		}
		prev = got
	}
	if r := s.Metric("total_bw_ratio_17_18"); !(r > 0.7 && r < 1.3) {
		t.Errorf("total over epochs 17–18 is %.2f B, want close to B", r)
	}
}

// TestFailureCounts: a record keeps why its request got no answer, and
// the counts and the progress line name the kinds.
func TestFailureCounts(t *testing.T) {
	recs := []record{
		{out: outOK},
		{out: outError, fail: failIndex(syscall.ECONNRESET)},
		{out: outError, fail: failIndex(&net.OpError{Op: "read", Err: syscall.ECONNRESET})},
		{out: outTimeout, fail: failIndex(os.ErrDeadlineExceeded)},
	}
	n := failureCounts(recs)
	if n[loadgen.FailReset] != 2 || n[loadgen.FailResponseTimeout] != 1 || len(n) != 2 {
		t.Errorf("counts %v: want 2 resets and 1 response timeout", n)
	}
	if got, want := failureLine(n), "1 response_timeout, 2 connection_reset"; got != want {
		t.Errorf("line %q, want %q", got, want)
	}
	if failIndex(nil) != 0 {
		t.Error("a response counted as a failure")
	}
}

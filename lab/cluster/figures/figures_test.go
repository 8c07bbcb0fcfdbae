// SPDX-License-Identifier: Apache-2.0

package figures

import (
	"os"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/localredis"
)

// These are the short, functional forms of cluster mode's figures: three
// proxy processes, a real redis-server and a round-robin load, each
// checked against a bar twice the figure's (a shared CI machine must not
// turn noise into a red build). The figures themselves, with their own
// bars, are `sluice-lab experiment cluster` (docs/experiments.md). make test
// runs these alone, after the other packages' tests.
func TestMain(m *testing.M) {
	ServeChild()
	os.Exit(m.Run())
}

// needRedis skips (or, under make test, fails) without redis-server.
func needRedis(t *testing.T) {
	t.Helper()
	if _, err := localredis.Path(); err != nil {
		if os.Getenv(localredis.RequireEnv) != "" {
			t.Fatal(err)
		}
		t.Skipf("%v; skipping", err)
	}
	if testing.Short() {
		t.Skip("live figure: skipped with -short")
	}
}

// The short form of the shares figure: epochs 1 (all), 16 (A alone), 17
// and 18 (all), the last two measured.
func TestLiveClusterFigureSharesAcrossInstances(t *testing.T) {
	needRedis(t)
	all := [4]bool{true, true, true, true}
	res, err := Shares(t.Context(), TestLauncher(), []Epoch{
		{1, all, 3 * time.Second}, {16, [4]bool{true}, 3 * time.Second}, {17, all, 10 * time.Second}, {18, all, 10 * time.Second},
	}, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("shares over epochs 17–18: a %.2f  b %.2f  c %.2f  d %.2f %%; allocation error %.4f; total %.3f B; B per instance %.0f, Â/B %.2f; failed %d",
		res.Percent[0], res.Percent[1], res.Percent[2], res.Percent[3], res.AllocationError, res.TotalRatio, res.PerInstanceB, res.AhatRatio, res.Failed)
	if res.AllocationError > 0.04 {
		t.Errorf("allocation error %.4f > 0.04 (the figure's bar is 0.02: see sluice-lab experiment cluster)", res.AllocationError)
	}
	sum := 0.0
	for _, b := range res.PerInstanceB {
		sum += b
	}
	if len(res.PerInstanceB) != Instances || sum < 0.99*ShareB || sum > 1.01*ShareB {
		t.Errorf("the instances' parts of B sum to %g, want %g", sum, ShareB)
	}
	if res.Failed != 0 {
		t.Errorf("%d requests failed", res.Failed)
	}
}

func TestLiveClusterFigureStaticRateUnevenSpread(t *testing.T) {
	needRedis(t)
	res, err := StaticUneven(t.Context(), TestLauncher(), 200, 3*time.Second, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("R %g req/s, offered %g spread %v: admitted %.1f req/s = %.3f R; parts %v; failed %d",
		res.Global, res.Offered, res.Spread, res.Admitted, res.Ratio, res.Parts, res.Failed)
	if res.Ratio < 0.9 || res.Ratio > 1.1 {
		t.Errorf("admitted %.3f R, want within ±10 %% (the figure's bar is ±5 %%)", res.Ratio)
	}
	if res.Failed != 0 {
		t.Errorf("%d requests failed", res.Failed)
	}
}

func TestLiveClusterFigureKilledInstanceBudgetTakenOver(t *testing.T) {
	needRedis(t)
	res, err := Kill(t.Context(), TestLauncher(), 400, 4*time.Second, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("R %g req/s, period %v: before the kill %.3f R; heartbeat expired %v after the kill; between %.3f R; back within ±5 %% %v (%.2f periods) after the expiry, then %.3f R",
		res.Global, res.Period, res.BeforeRatio, res.Expiry, res.GapRatio, res.Recovery, res.RecoveryPeriods, res.AfterRatio)
	if res.RecoveryPeriods > 4 {
		t.Errorf("recovery took %.2f periods after the expiry, want ≤ 4 (the figure's bar is 2)", res.RecoveryPeriods)
	}
}

func TestLiveClusterFigureRedisOutage(t *testing.T) {
	needRedis(t)
	res, err := RedisOutage(t.Context(), TestLauncher(), 300, 3*time.Second, 10*time.Second, 4*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("R %g req/s, period %v, Redis down %v: %d of %d requests failed; fallback %v (%.2f periods) after the stop (seen by polling: %v); in sync %v (%.2f periods) after the restart (seen: %v); admitted while down %.3f R",
		res.Global, res.Period, res.Outage, res.Failed, res.Requests, res.Fallback, res.FallbackPeriods, res.FallbackSeen,
		res.Resync, res.ResyncPeriods, res.ResyncSeen, res.DuringRatio)
	if res.Failed != 0 {
		t.Errorf("%d requests failed", res.Failed)
	}
	if res.FallbackPeriods > 2 {
		t.Errorf("fallback took %.2f periods, want ≤ 2 (the figure's bar is 1)", res.FallbackPeriods)
	}
	if res.ResyncPeriods > 4 {
		t.Errorf("resync took %.2f periods, want ≤ 4 (the figure's bar is 2)", res.ResyncPeriods)
	}
}

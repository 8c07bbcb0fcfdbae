// SPDX-License-Identifier: Apache-2.0

package live

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/lab/cluster/figures"
	"github.com/sluicehq/sluice/lab/figure"
	"github.com/sluicehq/sluice/lab/report"
)

// cluster runs the figures of cluster mode (package cluster/figures):
// three sluice proxy processes sharing one set of limits through a real
// redis-server, on loopback. It needs the sluice binary (it starts
// `sluice proxy` three times) and Debian's redis-server.

// runCluster runs the cluster experiment: three proxy processes sharing
// Li & Jamin's shares and a global static rate through Redis.
func runCluster(ctx context.Context, env *Env) (*figure.Result, error) {
	if !childCapable(env.Executable) {
		return nil, fmt.Errorf("the cluster experiment starts `sluice proxy` processes: run it from the sluice binary")
	}
	launch := figures.SluiceLauncher(env.Executable)
	s := newSummary(env)
	res := &figure.Result{Bundle: report.NewBundle(s)}

	// Li & Jamin's epochs (Table III), compressed: all 18 in the full
	// run, 1, 16, 17 and 18 in the quick one; the shares are measured
	// over the last two.
	epoch, final := 4*time.Second, 20*time.Second
	numbers := make([]int, 18)
	for i := range numbers {
		numbers[i] = i + 1
	}
	if env.Quick {
		epoch, final, numbers = 3*time.Second, 10*time.Second, []int{1, 16, 17, 18}
	}
	var plan []figures.Epoch
	for _, n := range numbers {
		l := epoch
		if n >= 17 {
			l = final
		}
		plan = append(plan, figures.Epoch{Number: n, Active: figure.LiJaminTable3[n-1], Length: l})
	}
	env.Phasef("shares across %d instances: epochs %v", figures.Instances, numbers)
	sh, err := figures.Shares(ctx, launch, plan, env.Seed)
	if err != nil {
		return nil, fmt.Errorf("shares: %w", err)
	}
	for i, n := range figures.Clients {
		s.Set("share_"+n+"_percent", sh.Percent[i])
	}
	s.Set("allocation_error", sh.AllocationError)
	s.Set("total_bw_ratio_17_18", sh.TotalRatio)
	s.Set("shares_failed", float64(sh.Failed))

	measure := 10 * time.Second
	if env.Quick {
		measure = 5 * time.Second
	}
	env.Phasef("a global static-rate of 200 req/s, traffic 60/30/10 %%")
	st, err := figures.StaticUneven(ctx, launch, 200, 3*time.Second, measure)
	if err != nil {
		return nil, fmt.Errorf("static rate: %w", err)
	}
	s.Set("static_rate_rps", st.Global)
	s.Set("static_admitted_rps", st.Admitted)
	s.Set("static_admitted_ratio", st.Ratio)
	s.Set("static_failed", float64(st.Failed))

	env.Phasef("one instance killed")
	kl, err := figures.Kill(ctx, launch, 400, 4*time.Second, measure)
	if err != nil {
		return nil, fmt.Errorf("kill: %w", err)
	}
	s.Set("kill_expiry_s", kl.Expiry.Seconds())
	s.Set("kill_recovery_periods", kl.RecoveryPeriods)
	s.Set("kill_gap_ratio", kl.GapRatio)
	s.Set("kill_after_ratio", kl.AfterRatio)

	env.Phasef("Redis stopped for 10 s")
	rd, err := figures.RedisOutage(ctx, launch, 300, 3*time.Second, 10*time.Second, 4*time.Second)
	if err != nil {
		return nil, fmt.Errorf("redis outage: %w", err)
	}
	s.Set("redis_failed", float64(rd.Failed))
	s.Set("redis_requests", float64(rd.Requests))
	s.Set("redis_fallback_periods", rd.FallbackPeriods)
	s.Set("redis_resync_periods", rd.ResyncPeriods)
	s.Set("redis_during_ratio", rd.DuringRatio)
	s.Set("sync_period_s", rd.Period.Seconds())

	res.Key = []string{"allocation_error", "static_admitted_ratio", "kill_recovery_periods", "redis_failed",
		"redis_fallback_periods", "redis_resync_periods"}
	res.Checks = []figure.Check{
		figure.AtMost(s, "Li & Jamin across three instances, requests spread round robin: allocation error over the last two epochs ≤ 0.02 (one instance: 0.0123)", "allocation_error", 0.02),
		figure.Within(s, "A global static rate across three instances under a 60/30/10 % spread: admitted total within ±5 % of it", "static_admitted_ratio", 0.95, 1.05),
		figure.AtMost(s, "One instance killed: the others' admitted total back within 5 % of the budget ≤ 2 periods after its heartbeat expires", "kill_recovery_periods", 2),
		figure.AtMost(s, "Redis stopped for 10 s: no request fails because of it", "redis_failed", 0),
		figure.AtMost(s, "… every instance falls back within one period", "redis_fallback_periods", 1),
		figure.AtMost(s, "… and is back in sync ≤ 2 periods after Redis returns", "redis_resync_periods", 2),
	}
	res.Setup = []string{
		"Three `sluice proxy` processes on 127.0.0.1, one redis-server (Debian's, on a free loopback port, killed and restarted by pid), an in-process queue testbed backend; open-loop load spread by a client-side balancer (round robin, or weighted 6:3:1), which stops sending to an instance whose connections are refused.",
		fmt.Sprintf("Shares: B = %g KB/s for the whole cluster, clients a–d with 10/20/30/40 %%, 10 KB replies, 6 requests a second per active client (Li & Jamin's setup, lijamin-epochs), Â₀ = 4·B, manager period 0.5 s, standby 4, sync period 0.5 s.", figures.ShareB/1e3),
		"Static rate: a static-rate stage of 200 req/s (global), twice that offered; kill: 400 req/s global, the last instance SIGKILLed; Redis: 300 req/s global, Redis SIGKILLed (data lost) and restarted after 10 s. Sync period 0.5 s, heartbeat TTL 1.5 s.",
	}
	return res, nil
}

// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/sluicehq/sluice/lab/reliability"
)

// runDiscard is the discard-cost experiment (reliability.MeasureDiscard):
// the CPU per refused connection attempt of the kernel path, the
// user-space reset and a 503, in one run, sluice as its own process. The
// target: the kernel path at least 20× cheaper than a 503
// (sluice process plus softirq).
func runDiscard() (string, bool, error) {
	be, err := reliability.NewSiteBackend()
	if err != nil {
		return "", false, err
	}
	defer be.Close()
	d := dur(10 * time.Second)
	var rs []reliability.DiscardResult
	for _, mode := range []string{reliability.DiscardKernel, reliability.DiscardReset, reliability.Discard503} {
		cfg, err := reliability.DiscardConfig(mode)
		if err != nil {
			return "", false, err
		}
		p, err := reliability.StartSluice(opt.sluice, tempDir("discard-"+mode), be.URL, nil, cfg)
		if err != nil {
			return "", false, fmt.Errorf("%s: %w", mode, err)
		}
		r, err := reliability.MeasureDiscard(context.Background(), p, mode, d, 2)
		if err == nil && mode == reliability.DiscardKernel {
			// The refusals happened in the kernel: sluice counted them.
			if v, merr := p.Metric(`proxy_policer_rejected_total{reason="kernel"}`); merr != nil || v < float64(r.Attempts) {
				err = fmt.Errorf("kernel mode: proxy_policer_rejected_total{reason=\"kernel\"} = %v (%v), %d attempts", v, merr, r.Attempts)
			}
		}
		p.Stop()
		if err != nil {
			return "", false, err
		}
		rs = append(rs, r)
		fmt.Printf("  %s: %d attempts in %v, sluice %v, softirq %v (baseline %v), load %.2f\n", mode, r.Attempts, r.Wall.Round(time.Millisecond), r.ProcCPU, r.SoftIRQ, r.Baseline, r.Load1)
	}
	_, _, ref := rs[2].PerAttempt()
	refProc, _, _ := rs[2].PerAttempt()
	var b strings.Builder
	fmt.Fprintf(&b, "Refused connection attempts for %v per mode, 2 client goroutines, sluice as its own process; CPU from /proc (sluice utime+stime; host softirq minus an idle baseline of as long).\n\n", d)
	b.WriteString("| mode | attempts | not refused as expected | sluice µs/attempt | softirq µs/attempt | total µs/attempt | 503 ÷ this (total) | 503 ÷ this (sluice only) | load at start |\n|---|---|---|---|---|---|---|---|---|\n")
	ok := true
	for _, r := range rs {
		proc, sirq, tot := r.PerAttempt()
		ratio, ratioProc := ref/tot, refProc/proc
		fmt.Fprintf(&b, "| %s | %d | %d | %.3f | %.3f | %.3f | %.1f× | %.1f× | %.2f |\n", r.Mode, r.Attempts, r.Errors, proc, sirq, tot, ratio, ratioProc, r.Load1)
		if r.Errors > 0 {
			ok = false
		}
		if r.Mode == reliability.DiscardKernel && ratio < 20 {
			ok = false
		}
	}
	writeJSON("discard", rs)
	return b.String(), ok, nil
}

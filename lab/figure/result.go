// SPDX-License-Identifier: Apache-2.0

package figure

import "github.com/sluicehq/sluice/lab/report"

// Result is what a run of a figure returns, simulated or live.
type Result struct {
	// Bundle holds summary.json, the CSV tables and the figures.
	*report.Bundle
	// Checks are the paper's expectations, each evaluated on this run
	// (written to expectations.csv and the HTML report of live runs).
	Checks []Check
	// Setup describes the run in a few sentences: backend, load, time
	// compression, controller parameters.
	Setup []string
	// Key lists the headline metrics, in print order.
	Key []string
}

// NewResult starts the result of a run of the named figure with its
// summary (scenario, mode and seed set).
func NewResult(name string, m Mode, seed uint64) *Result {
	return &Result{Bundle: report.NewBundle(report.NewSummary(name, string(m), seed))}
}

// Passed returns the number of checks met and the number of checks.
func (r *Result) Passed() (met, total int) {
	for _, c := range r.Checks {
		if c.Pass {
			met++
		}
	}
	return met, len(r.Checks)
}

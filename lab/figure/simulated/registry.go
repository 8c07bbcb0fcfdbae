// SPDX-License-Identifier: Apache-2.0

package simulated

// registry maps each figure with a simulated driver to the function that
// declares its parameters and returns its run; the order of listings is
// the figure registry's (package figure). To add one, write a file with
// such a function and add it here.
var registry = map[string]func(ps *Params) RunFunc{
	"kihl-step":             kihlStep,
	"kihl-distribution":     kihlDistribution,
	"yaksha-load-sweep":     yakshaLoadSweep,
	"yaksha-workload-shift": yakshaWorkloadShift,
	"seda-spike":            sedaSpike,
	"seda-classes":          sedaClasses,
	"seda-degradation":      sedaDegradation,
	"voigt-sweep":           voigtSweep,
	"voigt-step":            voigtStep,
	"voigt-bandwidth":       voigtBandwidth,
	"lijamin-epochs":        lijaminEpochs,
	"adaptive":              adaptivePhasesScenario,
	"graph":                 graphChain(false),
	"graph-crowd":           graphChain(true),
	"graph-recover":         graphRecover,
	"tenants":               tenantsScenario,
	"costly":                costlyScenario,
	"graph-hotel":           graphHotel,
}

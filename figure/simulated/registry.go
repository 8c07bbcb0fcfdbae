package simulated

// registry lists the simulated drivers; the order of listings is the
// figure registry's (package figure). To add one, write a file with a
// func() Scenario and add it here.
var registry = []func() Scenario{
	kihlStep,
	kihlDistribution,
	yakshaLoadSweep,
	yakshaWorkloadShift,
	sedaSpike,
	sedaClasses,
	sedaDegradation,
	voigtSweep,
	voigtStep,
	voigtBandwidth,
	lijaminEpochs,
	adaptivePhasesScenario,
}

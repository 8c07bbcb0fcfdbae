package scenario

// registry lists the scenarios in the order `sluice sim --list` shows them.
// To add a scenario, write a file with a func() Scenario and add it here.
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

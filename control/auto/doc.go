// Package auto is sluice's own admission controller, told only the
// objective (an SLO on the response time of admitted requests): a
// concurrency limit L that finds the service's parallelism by itself,
// and a short, deadline-bounded wait queue in front of it. The doc
// comment of Auto states the law; docs/algorithms.md §9 explains it with
// the figures behind it.
//
// Config is its configuration (DefaultConfig gives working values for
// all but the SLO), New builds a controller from it, and package
// control's registry names it "auto", the controller of a stage given
// none. Like every controller, an Auto is a deterministic state machine
// stepped by Update(now, Measurements) (see package sluice), not safe for
// concurrent use: a runner (the stage's, or the simulator) serialises
// calls.
package auto

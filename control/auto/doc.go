// SPDX-License-Identifier: Apache-2.0

// Package auto is sluice's own admission controller, told only the
// objective (an SLO on the response time of admitted requests): a
// concurrency limit L that finds the service's parallelism by itself,
// and a short, deadline-bounded wait queue in front of it. The doc
// comment of Auto states the law; docs/algorithms.md §9 explains it with
// the figures behind it.
//
// Config is its configuration (only the SLO has to be chosen;
// DefaultConfig gives working values for the rest), New builds a
// controller from it, and package
// control's registry names it "auto", the controller of a stage given
// none. Like every controller, an Auto is a deterministic state machine
// stepped by Update(now, Measurements) (see package sluice), not safe for
// concurrent use: a runner (the stage's, or the simulator) serialises
// calls.
//
// The law is split by part, each file's comment giving its equations and
// sources: config.go (Config, its defaults and validation), auto.go (Auto,
// and Update step by step), phase.go (the cycle of windows), window.go
// (one window's measurements), judge.go (the verdict on a window, by
// phase, and Little's-law cut), estimate.go and tail.go (the service-time
// estimates R̂, R̂99 and R̂99ᴾ), queue.go (the wait queue), guardrails.go
// (MinRate, Warmup, MaxHealthyLatency and the tail guard), uncut.go (the
// cut undone), early.go (the early cut: Little's law on the latest
// completions), and the named options overtake.go (the knee from
// overtakes) and median.go (the median test).
package auto

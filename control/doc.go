// SPDX-License-Identifier: Apache-2.0

// Package control holds sluice's admission controllers: one type per
// published design, each a deterministic state machine with a single step
// function, Update(now, Measurements) Decision (see package sluice).
//
//   - Kihl: PI control of server utilization through a token-bucket gate
//     (Andersson, Kihl, Robertsson & Wittenmark).
//   - Yaksha: self-tuning PI control of the mean response time through a
//     drop probability (Kamra, Misra & Nahum), and the same law with a
//     fixed design gain.
//   - SEDA: AIMD control of the 90th-percentile response time per stage and
//     class, with service degradation (Welsh & Culler).
//   - VoigtCPU and VoigtQueue: the P and PD controllers of resource-based
//     admission control with early discard (Voigt & Gunningberg).
//   - StaticRate, StaticConcurrency and None: baselines for comparisons.
//
// sluice's own controller, auto (told only the objective), is in package
// control/auto; the registry here names it with the others.
//
// Every controller is configured by a struct whose DefaultXConfig function
// returns the defaults of docs/algorithms.md; Validate names the first bad
// field and no constructor silently changes a configured value. Outputs are
// always finite and within the configured bounds, and each decision carries
// a one-line reason with the numbers it used. Controllers are not safe for
// concurrent use: a runner (the proxy's ticker or the simulator) serialises
// calls. Registry maps the configuration names used in config files to
// constructors.
package control

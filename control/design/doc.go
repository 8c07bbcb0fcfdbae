// SPDX-License-Identifier: Apache-2.0

// Package design computes controller gains from a paper's design rules and
// checks the stability of the result, for two of sluice's controllers.
//
// # Andersson–Kihl PI control of server utilization
//
// Andersson, Kihl, Robertsson and Wittenmark, "Admission Control of the
// Apache Web Server" (NTS 17, 2004): every control period h a PI controller
// sets the number of admissions u(k) for the next period from the measured
// utilization ρ(k),
//
//	u(k)   = K·(ρref − ρ(k)) + I(k)
//	I(k+1) = I(k) + K·h/Ti·(ρref − ρ(k))
//
// where σ is the maximum number of departures per period (σ ≈ μ·h, in
// requests per period), K is in requests per period per unit of utilization
// and Ti is in seconds. Neglecting the queue nonlinearity, the closed loop
// has the characteristic polynomial
//
//	z·(z² + a1·z + a2),  a1 = K/σ − 2,  a2 = 1 − K/σ + K·h/(σ·Ti).
//
// [KihlPlace] inverts it (pole placement): K = (2 + a1)·σ,
// Ti = h·(2 + a1)/(1 + a1 + a2). [KihlAnalyze] returns the closed-loop
// poles, whether (a1, a2) lies inside the Jury stability triangle
// a2 < 1, a2 > −1 + a1, a2 > −1 − a1 (ALGORITHMS.md erratum: the paper prints
// a2 > 1 + a1, a2 > 1 − a1), and whether the Tsypkin (Jury–Lee) criterion
// proves absolute stability for the queue nonlinearity, a sector [0, 1]
// function in negative feedback around
//
//	G(z) = −z·(z − 1) / (z·(z² + (K/σ − 1)·z + K·(h − Ti)/(σ·Ti))).
//
// [KihlRegion] samples both stable regions over the normalised parameters
// (K/σ, h/Ti), the paper's Figures 5 and 6.
//
// # Yaksha
//
// Kamra, Misra and Nahum, "Yaksha: A Self-Tuning Controller for Managing the
// Performance of 3-Tiered Web sites": [Yaksha] and [YakshaFromKg] compute the
// PI gains Kp, Ki and their Tustin-discretised form A, B from the linearised
// M/GI/1-PS plant gain Kg = λ0·Tref².
//
// All functions are pure and safe for concurrent use.
package design

// SPDX-License-Identifier: Apache-2.0

// Package gate holds the per-request admission mechanisms that controllers
// adjust: a token bucket (the rate gate of Voigt, Kihl and SEDA), a
// probabilistic dropper (Yaksha's drop probability pd), one token bucket per
// request class (SEDA's class-based admission), and a concurrency limit with
// a bounded FIFO wait queue (the papers' "listen queue", whose length is a
// measured signal).
//
// Every gate is decided by its caller: controllers compute a new setting
// once per control period and call a setter; the request path only asks the
// gate "admit or not". Methods that depend on time take now as an argument
// (AllowAt, SetRateAt, ...), so the simulator can drive the same objects in
// virtual time. The exception is Limiter, the live blocking front end of
// Slots, which waits with real timers and contexts.
package gate

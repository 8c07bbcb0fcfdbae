// SPDX-License-Identifier: Apache-2.0

//go:build !race

package proxy

// raceEnabled reports whether the tests run under the race detector,
// which makes every request about ten times as costly.
const raceEnabled = false

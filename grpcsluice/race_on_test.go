// SPDX-License-Identifier: Apache-2.0

//go:build race

package grpcsluice

// raceEnabled reports whether the tests run under the race detector.
const raceEnabled = true

//go:build !race

package proxy

// raceEnabled reports whether the tests run under the race detector.
const raceEnabled = false

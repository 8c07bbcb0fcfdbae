// SPDX-License-Identifier: Apache-2.0

//go:build !unix

package stage

// cpuTime is 0 where getrusage is not available: the benchmark then
// reports no CPU time.
func cpuTime() int64 { return 0 }

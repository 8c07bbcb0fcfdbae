// SPDX-License-Identifier: Apache-2.0

//go:build linux

package testbed

import (
	"math/rand/v2"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// CPUTimeSupported reports whether the CPU-time mode (CGIConfig.CPUNsPerNumber) is available: burnCPU reads the thread CPU clock.
const CPUTimeSupported = true

// burnChunk is how many random numbers burnCPU sums between two reads of
// the thread's CPU clock: about 8 µs of work at 4 ns per number, so the
// clock's reads (a system call each, well under 1 µs) cost a few percent
// and a request overshoots its demand by at most one chunk.
const burnChunk = 2000

// burnCPU sums random numbers from r until the calling goroutine's OS
// thread has run for d of CPU time (CLOCK_THREAD_CPUTIME_ID), and returns
// how many it summed and their sum. The goroutine stays on its thread
// meanwhile, so time the thread waits for the CPU (other requests, other
// processes) does not count, and a CPU slowed by a busy neighbour core
// or by the hypervisor burns fewer numbers for the same CPU time.
func burnCPU(r *rand.Rand, d time.Duration) (int, float64) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start, err := threadCPU()
	if err != nil {
		return 0, 0
	}
	var n int
	var sum float64
	for {
		sum += SumRandom(r, burnChunk)
		n += burnChunk
		now, err := threadCPU()
		if err != nil || now-start >= d {
			return n, sum
		}
	}
}

// threadCPU returns the calling thread's CPU time.
func threadCPU() (time.Duration, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0, err
	}
	return time.Duration(ts.Nano()), nil
}

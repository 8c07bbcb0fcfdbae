// SPDX-License-Identifier: Apache-2.0

//go:build unix

package stage

import "syscall"

// cpuTime returns the process's user and system CPU time, ns.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

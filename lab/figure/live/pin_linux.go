// SPDX-License-Identifier: Apache-2.0

//go:build linux

package live

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// pinSupported reports whether this platform can pin processes to CPUs.
const pinSupported = true

// cpuSet builds an affinity mask of the given CPUs.
func cpuSet(cpus []int) *unix.CPUSet {
	var s unix.CPUSet
	s.Zero()
	for _, c := range cpus {
		s.Set(c)
	}
	return &s
}

// pinProcess sets the CPU affinity of every thread of this process to
// cpus (threads created later inherit it from their creator) and returns
// a function that gives every thread the calling thread's previous mask
// back.
func pinProcess(cpus []int) (restore func() error, err error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var old unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		return nil, fmt.Errorf("sched_getaffinity: %w", err)
	}
	set := cpuSet(cpus)
	// Twice: a thread started by an unpinned one during the first pass
	// is caught by the second.
	for range 2 {
		if err := forEachThread(func(tid int) error { return unix.SchedSetaffinity(tid, set) }); err != nil {
			return nil, err
		}
	}
	return func() error {
		var errs []error
		for range 2 {
			errs = append(errs, forEachThread(func(tid int) error { return unix.SchedSetaffinity(tid, &old) }))
		}
		return errors.Join(errs...)
	}, nil
}

// forEachThread calls f with the id of every thread of this process.
// Threads that exit meanwhile (ESRCH) are skipped.
func forEachThread(f func(tid int) error) error {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if err := f(tid); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("sched_setaffinity(%d): %w", tid, err)
		}
	}
	return nil
}

// startPinned starts cmd with the CPU affinity cpus: the fork happens on
// a thread temporarily pinned to cpus, whose mask the child inherits from
// its first instruction on (so its runtime sizes GOMAXPROCS to them).
func startPinned(cmd *exec.Cmd, cpus []int) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var old unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		return fmt.Errorf("sched_getaffinity: %w", err)
	}
	if err := unix.SchedSetaffinity(0, cpuSet(cpus)); err != nil {
		return fmt.Errorf("sched_setaffinity: %w", err)
	}
	startErr := cmd.Start()
	if err := unix.SchedSetaffinity(0, &old); err != nil {
		return errors.Join(startErr, fmt.Errorf("sched_setaffinity (restore): %w", err))
	}
	return startErr
}

// processCPUs returns the CPUs the process may run on.
func processCPUs() ([]int, error) {
	var s unix.CPUSet
	if err := unix.SchedGetaffinity(0, &s); err != nil {
		return nil, err
	}
	var cpus []int
	for c := 0; c < 1024; c++ {
		if s.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package live

import (
	"errors"
	"os/exec"
	"runtime"
)

// pinSupported reports whether this platform can pin processes to CPUs.
const pinSupported = false

var errNoPinning = errors.New("CPU pinning needs Linux")

func pinProcess([]int) (func() error, error) { return nil, errNoPinning }

func startPinned(*exec.Cmd, []int) error { return errNoPinning }

func processCPUs() ([]int, error) {
	cpus := make([]int, runtime.NumCPU())
	for i := range cpus {
		cpus[i] = i
	}
	return cpus, nil
}

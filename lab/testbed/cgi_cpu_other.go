// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package testbed

import (
	"errors"
	"math/rand/v2"
	"time"
)

// CPUTimeSupported reports whether burnCPU can measure a thread's CPU
// time: only on Linux.
const CPUTimeSupported = false

// burnCPU is not available here; CGIConfig.Validate refuses the CPU-time
// mode first.
func burnCPU(*rand.Rand, time.Duration) (int, float64) { return 0, 0 }

// threadCPU is not available here.
func threadCPU() (time.Duration, error) { return 0, errors.New("no thread CPU clock") }

// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package monitor

import (
	"errors"
	"fmt"
	"runtime"
)

// SocketQueue sums the outgoing queues of client sockets. It needs the
// Linux SIOCOUTQ/SIOCOUTQNSD socket ioctls; on this platform
// NewSocketQueue always fails.
type SocketQueue struct{}

// NewSocketQueue returns an error wrapping errors.ErrUnsupported that names
// the sensor and why: the ioctls it reads exist only on Linux.
func NewSocketQueue(set SocketSet, mode QueueMode) (*SocketQueue, error) {
	return nil, fmt.Errorf("monitor: outgoing queue sensor: not available on %s: it reads the Linux-only SIOCOUTQ/SIOCOUTQNSD socket ioctls; run on Linux or configure no outgoing queue sensor: %w",
		runtime.GOOS, errors.ErrUnsupported)
}

// QueuedBytes always fails: see NewSocketQueue.
func (q *SocketQueue) QueuedBytes() (int64, error) {
	return 0, fmt.Errorf("monitor: outgoing queue sensor: not available on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}

// Describe names the unsupported sensor.
func (q *SocketQueue) Describe() string {
	return "outgoing queue (unsupported on " + runtime.GOOS + ")"
}

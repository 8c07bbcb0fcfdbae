// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package monitor

import (
	"errors"
	"runtime"
	"syscall"
	"testing"
)

type noSockets struct{}

func (noSockets) AppendSockets(dst []syscall.RawConn) []syscall.RawConn { return dst }

func TestSocketQueueUnsupported(t *testing.T) {
	_, err := NewSocketQueue(noSockets{}, QueueUnsent)
	wantErr(t, "NewSocketQueue", err, "outgoing queue sensor", runtime.GOOS, "SIOCOUTQ")
	if !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("error %v does not wrap errors.ErrUnsupported", err)
	}
	_, err = NewSocketOutQueue(queueConfig(1000), noSockets{}, qt0)
	wantErr(t, "NewSocketOutQueue", err, "outgoing queue sensor", "not available")
}

// SPDX-License-Identifier: Apache-2.0

// Package testkit is what the product's test-helper packages share: the
// part of testing.TB their helpers call, and a buffer that captures a
// logger's output. It does not import testing, which the product's
// non-test packages may not (scripts/check-lean.sh).
package testkit

import (
	"bytes"
	"sync"
)

// TB is the part of testing.TB that the product's test helpers call;
// *testing.T and *testing.B satisfy it.
type TB interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Errorf(format string, args ...any)
	Skipf(format string, args ...any)
	Cleanup(func())
	TempDir() string
}

// SyncBuffer is a bytes.Buffer safe for concurrent Write and String, for
// capturing a logger's output in tests while the code under test still
// logs from its own goroutines. The zero value is an empty buffer.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p to the buffer; it never fails.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what has been written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

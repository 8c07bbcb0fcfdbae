// SPDX-License-Identifier: Apache-2.0

package buffer

import "os"

// bodyPrefix starts the name of a request body's temporary file:
// sluice-body-.
const bodyPrefix = "sluice-body-"

// NewBody returns the spool of a request body of length bytes (-1:
// unknown), which Fill fills whole before it is read: its first memory
// bytes (> 0) in memory of its own, taken as it fills (length or 512
// bytes first, then as much again as it holds, without copying), the
// rest in an unlinked temporary file in dir ("" the system's temporary
// directory) named sluice-body-*, written 32 KiB at a time. Neither
// comes out of the response buffers' budget or caps: a request body's
// size is bounded by its listener (max_request_body_bytes).
func NewBody(dir string, memory, length int64) *Spool {
	s := &Spool{length: length, body: bodyAccount{dir: dir, mem: memory}}
	s.a, s.segs = &s.body, s.segs0[:0]
	return s
}

// bodyAccount is a request body's account (NewBody): no caps, no
// counters, and a file that fails ends the body.
type bodyAccount struct {
	dir string
	mem int64 // bytes of memory
}

func (a *bodyAccount) memory(held, length int64) []byte {
	n := held // as much again as it holds
	switch {
	case held == 0:
		n = max(length, 512)
	case length >= 0 && held >= length:
		n = 512 // for the read that finds the end
	}
	if n = min(n, a.mem-held); n <= 0 {
		return nil
	}
	return make([]byte, n)
}

func (*bodyAccount) spare() *chunk                 { return new(chunk) }
func (*bodyAccount) release([]byte, bool)          {}
func (*bodyAccount) disk(int64, int64) bool        { return true }
func (a *bodyAccount) create() (*os.File, error)   { return createTemp(a.dir, bodyPrefix) }
func (*bodyAccount) closeFile(f *os.File, _ int64) { _ = f.Close() }
func (*bodyAccount) fileFailed(error) bool         { return false }
func (*bodyAccount) count(int)                     {}

// createTemp creates an unlinked temporary file in dir ("" the system's
// temporary directory) whose name starts with prefix, as nginx does with
// its proxy temporary files: it has no name while in use, and its space
// is freed when it is closed, even if the process dies. The files of
// both directions come from here.
func createTemp(dir, prefix string) (*os.File, error) {
	f, err := os.CreateTemp(dir, prefix+"*")
	if err != nil {
		return nil, err
	}
	if err := os.Remove(f.Name()); err != nil {
		_ = f.Close()
		_ = os.Remove(f.Name())
		return nil, err
	}
	return f, nil
}

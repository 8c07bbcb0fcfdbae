// SPDX-License-Identifier: Apache-2.0

package buffer

import (
	"bytes"
	"io"
	"os"
	"sync"
)

// bodyPrefix starts the name of a Store's temporary file: sluice-body-.
const bodyPrefix = "sluice-body-"

// StoreConfig sizes a Store.
type StoreConfig struct {
	// Dir is the directory of the temporary file ("" the system's
	// temporary directory).
	Dir string
	// Memory is how many bytes are kept in memory (> 0); the rest goes to
	// the temporary file.
	Memory int64
	// Initial is the memory allocated first, in bytes (at most Memory); it
	// doubles as it fills, up to Memory.
	Initial int64
	// Chunk is the size of each read that goes to the file, in bytes.
	Chunk int
}

// Store is a body held whole before it is read: written first, its first
// Memory bytes in memory and the rest in an unlinked temporary file
// (created at the first byte past Memory, as Buffers' files are, named
// sluice-body-*), then read from the start. The request path buffers a
// request body in one (request_buffering). A writer reads into Next and
// keeps what it read with Commit; Rewind ends the writing. Close frees
// the file. It is not safe for concurrent use.
type Store struct {
	cfg    StoreConfig
	mem    []byte
	chunk  []byte
	f      *os.File
	inMem  bool          // the last Next was memory
	rd     *bytes.Reader // mem, once rewound
	closed sync.Once
}

// NewStore returns an empty store.
func NewStore(cfg StoreConfig) *Store {
	return &Store{cfg: cfg, mem: make([]byte, 0, cfg.Initial)}
}

// Next returns where the next bytes go: the free memory (grown, doubling,
// up to Memory), or, once Memory is full, a chunk of Chunk bytes to be
// written to the file.
func (s *Store) Next() []byte {
	s.inMem = s.f == nil && int64(len(s.mem)) < s.cfg.Memory
	if s.inMem {
		if len(s.mem) == cap(s.mem) {
			s.mem = append(make([]byte, 0, min(2*int64(cap(s.mem)), s.cfg.Memory)), s.mem...)
		}
		return s.mem[len(s.mem):cap(s.mem)]
	}
	if s.chunk == nil {
		s.chunk = make([]byte, s.cfg.Chunk)
	}
	return s.chunk
}

// Commit keeps the first n bytes of the last Next: in memory, or written
// to the file (created now if this is its first write).
func (s *Store) Commit(n int) error {
	if s.inMem {
		s.mem = s.mem[:len(s.mem)+n]
		return nil
	}
	if s.f == nil {
		f, err := createTemp(s.cfg.Dir, bodyPrefix)
		if err != nil {
			return err
		}
		s.f = f
	}
	_, err := s.f.Write(s.chunk[:n])
	return err
}

// Rewind ends the writing: reads start at the first byte.
func (s *Store) Rewind() error {
	s.rd = bytes.NewReader(s.mem)
	if s.f != nil {
		if _, err := s.f.Seek(0, io.SeekStart); err != nil {
			return err
		}
	}
	return nil
}

// Read returns the next stored bytes, those in memory first, after
// Rewind.
func (s *Store) Read(p []byte) (int, error) {
	if s.rd != nil && s.rd.Len() > 0 {
		return s.rd.Read(p)
	}
	if s.f != nil {
		return s.f.Read(p)
	}
	return 0, io.EOF
}

// Close closes the temporary file, which frees its space; it always
// returns nil.
func (s *Store) Close() error {
	s.closed.Do(func() {
		if s.f != nil {
			_ = s.f.Close()
		}
	})
	return nil
}

// createTemp creates an unlinked temporary file in dir ("" the system's
// temporary directory) whose name starts with prefix, as nginx does with
// its proxy temporary files: it has no name while in use, and its space
// is freed when it is closed, even if the process dies. Buffers' files
// and Stores' come from here.
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

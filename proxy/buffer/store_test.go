// SPDX-License-Identifier: Apache-2.0

package buffer

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// fill writes body into s in reads of at most step bytes, as a body
// reader does, and returns the sizes Next offered.
func fill(t *testing.T, s *Store, body []byte, step int) []int {
	t.Helper()
	var offered []int
	for len(body) > 0 {
		dst := s.Next()
		offered = append(offered, len(dst))
		n := copy(dst[:min(len(dst), step)], body)
		if err := s.Commit(n); err != nil {
			t.Fatal(err)
		}
		body = body[n:]
	}
	return offered
}

// A Store keeps its first Memory bytes in memory, growing from Initial,
// and the rest in an unlinked temporary file written Chunk bytes at a
// time; it reads back the same bytes, and Close frees the file.
func TestStoreMemoryThenUnlinkedFile(t *testing.T) {
	dir := t.TempDir()
	body := make([]byte, 100<<10)
	for i := range body {
		body[i] = byte(i * 7)
	}
	s := NewStore(StoreConfig{Dir: dir, Memory: 16 << 10, Initial: 512, Chunk: 32 << 10})
	offered := fill(t, s, body[:16<<10], 1<<20)
	if want := []int{512, 512, 1 << 10, 2 << 10, 4 << 10, 8 << 10}; !slices.Equal(offered, want) {
		t.Errorf("memory offered %v, want it doubling from 512 to 16 KiB: %v", offered, want)
	}
	if s.f != nil {
		t.Fatal("a file before the memory is full")
	}
	offered = fill(t, s, body[16<<10:], 1<<20)
	for _, n := range offered {
		if n != 32<<10 {
			t.Fatalf("file reads offered %v, want 32 KiB each", offered)
		}
	}
	if s.f == nil {
		t.Fatal("no file past Memory")
	}
	if ents, err := os.ReadDir(dir); err != nil || len(ents) != 0 {
		t.Errorf("directory holds %v (%v), want nothing: the file is unlinked", ents, err)
	}
	if fi, err := s.f.Stat(); err != nil || fi.Size() != int64(len(body)-16<<10) {
		t.Errorf("file of %v bytes (%v), want %d", fi.Size(), err, len(body)-16<<10)
	}
	if err := s.Rewind(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(s)
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("read back %d bytes (%v), want the %d written", len(got), err, len(body))
	}
	f := s.f
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Stat(); err == nil {
		t.Error("the file is still open after Close")
	}
	_ = s.Close() // twice is harmless
}

// A body within Memory never touches the disk, even where no file could
// be created.
func TestStoreSmallBodyInMemory(t *testing.T) {
	s := NewStore(StoreConfig{Dir: filepath.Join(t.TempDir(), "missing"), Memory: 16 << 10, Initial: 5, Chunk: 32 << 10})
	fill(t, s, []byte("hello world"), 3)
	if err := s.Rewind(); err != nil {
		t.Fatal(err)
	}
	if got, err := io.ReadAll(s); err != nil || string(got) != "hello world" || s.f != nil {
		t.Errorf("read %q (%v), file %v: want the body from memory alone", got, err, s.f)
	}
}

// A file that cannot be created is an error of the write that needs it.
func TestStoreFileError(t *testing.T) {
	s := NewStore(StoreConfig{Dir: filepath.Join(t.TempDir(), "missing"), Memory: 4, Initial: 4, Chunk: 8})
	copy(s.Next(), "abcd")
	if err := s.Commit(4); err != nil {
		t.Fatal(err)
	}
	copy(s.Next(), "e")
	if err := s.Commit(1); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("Commit past memory into a missing directory: %v, want its error", err)
	}
}

// Response files and body files are named by kind (SweepTempFiles finds
// a dead process's response files by theirs), and neither keeps a name.
func TestTempFileNames(t *testing.T) {
	dir := t.TempDir()
	var names []string
	for _, prefix := range []string{bodyPrefix, New(nil).prefix} {
		f, err := createTemp(dir, prefix)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, f.Name())
		_ = f.Close()
	}
	if !strings.HasPrefix(filepath.Base(names[0]), "sluice-body-") ||
		!strings.HasPrefix(filepath.Base(names[1]), "sluice-resp-"+strconv.Itoa(os.Getpid())+"-") {
		t.Errorf("names %v, want sluice-body-* and sluice-resp-PID-*", names)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("directory holds %v, want the files unlinked", ents)
	}
}

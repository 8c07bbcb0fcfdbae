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

// pieces is a body source that gives at most step bytes a read, as a
// network body does, and notes the room each read was offered.
type pieces struct {
	body    []byte
	step    int
	offered []int
}

func (p *pieces) Read(dst []byte) (int, error) {
	if len(p.body) == 0 {
		return 0, io.EOF
	}
	p.offered = append(p.offered, len(dst))
	n := copy(dst[:min(len(dst), p.step)], p.body)
	p.body = p.body[n:]
	return n, nil
}

// A request body keeps its first bytes in memory, taken as it fills
// (doubling from 512 bytes), and the rest in an unlinked temporary file
// written 32 KiB at a time; it reads back the same bytes, and Close
// frees the file.
func TestBodyMemoryThenUnlinkedFile(t *testing.T) {
	dir := t.TempDir()
	body := make([]byte, 100<<10)
	for i := range body {
		body[i] = byte(i * 7)
	}
	s := NewBody(dir, 16<<10, -1)
	src := &pieces{body: body, step: 1 << 20}
	if err := s.Fill(src); err != nil {
		t.Fatal(err)
	}
	if want := []int{512, 512, 1 << 10, 2 << 10, 4 << 10, 8 << 10}; !slices.Equal(src.offered[:6], want) {
		t.Errorf("memory offered %v, want it doubling from 512 to 16 KiB: %v", src.offered, want)
	}
	for _, n := range src.offered[6:] {
		if n != 32<<10 {
			t.Fatalf("file reads offered %v, want 32 KiB each", src.offered[6:])
		}
	}
	if s.f == nil || s.memHeld != 16<<10 {
		t.Fatalf("file %v, memory %d bytes: want 16 KiB in memory, the rest in a file", s.f, s.memHeld)
	}
	if ents, err := os.ReadDir(dir); err != nil || len(ents) != 0 {
		t.Errorf("directory holds %v (%v), want nothing: the file is unlinked", ents, err)
	}
	if fi, err := s.f.Stat(); err != nil || fi.Size() != int64(len(body)-16<<10) {
		t.Errorf("file of %v bytes (%v), want %d", fi.Size(), err, len(body)-16<<10)
	}
	f := s.f
	got, err := io.ReadAll(s)
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("read back %d bytes (%v), want the %d written", len(got), err, len(body))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Stat(); err == nil {
		t.Error("the file is still open after Close")
	}
	_ = s.Close() // twice is harmless
}

// A body within its memory never touches the disk, even where no file
// could be created; a body of known length takes its memory at once, and
// 512 bytes more for the read that finds its end, not as much again.
func TestBodySmallInMemory(t *testing.T) {
	s := NewBody(filepath.Join(t.TempDir(), "missing"), 16<<10, 600)
	src := &pieces{body: bytes.Repeat([]byte("hello world "), 50), step: 3}
	if err := s.Fill(src); err != nil {
		t.Fatal(err)
	}
	if src.offered[0] != 600 || s.memHeld != 600+512 {
		t.Errorf("first read offered %d bytes, memory %d; want the length, 600, then 512", src.offered[0], s.memHeld)
	}
	if got, err := io.ReadAll(s); err != nil || string(got) != strings.Repeat("hello world ", 50) || s.f != nil {
		t.Errorf("read %q (%v), file %v: want the body from memory alone", got, err, s.f)
	}
	_ = s.Close()
}

// A file that cannot be created ends the body with its error.
func TestBodyFileError(t *testing.T) {
	s := NewBody(filepath.Join(t.TempDir(), "missing"), 4, 5)
	err := s.Fill(strings.NewReader("abcde"))
	if err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("Fill past memory into a missing directory: %v, want its error", err)
	}
	_ = s.Close()
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

// BenchmarkBodySpool is the cost of buffering a request body: filled
// whole from a reader, then read back, with the default
// request_buffer_bytes (16 KiB); 256 KiB goes mostly to the file.
func BenchmarkBodySpool(b *testing.B) {
	for _, size := range []int{2 << 10, 256 << 10} {
		body := make([]byte, size)
		b.Run(strconv.Itoa(size>>10)+"KiB", func(b *testing.B) {
			dir := b.TempDir()
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				s := NewBody(dir, 16<<10, int64(size))
				if err := s.Fill(bytes.NewReader(body)); err != nil {
					b.Fatal(err)
				}
				if _, err := io.Copy(io.Discard, s); err != nil {
					b.Fatal(err)
				}
				_ = s.Close()
			}
		})
	}
}

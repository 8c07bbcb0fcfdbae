// SPDX-License-Identifier: Apache-2.0

package buffer

import (
	"bytes"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// exchange is the request side of a spool in tests: it counts what the
// spool tells it.
type exchange struct {
	wait     atomic.Int64 // ns
	failed   atomic.Bool
	longLive atomic.Bool
}

func (e *exchange) ClientWait(d time.Duration) { e.wait.Add(int64(d)) }
func (e *exchange) UpstreamFailed()            { e.failed.Store(true) }
func (e *exchange) LongLived() bool            { return e.longLive.Load() }

// testSpool returns the buffers of the default policy, changed by tune
// (nil: none), and a response spool of src on them, of length bytes (-1:
// unknown), not yet started.
func testSpool(src io.Reader, length int64, tune func(*Config)) (*Buffers, *Spool) {
	var cfg Config
	if tune != nil {
		tune(&cfg)
	}
	cfg.SetDefaults()
	p := NewPolicy(&cfg)
	b := New(slog.New(slog.DiscardHandler))
	s := &Spool{x: &exchange{}, src: io.NopCloser(src), length: length, resp: respAccount{b, &p}}
	s.a, s.segs = &s.resp, s.segs0[:0]
	return b, s
}

// closeFreed closes s and checks that its memory went back.
func closeFreed(t *testing.T, b *Buffers, s *Spool) {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if m := b.lent(); m != 0 {
		t.Fatalf("memory lent after close: %d", m)
	}
}

// A spool whose queue outgrows its first array leaves no chunk pointer
// behind in it: segs0 lives as long as the response, and a chunk it
// pointed to could never be collected, whether given back or not.
func TestSpoolKeepsNoStaleChunk(t *testing.T) {
	body := strings.Repeat("x", 5*bufChunk)
	b, s := testSpool(strings.NewReader(body), int64(len(body)), nil)
	for s.step() {
	}
	got, err := io.ReadAll(s)
	if err != nil || len(got) != len(body) {
		t.Fatalf("read %d bytes, %v", len(got), err)
	}
	for i, seg := range s.segs0 {
		if seg.buf != nil {
			t.Errorf("segs0[%d] still points to a chunk after the queue moved", i)
		}
	}
	closeFreed(t, b, s)
}

// A body of known length that arrived with its headers is read whole by
// prime on the handler's goroutine, with no filler goroutine, even from a
// reader that gives its io.EOF only at the call after the last byte.
func TestPrimeReadsASmallBodyWhole(t *testing.T) {
	b, s := testSpool(strings.NewReader("hello"), 5, nil)
	s.prime()
	if s.running || s.ready != nil || !s.done || s.err != io.EOF {
		t.Fatalf("after prime: running %v, channels %v, done %v, err %v; want the body read whole", s.running, s.ready != nil, s.done, s.err)
	}
	got, err := io.ReadAll(s)
	if err != nil || string(got) != "hello" {
		t.Fatalf("read %q, %v", got, err)
	}
	closeFreed(t, b, s)
}

// One spool serves both directions. Filled whole before it is read (a
// request body), and read while its filler writes it (a response), a
// body larger than its memory goes on in the temporary file, reads back
// byte for byte, and leaves no memory, disk or open file behind. Read
// while it fills, the memory the reader has read goes back at once and
// serves the filler again, and what the reader leaves in memory moves
// to the file parkAfter after the body's end.
func TestSpoolBothModes(t *testing.T) {
	body := make([]byte, 10*bufChunk+123)
	for i := range body {
		body[i] = byte(i*31 + i>>9)
	}
	t.Run("fill-then-read", func(t *testing.T) {
		s := NewBody(t.TempDir(), 2*bufChunk, -1)
		if err := s.Fill(&pieces{body: body, step: 5000}); err != nil {
			t.Fatal(err)
		}
		if s.ready != nil || s.f == nil || s.memHeld != 2*bufChunk || s.fileEnd != int64(len(body)-2*bufChunk) {
			t.Fatalf("filled: filler goroutine %v, file %v of %d bytes, memory %d; want no goroutine, 64 KiB in memory and the rest in the file",
				s.ready != nil, s.f != nil, s.fileEnd, s.memHeld)
		}
		f := s.f
		if got, err := io.ReadAll(s); err != nil || !bytes.Equal(got, body) {
			t.Fatalf("read back %d bytes (%v), want the %d filled", len(got), err, len(body))
		}
		_ = s.Close()
		if _, err := f.Stat(); err == nil {
			t.Error("the file is still open after Close")
		}
	})
	t.Run("read-while-filling", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			pr, pw := io.Pipe()
			more := make(chan struct{})
			go func() {
				_, _ = pw.Write(body[:4*bufChunk])
				<-more
				_, _ = pw.Write(body[4*bufChunk:])
				_ = pw.Close()
			}()
			dir := t.TempDir()
			b, s := testSpool(pr, -1, func(c *Config) { c.MemoryBytes, c.TempDir = 2*bufChunk, dir })
			state := func() (running, done bool, got, mem, file int64) {
				s.mu.Lock()
				defer s.mu.Unlock()
				return s.running, s.done, s.got, s.memHeld, s.fileEnd
			}
			got := make([]byte, 2*bufChunk)
			if n, err := s.Read(got[:5000]); n != 5000 || err != nil {
				t.Fatalf("first read: %d bytes, %v", n, err)
			}
			synctest.Wait() // the filler has read what the backend sent
			if running, _, n, mem, file := state(); !running || n != 4*bufChunk || mem != 2*bufChunk || file != 2*bufChunk {
				t.Fatalf("filler running %v, %d bytes read, %d in memory, %d in the file; want 128 KiB read ahead of the client: 64 KiB in memory, 64 KiB in the file",
					running, n, mem, file)
			}
			if _, err := io.ReadFull(s, got[5000:]); err != nil {
				t.Fatal(err)
			}
			if b.lent() != 0 {
				t.Fatalf("%d bytes of memory lent after the client read them, want 0", b.lent())
			}
			close(more)
			synctest.Wait() // the filler has read the rest, into memory again, then the file, and parks
			if _, done, _, mem, _ := state(); mem != 2*bufChunk || !done {
				t.Fatalf("after the body's end: %d bytes in memory, done %v; want the memory the client gave back used again", mem, done)
			}
			time.Sleep(parkAfter + time.Millisecond)
			synctest.Wait()
			if running, _, _, _, _ := state(); running || b.lent() != 0 {
				t.Fatalf("parkAfter after the end: filler running %v, %d bytes of memory; want them moved to the file", running, b.lent())
			}
			rest, err := io.ReadAll(s)
			if err != nil || !bytes.Equal(append(got, rest...), body) {
				t.Fatalf("read %d bytes (%v), want the %d sent, in order", len(got)+len(rest), err, len(body))
			}
			closeFreed(t, b, s)
			if b.disk.Load() != 0 || b.files.Load() != 0 {
				t.Fatalf("after close: %d bytes of disk, %d files; want none", b.disk.Load(), b.files.Load())
			}
		})
	})
}

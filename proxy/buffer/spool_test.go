// SPDX-License-Identifier: Apache-2.0

package buffer

import (
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
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

// testSpool returns the buffers of the default policy and a spool of
// body on them, not yet started.
func testSpool(body string) (*Buffers, *Spool) {
	var cfg Config
	cfg.SetDefaults()
	p := NewPolicy(&cfg)
	b := New(slog.New(slog.DiscardHandler))
	s := &Spool{b: b, p: &p, x: &exchange{}, src: io.NopCloser(strings.NewReader(body)), length: int64(len(body))}
	s.segs = s.segs0[:0]
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
	b, s := testSpool(body)
	for s.step() {
	}
	got, err := io.ReadAll(s)
	if err != nil || len(got) != len(body) {
		t.Fatalf("read %d bytes, %v", len(got), err)
	}
	for i, seg := range s.segs0 {
		if seg.chunk != nil {
			t.Errorf("segs0[%d] still points to a chunk after the queue moved", i)
		}
	}
	closeFreed(t, b, s)
}

// A body of known length that arrived with its headers is read whole by
// prime on the handler's goroutine, with no filler goroutine, even from a
// reader that gives its io.EOF only at the call after the last byte.
func TestPrimeReadsASmallBodyWhole(t *testing.T) {
	b, s := testSpool("hello")
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

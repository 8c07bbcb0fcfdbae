// SPDX-License-Identifier: Apache-2.0

package buffer

import (
	"testing"
	"time"
)

// Every chunk the pool keeps is counted: chunks lent to responses, the
// large copy buffers and the idle chunks kept for reuse stay within the
// budget together; a chunk given back beyond it is let go, and chunks
// idle throughout idleTrim are let go at the next use.
func TestChunkBudgetCountsEveryChunk(t *testing.T) {
	const n = 4
	p := NewPool(n * copyBufferSize)
	now := time.Unix(0, 0)
	p.now = func() time.Time { return now }
	p.lastTrim = now
	check := func(what string, wantLent, wantIdle int64) {
		t.Helper()
		lent, idle := p.usage()
		if lent != wantLent*copyBufferSize || idle != wantIdle*copyBufferSize {
			t.Fatalf("%s: lent %d, idle %d chunks; want %d, %d", what, lent/copyBufferSize, idle/copyBufferSize, wantLent, wantIdle)
		}
	}
	var out []*chunk
	for range n - 1 {
		out = append(out, p.take(n*copyBufferSize))
	}
	cb := p.Get() // the last chunk of the budget, as a copy buffer
	if len(cb) != copyBufferSize {
		t.Fatalf("copy buffer: %d bytes, want %d", len(cb), copyBufferSize)
	}
	check("budget lent", n, 0)
	if got := p.copyBytes(); got != copyBufferSize {
		t.Fatalf("large copy buffers: %d bytes, want %d", got, copyBufferSize)
	}
	if c := p.take(n * copyBufferSize); c != nil {
		t.Fatal("a chunk beyond the budget was lent")
	}
	if b := p.Get(); len(b) != smallCopyBufferSize {
		t.Fatalf("copy buffer with the budget lent: %d bytes, want %d", len(b), smallCopyBufferSize)
	}
	free := p.getFree() // a staging chunk: outside the budget
	p.Put(cb)
	for _, c := range out {
		p.give(c, true)
	}
	check("all given back", 0, n)
	p.give(free, false) // would pass the budget with the idle ones: let go
	check("a free chunk given back beyond the budget", 0, n)
	if c := p.take(n * copyBufferSize); c != out[len(out)-1] {
		t.Fatal("an idle chunk was not reused")
	} else {
		p.give(c, true)
	}
	p.setLimit(2*copyBufferSize, 0)
	check("budget lowered by a reload", 0, 2)
	now = now.Add(idleTrim)
	p.give(p.take(2*copyBufferSize), true) // both were given back in this interval: kept
	check("after the first idleTrim", 0, 2)
	now = now.Add(idleTrim)
	p.give(p.take(2*copyBufferSize), true) // one used, one idle throughout
	check("after the second idleTrim", 0, 1)
}

// The open connections' memory comes out of the budget first: with n
// connections of c bytes each, chunks are lent up to the budget less
// n·c, and none when the connections take it all.
func TestChunkBudgetLessConnections(t *testing.T) {
	var conns int64 = 2
	p := NewPool(4 * copyBufferSize)
	p.conns = func() int64 { return conns }
	p.setLimit(4*copyBufferSize, copyBufferSize)
	a, b := p.take(4*copyBufferSize), p.take(4*copyBufferSize)
	if a == nil || b == nil || p.take(4*copyBufferSize) != nil {
		t.Fatal("with 2 connections of one chunk each, 2 of 4 chunks must be lent, and no third")
	}
	conns = 4
	p.give(a, true) // the connections take the whole budget: not kept
	if _, idle := p.usage(); idle != 0 {
		t.Fatalf("idle %d bytes with the budget taken by connections", idle)
	}
	if len(p.Get()) != smallCopyBufferSize {
		t.Fatal("a large copy buffer lent beyond the budget")
	}
}

// ReverseProxy's copy buffers: 32 KiB while fewer than
// maxLargeCopyBuffers are lent (slow readers hold theirs for as long as
// they read), 4 KiB beyond; each comes back to its own pool and a large
// one given back is lent again.
func TestCopyBuffersBounded(t *testing.T) {
	p := NewPool(DefaultMaxMemoryBytes)
	var lent [][]byte
	for range maxLargeCopyBuffers {
		b := p.Get()
		if len(b) != copyBufferSize {
			t.Fatalf("buffer %d: %d bytes, want %d", len(lent), len(b), copyBufferSize)
		}
		lent = append(lent, b)
	}
	small := p.Get()
	if len(small) != smallCopyBufferSize {
		t.Fatalf("beyond the cap: %d bytes, want %d", len(small), smallCopyBufferSize)
	}
	p.Put(small)
	if got := p.large.Load(); got != maxLargeCopyBuffers {
		t.Fatalf("a small buffer given back changed the large count: %d", got)
	}
	p.Put(lent[0])
	if b := p.Get(); len(b) != copyBufferSize {
		t.Fatalf("after one large buffer came back: %d bytes, want %d", len(b), copyBufferSize)
	}
	for _, b := range lent[1:] {
		p.Put(b)
	}
	if got := p.large.Load(); got != 1 {
		t.Fatalf("large buffers lent: %d, want 1", got)
	}
}

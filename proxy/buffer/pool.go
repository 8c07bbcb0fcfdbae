// SPDX-License-Identifier: Apache-2.0

package buffer

import (
	"sync"
	"sync/atomic"
	"time"
)

const copyBufferSize = 32 << 10

// maxLargeCopyBuffers is how many 32 KiB copy buffers ReverseProxy may
// hold at once (8 MiB); a response copied while they are all out, or
// while the memory budget has no chunk to spare, gets a buffer of
// smallCopyBufferSize. ReverseProxy holds a copy buffer from the
// response's first byte to its last: a client that reads slowly holds
// it for as long as it reads, so a thousand slow readers would hold 32
// MiB of them (the larger part of the proxy's memory under the slow-read
// attack), on top of the response buffers. The fast responses of normal
// traffic give theirs back within a round trip, so the cap is not
// reached without hundreds of slow clients; a response with the small
// buffer takes 8 reads and writes where it would take one.
const maxLargeCopyBuffers = 256

// smallCopyBufferSize is the copy buffer beyond maxLargeCopyBuffers:
// 4 KiB, the size of net/http's connection write buffer.
const smallCopyBufferSize = 4 << 10

// idleTrim is how often the chunks that stayed idle throughout are let
// go: a chunk not lent for idleTrim to 2·idleTrim goes back to Go's heap.
const idleTrim = 10 * time.Second

// chunk is the unit of response-buffer memory: 32 KiB.
type chunk = [copyBufferSize]byte

// Pool lends the 32 KiB chunks of response buffers (take, give:
// within a memory budget), ReverseProxy's copy buffers (Get, Put: 32 KiB
// chunks within the same budget while fewer than maxLargeCopyBuffers are
// out, else 4 KiB), and the chunks a filler needs whatever the budget
// (getFree, give: the staging chunk of writes to a temporary file,
// the pass-through's chunk). It is safe for concurrent use.
//
// Every chunk it keeps is counted: lent (budgeted chunks out) plus idle
// (chunks kept for reuse) stays within the running generation's
// response_buffering.max_memory_bytes, so the memory of response buffers
// is the budget, not the budget plus a pool of spares (a sync.Pool keeps
// what it was given until two garbage collections, which under a
// slow-read attack, when little is allocated, do not come for minutes:
// the peak of the buffers stayed in the heap beside the buffers in use).
// A chunk given back when lent plus idle would pass the budget goes to
// the garbage collector.
type Pool struct {
	small sync.Pool    // *[smallCopyBufferSize]byte
	large atomic.Int64 // 32 KiB copy buffers lent by Get and not yet Put
	limit atomic.Int64 // the budget of lent plus idle, bytes (max_memory_bytes)
	// conns returns the open client connections (nil: none counted), and
	// perConn is what each costs (connection_memory_bytes): their memory
	// is taken out of the budget first.
	conns   func() int64
	perConn atomic.Int64

	mu       sync.Mutex
	idle     []*chunk
	lent     int64 // bytes of budgeted chunks out (take, and Get's large buffers)
	lowIdle  int   // the fewest idle chunks since lastTrim
	lastTrim time.Time
	now      func() time.Time
}

// NewPool returns a pool whose chunks stay within limit bytes
// (lent and idle together).
func NewPool(limit int64) *Pool {
	p := &Pool{small: sync.Pool{New: func() any { return new([smallCopyBufferSize]byte) }}, now: time.Now}
	p.limit.Store(limit)
	p.lastTrim = p.now()
	return p
}

// setLimit makes limit the budget of lent plus idle chunks (a reload's
// max_memory_bytes) and perConn each connection's part of it
// (connection_memory_bytes; 0: none); idle chunks beyond it are let go.
func (b *Pool) setLimit(limit, perConn int64) {
	b.limit.Store(limit)
	b.perConn.Store(perConn)
	b.trim(b.now())
}

// reserved returns the bytes of the budget the open connections take.
func (b *Pool) reserved() int64 {
	if b.conns == nil {
		return 0
	}
	return max(b.conns(), 0) * b.perConn.Load()
}

// take lends a budgeted chunk if the open connections' part and the
// chunks lent stay within limit bytes (a generation's max_memory_bytes),
// else returns nil.
func (b *Pool) take(limit int64) *chunk {
	res := b.reserved()
	b.mu.Lock()
	defer b.mu.Unlock()
	if res+b.lent+copyBufferSize > limit {
		return nil
	}
	b.lent += copyBufferSize
	if c := b.popIdleLocked(); c != nil {
		return c
	}
	return new(chunk)
}

// give takes back a chunk take lent (budget) or getFree lent.
func (b *Pool) give(c *chunk, budget bool) {
	res := b.reserved()
	b.mu.Lock()
	if budget {
		b.lent -= copyBufferSize
	}
	b.keepLocked(c, res)
	b.mu.Unlock()
}

// getFree lends a chunk outside the budget: an idle one if there is one.
func (b *Pool) getFree() *chunk {
	b.mu.Lock()
	c := b.popIdleLocked()
	b.mu.Unlock()
	if c == nil {
		c = new(chunk)
	}
	return c
}

// keepLocked keeps c for reuse if the connections' part res, lent and
// idle stay within the limit, and lets go of the chunks idle since the
// last trim. Called with b.mu held.
func (b *Pool) keepLocked(c *chunk, res int64) {
	if res+b.lent+int64(len(b.idle)+1)*copyBufferSize <= b.limit.Load() {
		b.idle = append(b.idle, c)
	}
	b.trimLocked(b.now(), res)
}

// trim lets go of the idle chunks beyond the budget, and of those idle
// throughout the last idleTrim; the proxy calls it every second, so that
// chunks are let go when no response takes or gives one.
func (b *Pool) trim(now time.Time) {
	res := b.reserved()
	b.mu.Lock()
	b.trimLocked(now, res)
	b.mu.Unlock()
}

func (b *Pool) trimLocked(now time.Time, res int64) {
	if over := res + b.lent + int64(len(b.idle))*copyBufferSize - b.limit.Load(); over > 0 {
		b.dropIdleLocked(int((over + copyBufferSize - 1) / copyBufferSize))
	}
	if now.Sub(b.lastTrim) >= idleTrim {
		b.dropIdleLocked(b.lowIdle)
		b.lowIdle, b.lastTrim = len(b.idle), now
	}
}

func (b *Pool) popIdleLocked() *chunk {
	n := len(b.idle)
	if n == 0 {
		return nil
	}
	c := b.idle[n-1]
	b.idle[n-1] = nil
	b.idle = b.idle[:n-1]
	b.lowIdle = min(b.lowIdle, n-1)
	return c
}

// dropIdleLocked lets go of the n idle chunks least recently given back.
func (b *Pool) dropIdleLocked(n int) {
	n = min(n, len(b.idle))
	if n == 0 {
		return
	}
	rest := copy(b.idle, b.idle[n:])
	clear(b.idle[rest:])
	b.idle = b.idle[:rest]
	b.lowIdle = min(b.lowIdle, rest)
}

// usage returns the bytes of budgeted chunks lent and of idle chunks.
func (b *Pool) usage() (lent, idle int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lent, int64(len(b.idle)) * copyBufferSize
}

// copyBytes returns the bytes of the 32 KiB copy buffers lent (a part
// of usage's lent).
func (b *Pool) copyBytes() int64 { return max(b.large.Load(), 0) * copyBufferSize }

// Get lends ReverseProxy a copy buffer: a 32 KiB chunk within the budget
// while fewer than maxLargeCopyBuffers are lent, else 4 KiB.
func (b *Pool) Get() []byte {
	if b.large.Add(1) <= maxLargeCopyBuffers {
		if c := b.take(b.limit.Load()); c != nil {
			return c[:]
		}
	}
	b.large.Add(-1)
	return b.small.Get().(*[smallCopyBufferSize]byte)[:]
}

// Put takes back a buffer Get lent.
func (b *Pool) Put(x []byte) {
	switch {
	case cap(x) >= copyBufferSize:
		b.large.Add(-1)
		b.give((*chunk)(x[:copyBufferSize]), true)
	case cap(x) >= smallCopyBufferSize:
		b.small.Put((*[smallCopyBufferSize]byte)(x[:smallCopyBufferSize]))
	}
}

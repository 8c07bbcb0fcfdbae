package proxy

import (
	"sync"
	"sync/atomic"
)

const copyBufferSize = 32 << 10

// maxLargeCopyBuffers is how many 32 KiB copy buffers ReverseProxy may
// hold at once (8 MiB); a response copied while they are all out gets a
// buffer of smallCopyBufferSize. ReverseProxy holds a copy buffer from
// the response's first byte to its last: a client that reads slowly
// holds it for as long as it reads, so a thousand slow readers would hold
// 32 MiB of them (the larger part of the proxy's memory under the
// slow-read attack), on top of the response buffers' own budget. The
// fast responses of normal traffic give theirs back within a round
// trip, so the cap is not reached without hundreds of slow clients; a
// response with the small buffer takes 8 reads and writes where it would
// take one.
const maxLargeCopyBuffers = 256

// smallCopyBufferSize is the copy buffer beyond maxLargeCopyBuffers:
// 4 KiB, the size of net/http's connection write buffer.
const smallCopyBufferSize = 4 << 10

// bufferPool recycles the copy buffers of ReverseProxy (Get, Put), and
// the 32 KiB chunks of response buffers (getChunk, putChunk), without
// allocating. It is safe for concurrent use.
type bufferPool struct {
	p     sync.Pool    // *[copyBufferSize]byte
	small sync.Pool    // *[smallCopyBufferSize]byte
	large atomic.Int64 // 32 KiB copy buffers lent by Get and not yet Put
}

func newBufferPool() *bufferPool {
	return &bufferPool{p: sync.Pool{New: func() any { return new([copyBufferSize]byte) }},
		small: sync.Pool{New: func() any { return new([smallCopyBufferSize]byte) }}}
}

// Get lends ReverseProxy a copy buffer: 32 KiB while fewer than
// maxLargeCopyBuffers are lent, else 4 KiB.
func (b *bufferPool) Get() []byte {
	if b.large.Add(1) > maxLargeCopyBuffers {
		b.large.Add(-1)
		return b.small.Get().(*[smallCopyBufferSize]byte)[:]
	}
	return b.getChunk()[:]
}

// Put takes back a buffer Get lent.
func (b *bufferPool) Put(x []byte) {
	switch {
	case cap(x) >= copyBufferSize:
		b.large.Add(-1)
		b.putChunk((*[copyBufferSize]byte)(x[:copyBufferSize]))
	case cap(x) >= smallCopyBufferSize:
		b.small.Put((*[smallCopyBufferSize]byte)(x[:smallCopyBufferSize]))
	}
}

func (b *bufferPool) getChunk() *[copyBufferSize]byte { return b.p.Get().(*[copyBufferSize]byte) }

func (b *bufferPool) putChunk(c *[copyBufferSize]byte) { b.p.Put(c) }

// policy returns the running policy (for metrics that follow reloads).

// SPDX-License-Identifier: Apache-2.0

package policer

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
)

// Registry is the set of live connections admitted through one or more
// Listeners, and the count of bytes written to them. It feeds the sensors
// of package monitor: AppendSockets gives the outgoing-queue sensor
// (monitor.SocketQueue) the sockets whose unsent bytes it sums, and
// BytesWritten gives the bandwidth sensor (monitor.Bandwidth) the bytes
// sent to clients.
//
// A connection enters the registry when Accept returns it and leaves it on
// its first Close; a connection its user never closes stays (net/http's
// server always closes). Only TCP connections are tracked.
//
// The zero value is an empty registry ready to use. A Registry is safe for
// concurrent use; adding and removing a connection is O(1) under a short
// mutex and does not allocate once the registry has grown to its peak size.
type Registry struct {
	mu    sync.Mutex
	conns []*Conn // live connections; conns[i].idx == i

	written  atomic.Uint64
	accepted atomic.Uint64
	closed   atomic.Uint64
}

// RegistryStats is a snapshot of a Registry.
type RegistryStats struct {
	// Live is the number of tracked connections not yet closed.
	Live int
	// Accepted and Closed count connections added and removed since the
	// registry was created.
	Accepted, Closed uint64
	// BytesWritten is the number of bytes written to tracked connections
	// since the registry was created (see BytesWritten).
	BytesWritten uint64
}

// Stats returns a snapshot of the registry.
func (r *Registry) Stats() RegistryStats {
	return RegistryStats{Live: r.Len(), Accepted: r.accepted.Load(), Closed: r.closed.Load(), BytesWritten: r.written.Load()}
}

// Len returns the number of live tracked connections.
func (r *Registry) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.conns)
}

// BytesWritten returns the number of bytes written to the tracked
// connections since the registry was created, including connections since
// closed: every byte a Write or ReadFrom (sendfile, splice) of a Conn
// handed to the kernel. It is monotonic.
func (r *Registry) BytesWritten() uint64 { return r.written.Load() }

// AppendSockets appends the raw sockets of the live tracked connections to
// dst and returns the extended slice (monitor.SocketSet). A socket that is
// closed after the snapshot stays safe to use: its RawConn's Control then
// fails with net.ErrClosed instead of touching a reused descriptor.
func (r *Registry) AppendSockets(dst []syscall.RawConn) []syscall.RawConn {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.conns {
		dst = append(dst, c.raw)
	}
	return dst
}

// track wraps tc into a Conn and adds it to the registry. It returns tc
// itself if its raw socket cannot be obtained (then it is not tracked).
func (r *Registry) track(tc *net.TCPConn) net.Conn {
	raw, err := tc.SyscallConn()
	if err != nil {
		return tc
	}
	c := &Conn{TCPConn: tc, reg: r, raw: raw}
	r.mu.Lock()
	c.idx = len(r.conns)
	r.conns = append(r.conns, c)
	r.mu.Unlock()
	r.accepted.Add(1)
	return c
}

func (r *Registry) remove(c *Conn) {
	r.mu.Lock()
	last := len(r.conns) - 1
	moved := r.conns[last]
	r.conns[c.idx] = moved
	moved.idx = c.idx
	r.conns[last] = nil
	r.conns = r.conns[:last]
	r.mu.Unlock()
	r.closed.Add(1)
}

// Conn is an admitted TCP connection tracked by a Registry. It embeds the
// *net.TCPConn, so every method of the TCP connection stays available
// (SetLinger, SetKeepAlive, SetNoDelay, CloseWrite, SyscallConn, File,
// WriteTo, ...), and overrides three:
//
//   - Write and ReadFrom count the bytes handed to the kernel in the
//     registry; ReadFrom still reaches the TCP connection's, so net/http's
//     sendfile(2)/splice(2) path for files is kept;
//   - Close removes the connection from the registry (once) and closes it.
//
// NetConn returns the underlying connection, as tls.Conn's does. Code that
// type-asserts net.Conn values to *net.TCPConn sees a *Conn instead; assert
// to an interface (interface{ SetLinger(int) error }, syscall.Conn) or call
// NetConn.
type Conn struct {
	*net.TCPConn
	reg    *Registry
	raw    syscall.RawConn
	idx    int // position in reg.conns, under reg.mu
	closed atomic.Bool
}

// NetConn returns the underlying TCP connection. Writing to it directly
// bypasses the byte count; closing it directly leaves the Conn in the
// registry.
func (c *Conn) NetConn() net.Conn { return c.TCPConn }

// Write writes b to the connection and counts the bytes written.
func (c *Conn) Write(b []byte) (int, error) {
	n, err := c.TCPConn.Write(b)
	c.reg.written.Add(uint64(n))
	return n, err
}

// ReadFrom copies from src to the connection (with sendfile or splice when
// src allows it, as *net.TCPConn does) and counts the bytes written.
func (c *Conn) ReadFrom(src io.Reader) (int64, error) {
	n, err := c.TCPConn.ReadFrom(src)
	if n > 0 {
		c.reg.written.Add(uint64(n))
	}
	return n, err
}

// Close removes the connection from its registry (the first time) and
// closes it.
func (c *Conn) Close() error {
	if c.closed.CompareAndSwap(false, true) {
		c.reg.remove(c)
	}
	return c.TCPConn.Close()
}

// SPDX-License-Identifier: Apache-2.0

package overload

import (
	"context"
	"os"
	"runtime/debug"
	"time"

	"github.com/sluicehq/sluice/proxy/buffer"
)

// SoftLimitHeadroom is what the automatic soft memory limit adds to the
// memory the response buffers and the connections may hold, in bytes:
// the runtime's own and the proxy's baseline (the quick start's
// anonymous memory after its warm-up is about 5.4 MB, RssAnon in
// /proc/PID/status; the binary's pages, 19 MB more of its resident set,
// are not Go's and not limited).
const SoftLimitHeadroom = 8 << 20

// SoftMemoryLimit returns the soft memory limit that p asks for with
// conns client connections open, in bytes, or -1 for none:
// soft_memory_limit_bytes if set, else SoftLimitHeadroom + max(M, n·c)
// with M max_memory_bytes, n the open connections and c
// connection_memory_bytes. The connections' memory comes out of M first
// (buffer.Pool), so that below M/c connections the process holds at most
// its baseline plus M, and the garbage collector works to keep it there;
// beyond, the connections' memory raises the limit, so that a proxy with
// many clients does not collect garbage without end.
func SoftMemoryLimit(p *buffer.Policy, conns int64) int64 {
	switch {
	case !p.On || p.SoftMem < 0:
		return -1
	case p.SoftMem > 0:
		return p.SoftMem
	}
	return SoftLimitHeadroom + max(p.MaxMem, max(conns, 0)*max(p.ConnMem, 0))
}

// MemoryHost is what RunMemLimit reads of the proxy. Its methods are
// called from RunMemLimit's goroutine while the proxy serves.
type MemoryHost interface {
	// BufferPolicy returns the response buffering policy in force.
	BufferPolicy() *buffer.Policy
	// LiveConns returns the client connections open.
	LiveConns() int64
	// TrimBuffers lets go of the response buffers' idle chunks
	// (buffer.Buffers.Trim).
	TrimBuffers(now time.Time)
}

// RunMemLimit applies the soft memory limit (SoftMemoryLimit) every
// second, since the open connections change it, unless the environment
// sets GOMEMLIMIT, and lets go of the idle response-buffer chunks. When
// ctx ends it puts back the limit the process had.
func RunMemLimit(ctx context.Context, h MemoryHost) {
	env := os.Getenv("GOMEMLIMIT") != "" // "off" too: the user's choice
	orig := debug.SetMemoryLimit(-1)
	var set int64 = -1
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		if !env {
			if lim := SoftMemoryLimit(h.BufferPolicy(), h.LiveConns()); lim != set {
				if lim < 0 {
					debug.SetMemoryLimit(orig)
				} else {
					debug.SetMemoryLimit(lim)
				}
				set = lim
			}
		}
		h.TrimBuffers(time.Now())
		select {
		case <-ctx.Done():
			if set >= 0 && debug.SetMemoryLimit(-1) == set { // not changed by another since
				debug.SetMemoryLimit(orig)
			}
			return
		case <-t.C:
		}
	}
}

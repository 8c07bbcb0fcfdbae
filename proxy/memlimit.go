// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"context"
	"os"
	"runtime/debug"
	"time"

	"github.com/sluicehq/sluice/proxy/buffer"
)

// softLimitHeadroom is what the automatic soft memory limit adds to the
// memory the response buffers and the connections may hold: the
// runtime's own and the proxy's baseline (the quick start's anonymous
// memory after its warm-up is about 5.4 MB, RssAnon in /proc/PID/status;
// the binary's pages, 19 MB more of its resident set, are not Go's and
// not limited).
const softLimitHeadroom = 8 << 20

// softMemoryLimit returns the soft memory limit that p asks for with
// conns client connections open, in bytes, or -1 for none:
// soft_memory_limit_bytes if set, else softLimitHeadroom + max(M, n·c)
// with M max_memory_bytes, n the open connections and c
// connection_memory_bytes. The connections' memory comes out of M first
// (buffer.Pool), so that below M/c connections the process holds at most
// its baseline plus M, and the garbage collector works to keep it there;
// beyond, the connections' memory raises the limit, so that a proxy with
// many clients does not collect garbage without end.
func softMemoryLimit(p *buffer.Policy, conns int64) int64 {
	switch {
	case !p.On || p.SoftMem < 0:
		return -1
	case p.SoftMem > 0:
		return p.SoftMem
	}
	return softLimitHeadroom + max(p.MaxMem, max(conns, 0)*max(p.ConnMem, 0))
}

// runMemLimit applies the soft memory limit every second (the open
// connections change it) unless the environment sets GOMEMLIMIT, and
// lets go of the idle response-buffer chunks (buffer.Buffers.Trim). When ctx
// ends it puts back the limit the process had.
func (s *Server) runMemLimit(ctx context.Context) {
	env := os.Getenv("GOMEMLIMIT") != "" // "off" too: the user's choice
	orig := debug.SetMemoryLimit(-1)
	var set int64 = -1
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		g := s.h.gen.Load()
		if !env {
			var conns int64
			if s.conns != nil {
				conns = s.conns.Live()
			}
			if lim := softMemoryLimit(&g.buf, conns); lim != set {
				if lim < 0 {
					debug.SetMemoryLimit(orig)
				} else {
					debug.SetMemoryLimit(lim)
				}
				set = lim
			}
		}
		s.h.buf.Trim(time.Now())
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

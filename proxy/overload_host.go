// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"context"
	"log/slog"
	"net"
	"time"

	"github.com/sluicehq/sluice/monitor"
	"github.com/sluicehq/sluice/policer"
	"github.com/sluicehq/sluice/policy"
	"github.com/sluicehq/sluice/proxy/buffer"
	"github.com/sluicehq/sluice/proxy/overload"
)

// The overload runtime (sensors, resource rules, the connection policer
// and its kernel path, the soft memory limit) is package overload's; this
// file is the proxy's side of it: what the runtime reads of the running
// generation, and the handles the server's listeners and /state take.

// overloadRun is the server's overload runtime with the handles its
// listeners take: accept wraps the client listeners (nil for none),
// registry holds the live client connections (nil when nothing needs
// them).
type overloadRun struct {
	*overload.Runtime
	accept   *policer.Policer
	registry *policer.Registry
}

// buildOverload builds the overload runtime of cfg (validated, with
// defaults) at now; the runtime reads the running generation through h.
func buildOverload(cfg *Config, h *Handler, log *slog.Logger, now time.Time) (*overloadRun, error) {
	rt, err := overload.NewRuntime(&cfg.OverloadConfig, &cfg.Config, overloadHost{h}, log, now)
	if err != nil {
		return nil, err
	}
	o := &overloadRun{Runtime: rt}
	o.accept, o.registry = rt.Listener()
	return o, nil
}

// overloadHost is the running generation as the overload runtime reads
// it.
type overloadHost struct{ h *Handler }

func (o overloadHost) Policy() *policy.Policy {
	if g := o.h.gen.Load(); g != nil {
		return g.pol
	}
	return nil
}

func (o overloadHost) QueueLen() int {
	if g := o.h.gen.Load(); g != nil {
		return g.pool.QueueLen()
	}
	return 0
}

func (o overloadHost) PoolBusy() monitor.UtilizationSource {
	if g := o.h.gen.Load(); g != nil && g.pool.busy != nil {
		return g.pool.busy
	}
	return nil
}

// startKernel puts the policer's global rate into the kernel for the
// client listeners addrs (overload.Runtime.StartKernel). Called by
// Listen with s.mu held, before anything is served.
func (s *Server) startKernel(addrs []net.Addr) error {
	return s.ov.StartKernel(s.h.gen.Load().cfg.Policer, addrs)
}

// stopKernel deletes the policer's nftables table, if any.
func (s *Server) stopKernel() { s.ov.StopKernel() }

// runMemLimit applies the soft memory limit while the server serves
// (overload.RunMemLimit).
func (s *Server) runMemLimit(ctx context.Context) { overload.RunMemLimit(ctx, memoryHost{s}) }

// memoryHost is the server as overload.RunMemLimit reads it.
type memoryHost struct{ s *Server }

func (m memoryHost) BufferPolicy() *buffer.Policy { return &m.s.h.gen.Load().buf }

func (m memoryHost) LiveConns() int64 {
	if m.s.conns != nil {
		return m.s.conns.Live()
	}
	return 0
}

func (m memoryHost) TrimBuffers(now time.Time) { m.s.h.buf.Trim(now) }

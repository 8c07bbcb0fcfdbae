// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"fmt"
	"time"
)

// WebServerConfig configures the resource model of a web server.
type WebServerConfig struct {
	// Workers is the number of server processes; each holds a request
	// from accept until its reply is sent. ≥ 1.
	Workers int
	// ListenQueue is the listen queue capacity: accepted requests waiting
	// for a worker; a request arriving to a full queue is Rejected. 0 means
	// unbounded.
	ListenQueue int
	// Timeout is the longest a request waits in the listen queue before it
	// is aborted (TimedOut); 0 means no limit.
	Timeout time.Duration
	// CPUs is the CPU capacity in cores; each request uses at most one.
	// > 0.
	CPUs float64
	// LinkRate is the outgoing link capacity in bytes per second. > 0.
	LinkRate float64
}

// WebServer is the resource model of the Voigt & Gunningberg design
// (ALGORITHMS.md §1): a listen queue in front of a pool of worker
// processes; a worker takes a request, passes it through the resource
// rules (Rules, the hook for the per-resource token buckets), runs its CPU
// demand on a processor-sharing CPU, then sends its reply of Size bytes
// over a processor-sharing outgoing link, and only then takes the next
// request. The connection policer goes in front, as a Gate whose Next is
// the WebServer.
//
// Observables: Listen.Waiting() is the listen queue, CPU.Busy() the CPU
// busy time, Link.Backlog() the bytes waiting on the link (the outgoing
// queue, to be sampled many times per period with a Sampler).
type WebServer struct {
	// Listen is the listen queue and worker pool.
	Listen *FIFO
	// CPU is the processor-sharing CPU; work is Request.Demand seconds.
	CPU *PS
	// Link is the processor-sharing outgoing link; work is Request.Size
	// bytes.
	Link *PS
	// Rules is the admission stage between accept and CPU: set
	// Rules.Admitter to plug in the resource rules. Its
	// nil Admitter admits everything. Do not change Rules.Engine or
	// Rules.Next.
	Rules Gate

	entry Hold
	cpu   Visit
	link  Visit
}

// NewWebServer returns an idle web server on e.
func NewWebServer(e *Engine, cfg WebServerConfig) (*WebServer, error) {
	if err := checkEngine("NewWebServer", e); err != nil {
		return nil, err
	}
	listen, err := NewFIFO(e, FIFOConfig{Servers: cfg.Workers, QueueLimit: cfg.ListenQueue, Timeout: cfg.Timeout})
	if err != nil {
		return nil, fmt.Errorf("sim: WebServerConfig (Workers, ListenQueue, Timeout): %w", err)
	}
	cpu, err := NewCPU(e, cfg.CPUs)
	if err != nil {
		return nil, fmt.Errorf("sim: WebServerConfig.CPUs: %w", err)
	}
	link, err := NewLink(e, cfg.LinkRate)
	if err != nil {
		return nil, fmt.Errorf("sim: WebServerConfig.LinkRate: %w", err)
	}
	w := &WebServer{Listen: listen, CPU: cpu, Link: link}
	w.link = Visit{Engine: e, Station: link, Work: Size}
	w.cpu = Visit{Engine: e, Station: cpu, Work: Demand, Next: &w.link}
	w.Rules = Gate{Engine: e, Next: &w.cpu}
	w.entry = Hold{Engine: e, Queue: listen, Next: &w.Rules}
	return w, nil
}

// Handle accepts r into the listen queue.
func (w *WebServer) Handle(r *Request) { w.entry.Handle(r) }

var _ Handler = (*WebServer)(nil)

// SPDX-License-Identifier: Apache-2.0

package live

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// Env is what a running experiment gets besides its context: its name,
// the options, and the progress output. Its methods are safe for
// concurrent use.
type Env struct {
	// Name is the experiment's name.
	Name string
	// Quick selects the shortened form.
	Quick bool
	// Seed seeds the load and the backends.
	Seed uint64
	// Executable is the sluice binary for child processes.
	Executable string
	// AdminAddr is Options.AdminAddr.
	AdminAddr string
	// Service is Options.Service.
	Service string
	// Transport is Options.Transport.
	Transport string
	// AutoMedianProbe is Options.AutoMedianProbe.
	AutoMedianProbe bool
	// AutoKnee is Options.AutoKnee.
	AutoKnee string
	// AutoBurstWindow is Options.AutoBurstWindow.
	AutoBurstWindow time.Duration
	// AutoTailPool is Options.AutoTailPool.
	AutoTailPool int
	// BackendProcess is Options.BackendProcess.
	BackendProcess bool
	// ProxyProcess is Options.ProxyProcess.
	ProxyProcess bool
	// Rows is Options.Rows.
	Rows []string
	// PolicerKernel is Options.PolicerKernel.
	PolicerKernel string
	// CGIWork is Options.CGIWork.
	CGIWork string
	// Sets is Options.Sets.
	Sets []string

	start time.Time
	mu    sync.Mutex
	out   io.Writer
}

func newEnv(name string, opts Options) *Env {
	out := opts.Progress
	if out == nil {
		out = io.Discard
	}
	exe := opts.Executable
	if exe == "" {
		if p, err := os.Executable(); err == nil {
			exe = p
		}
	}
	return &Env{Name: name, Quick: opts.Quick, Seed: opts.Seed, Executable: exe, AdminAddr: opts.AdminAddr, Service: opts.Service, Transport: opts.Transport, AutoMedianProbe: opts.AutoMedianProbe, AutoKnee: opts.AutoKnee, AutoBurstWindow: opts.AutoBurstWindow, AutoTailPool: opts.AutoTailPool, BackendProcess: opts.BackendProcess, ProxyProcess: opts.ProxyProcess, Rows: opts.Rows, PolicerKernel: opts.PolicerKernel, CGIWork: opts.CGIWork, Sets: opts.Sets, start: time.Now(), out: out}
}

// Phasef prints a line announcing a phase, with the time since the start
// of the experiment.
func (e *Env) Phasef(format string, args ...any) {
	e.line("== "+format, args...)
}

// Logf prints a progress line.
func (e *Env) Logf(format string, args ...any) {
	e.line("   "+format, args...)
}

func (e *Env) line(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	fmt.Fprintf(e.out, "[%5.1fs] %s\n", time.Since(e.start).Seconds(), fmt.Sprintf(format, args...))
}

// pick returns quick when the experiment runs in its quick form, else full.
func pick[T any](e *Env, full, quick T) T {
	if e.Quick {
		return quick
	}
	return full
}

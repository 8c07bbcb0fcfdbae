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
	// Options are the run's, Executable resolved (the running
	// executable when it was empty).
	Options

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
	opts.Executable = exe
	return &Env{Name: name, Options: opts, start: time.Now(), out: out}
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

// SPDX-License-Identifier: Apache-2.0

// Package child runs the lab's helper processes (a proxy, a plain Go
// proxy, a test service) as children of the lab's binary: Start waits
// until the child's address accepts TCP connections, Stop signals it and
// kills it if it has not exited within 5 s.
package child

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"time"
)

// Process is a started child.
type Process struct {
	// Cmd is the child's command (Cmd.Process.Pid for /proc).
	Cmd  *exec.Cmd
	done chan error
}

// Start starts exe with args, its stdout discarded and its stderr this
// process's, and waits until addr (host:port) accepts a connection. It
// fails when the child exits first, when ctx ends, or after 10 s; the
// child is stopped with sig then.
func Start(ctx context.Context, addr string, sig os.Signal, exe string, args ...string) (*Process, error) {
	cmd := exec.Command(exe, args...)
	cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", strings.Join(cmd.Args, " "), err)
	}
	p := &Process{Cmd: cmd, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait() }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return p, nil
		}
		select {
		case err := <-p.done:
			return nil, fmt.Errorf("%s exited before listening: %v", strings.Join(cmd.Args, " "), err)
		case <-ctx.Done():
			_ = p.Stop(sig)
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = p.Stop(sig)
			return nil, fmt.Errorf("%s: not listening on %s within 10s", strings.Join(cmd.Args, " "), addr)
		}
	}
}

// Stop sends sig and waits for the child to exit; after 5 s it kills it.
// It reports only a failure to kill.
func (p *Process) Stop(sig os.Signal) error {
	_ = p.Cmd.Process.Signal(sig)
	select {
	case <-p.done:
		return nil
	case <-time.After(5 * time.Second):
		if err := p.Cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			return fmt.Errorf("%s did not exit on %v and could not be killed: %w", p.Cmd.Path, sig, err)
		}
		<-p.done
		return nil
	}
}

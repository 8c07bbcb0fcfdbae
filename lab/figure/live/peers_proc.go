// SPDX-License-Identifier: Apache-2.0

package live

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/internal/localredis"
)

// peerProcPrepare and peerProcSignal are the platform's process handling:
// on Linux (peers_linux.go) the child gets its own process group, which
// is signalled as a whole (nginx's workers too), and is sent SIGTERM if
// sluice dies first. Elsewhere only the child itself is signalled.
var (
	peerProcPrepare = func(*exec.Cmd) {}
	peerProcSignal  = func(p *os.Process, sig syscall.Signal) error { return p.Signal(sig) }
)

// peerProc is nginx or HAProxy running as a child process in the
// foreground.
type peerProc struct {
	name string
	// URL is the base URL it serves.
	URL    string
	cmd    *exec.Cmd
	output *tailBuffer
	done   chan struct{}
	err    error // cmd.Wait's, once done is closed
	once   sync.Once
}

// startPeerProc picks a free loopback port, calls conf(port), which
// writes the program's configuration for listening on 127.0.0.1:port and
// returns its command line, starts the program and waits until it
// answers. A port taken in the meantime is retried with another, at most
// three times.
func startPeerProc(ctx context.Context, name string, conf func(port int) ([]string, error)) (*peerProc, error) {
	var lastErr error
	for range 3 {
		port, err := freeLoopbackPort()
		if err != nil {
			return nil, err
		}
		argv, err := conf(port)
		if err != nil {
			return nil, err
		}
		p, err := launchPeerProc(ctx, name, argv, fmt.Sprintf("http://127.0.0.1:%d", port))
		if err == nil {
			return p, nil
		}
		lastErr = err
		if !strings.Contains(err.Error(), "in use") {
			break
		}
	}
	return nil, lastErr
}

// freeLoopbackPort returns a port free on 127.0.0.1 a moment ago.
func freeLoopbackPort() (int, error) {
	port, err := localredis.FreePort()
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	return port, nil
}

func launchPeerProc(ctx context.Context, name string, argv []string, url string) (*peerProc, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	out := newTailBuffer(16 << 10)
	cmd.Stdout, cmd.Stderr = out, out
	peerProcPrepare(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", strings.Join(argv, " "), err)
	}
	p := &peerProc{name: name, URL: url, cmd: cmd, output: out, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{Proxy: nil}}
	defer client.CloseIdleConnections()
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-p.done:
			return nil, fmt.Errorf("%s exited before serving (%v); command: %s; its output:\n%s", name, p.err,
				strings.Join(argv, " "), strings.TrimSpace(out.String()))
		default:
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/", nil)
		if err != nil {
			return nil, errors.Join(err, p.Close())
		}
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			return p, nil
		}
		if ctx.Err() != nil {
			return nil, errors.Join(ctx.Err(), p.Close())
		}
		if time.Now().After(deadline) {
			return nil, errors.Join(fmt.Errorf("%s did not answer at %s within 10s; its output:\n%s", name, url, out.String()), p.Close())
		}
		select {
		case <-ctx.Done():
		case <-p.done:
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Close stops the program: SIGTERM to it (and, on Linux, its workers),
// SIGKILL after 5 s. It returns an error only when it had to kill.
// Close is idempotent.
func (p *peerProc) Close() error {
	var err error
	p.once.Do(func() {
		select {
		case <-p.done:
			return
		default:
		}
		_ = peerProcSignal(p.cmd.Process, syscall.SIGTERM)
		select {
		case <-p.done:
			return
		case <-time.After(5 * time.Second):
		}
		_ = peerProcSignal(p.cmd.Process, syscall.SIGKILL)
		<-p.done
		err = fmt.Errorf("%s did not stop within 5s of SIGTERM; killed", p.name)
	})
	return err
}

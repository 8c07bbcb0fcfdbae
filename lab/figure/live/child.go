// SPDX-License-Identifier: Apache-2.0

package live

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/internal/localredis"
	"github.com/sluicehq/sluice/lab/child"
	"github.com/sluicehq/sluice/lab/testbed"
	"github.com/sluicehq/sluice/proxy"
	"github.com/sluicehq/sluice/stage"
)

// childBackend is a testbed running as a child process of the sluice
// binary (`sluice-lab testbed KIND --listen 127.0.0.1:0 ...`), optionally
// pinned to CPUs.
type childBackend struct {
	URL  string
	cmd  *exec.Cmd
	done chan error
}

var listeningRE = regexp.MustCompile(`listening on (http://127\.0\.0\.1:[0-9]+)`)

// errNotSluice means the running executable cannot serve as the child
// (a test binary): callers fall back to an in-process backend.
var errNotSluice = errors.New("the running executable is not the sluice binary")

// childCapable reports whether exe can be started as `exe testbed ...`:
// it must be set and not be a Go test binary.
func childCapable(exe string) bool {
	return exe != "" && !strings.HasSuffix(filepath.Base(exe), ".test")
}

// startChildBackend starts `exe testbed args...` on a free loopback port,
// pinned to cpus when cpus is non-empty, and waits until it answers.
func startChildBackend(ctx context.Context, exe string, cpus []int, args ...string) (*childBackend, error) {
	c, err := startChildProcess(ctx, exe, cpus, args...)
	if err != nil {
		return nil, err
	}
	if err := testbed.WaitReady(ctx, c.URL+"/healthz", 10*time.Second); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// childProcPrepare, when set (Linux), prepares a testbed child's command
// before it starts.
var childProcPrepare func(*exec.Cmd)

// startChildProcess is startChildBackend without the wait for /healthz:
// it returns once the child has printed its listening line (for a child
// that serves no HTTP, whose readiness its caller checks its own way).
func startChildProcess(ctx context.Context, exe string, cpus []int, args ...string) (*childBackend, error) {
	if !childCapable(exe) {
		return nil, errNotSluice
	}
	full := append([]string{"testbed"}, args...)
	full = append(full, "--listen", anyPort)
	cmd := exec.Command(exe, full...)
	if childProcPrepare != nil {
		childProcPrepare(cmd)
	}
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if len(cpus) > 0 {
		err = startPinned(cmd, cpus)
	} else {
		err = cmd.Start()
	}
	if err != nil {
		return nil, fmt.Errorf("starting %s: %w", strings.Join(cmd.Args, " "), err)
	}
	c := &childBackend{cmd: cmd, done: make(chan error, 1)}
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		sent := false
		for sc.Scan() {
			if m := listeningRE.FindStringSubmatch(sc.Text()); m != nil && !sent {
				urls <- m[1]
				sent = true
			}
		}
		_, _ = io.Copy(io.Discard, out)
		c.done <- cmd.Wait()
	}()
	select {
	case c.URL = <-urls:
	case err := <-c.done:
		return nil, fmt.Errorf("%s exited before listening: %v", strings.Join(cmd.Args, " "), err)
	case <-time.After(10 * time.Second):
		c.Close()
		return nil, fmt.Errorf("%s: no listening line within 10s", strings.Join(cmd.Args, " "))
	case <-ctx.Done():
		c.Close()
		return nil, ctx.Err()
	}
	return c, nil
}

// Close interrupts the child (it shuts down gracefully on SIGINT, waiting
// for the requests in progress) and kills it if it has not exited within
// 5 s. A child still working through a backlog then (the run with the bad
// integral time leaves seconds of CGI work queued on one CPU, more on a
// machine shared with other work) is killed without an error: the run's
// measurements are complete, and the work it would finish has no client.
// Close reports only a failure to kill it.
func (c *childBackend) Close() error {
	_ = c.cmd.Process.Signal(os.Interrupt)
	select {
	case <-c.done:
		return nil
	case <-time.After(5 * time.Second):
		if err := c.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			return fmt.Errorf("testbed child did not exit on interrupt and could not be killed: %w", err)
		}
		<-c.done
		fmt.Fprintf(os.Stderr, "testbed child %d still busy 5s after the interrupt: killed\n", c.cmd.Process.Pid)
		return nil
	}
}

// childProxy is `sluice-lab proxy --config FILE` (the product's proxy
// command) running as a child process.
type childProxy struct {
	URL string
	// Admin is the admin listener's base URL (stage reads its /state).
	Admin string
	p     *child.Process
	hc    *http.Client
}

// writeProxyFile picks a listener and an admin listener on free loopback
// ports (host:port, returned) and writes dir/proxy-NAME.yaml with the
// configuration conf gives for them.
func writeProxyFile(dir, name string, conf func(listen, admin string) ([]byte, error)) (file, listen, admin string, err error) {
	ports, err := localredis.FreePorts(2)
	if err != nil {
		return "", "", "", err
	}
	listen, admin = "127.0.0.1:"+strconv.Itoa(ports[0]), "127.0.0.1:"+strconv.Itoa(ports[1])
	b, err := conf(listen, admin)
	if err != nil {
		return "", "", "", err
	}
	file = filepath.Join(dir, "proxy-"+name+".yaml")
	if err := os.WriteFile(file, b, 0o644); err != nil {
		return "", "", "", err
	}
	return file, listen, admin, nil
}

// startChildProxy starts exe's proxy command on a configuration file
// whose listener is listen and admin listener admin (host:port), and
// waits until the listener accepts.
func startChildProxy(ctx context.Context, exe, file, listen, admin string) (*childProxy, error) {
	if !childCapable(exe) {
		return nil, errNotSluice
	}
	p, err := child.Start(ctx, listen, syscall.SIGTERM, exe, "proxy", "--config", file, "--log-level", "warn")
	if err != nil {
		return nil, err
	}
	return &childProxy{URL: "http://" + listen, Admin: "http://" + admin, p: p, hc: &http.Client{Timeout: 2 * time.Second}}, nil
}

// stage reads the named stage from the child's /state; false when the
// admin listener is unknown, does not answer or has no such stage.
func (p *childProxy) stage(name string, decisions int) (stage.State, bool) {
	if p.Admin == "" {
		return stage.State{}, false
	}
	resp, err := p.hc.Get(p.Admin + "/state?decisions=" + strconv.Itoa(decisions))
	if err != nil {
		return stage.State{}, false
	}
	defer resp.Body.Close()
	var doc proxy.StateDoc
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&doc) != nil {
		return stage.State{}, false
	}
	for _, st := range doc.Stages {
		if st.Name == name {
			return st, true
		}
	}
	return stage.State{}, false
}

// Close stops the proxy (SIGTERM; it drains for its drain timeout) and
// kills it if it has not exited within 5 s.
func (p *childProxy) Close() error { return p.p.Stop(syscall.SIGTERM) }

// SPDX-License-Identifier: Apache-2.0

// Package figures measures cluster mode live: a real redis-server
// (cluster/localredis), a testbed backend, three sluice proxies as
// separate processes on loopback, and load spread over them by a
// round-robin (or weighted) client, as a load balancer would spread it.
// Each figure returns its numbers; the Go tests of this package run the
// short forms under make test, and `sluice-lab experiment cluster` the
// longer ones with a report. Runs are bounded in time and touch only
// 127.0.0.1.
package figures

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/internal/localredis"
	"github.com/sluicehq/sluice/lab/testbed"
	"github.com/sluicehq/sluice/policy"
	"github.com/sluicehq/sluice/proxy"
	"github.com/sluicehq/sluice/share"
)

// ChildEnv names the configuration file a child process serves (see
// ServeChild).
const ChildEnv = "SLUICE_FIGURES_PROXY"

// Launcher returns the command that runs `sluice proxy` with the given
// configuration file.
type Launcher func(configFile string) *exec.Cmd

// SluiceLauncher runs exe (the sluice binary) as `exe proxy --config FILE`.
func SluiceLauncher(exe string) Launcher {
	return func(file string) *exec.Cmd {
		return exec.Command(exe, "proxy", "--config", file, "--log-level", "warn")
	}
}

// TestLauncher runs the current test binary as a proxy: the child's
// TestMain must call ServeChild first.
func TestLauncher() Launcher {
	return func(file string) *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), ChildEnv+"="+file)
		return cmd
	}
}

// ServeChild serves the proxy configuration named by ChildEnv until
// SIGTERM or SIGINT and exits, when that variable is set; otherwise it
// returns at once. A test binary used with TestLauncher calls it first
// thing in TestMain.
func ServeChild() {
	file := os.Getenv(ChildEnv)
	if file == "" {
		return
	}
	cfg, err := proxy.LoadFile(file)
	if err == nil {
		var srv *proxy.Server
		logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		if srv, err = proxy.New(cfg, proxy.Options{ConfigFile: file, Logger: logger}); err == nil {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			err = srv.Serve(ctx)
			stop()
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "figures child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// Instance is one proxy process.
type Instance struct {
	ID    string
	Addr  string // client listener, host:port
	Admin string // http://admin
	cmd   *exec.Cmd
	done  chan struct{}
}

// lab is a redis-server, a backend and the proxies in front of it.
type lab struct {
	redis     *localredis.Server
	backend   *http.Server
	be        io.Closer
	instances []*Instance
	dir       string
	prefix    string
	period    time.Duration
}

// errExitedAtStart is startInstance's error when the child process ended
// before answering /state (its stderr, passed through, says why).
var errExitedAtStart = errors.New("exited at start")

// labSpec describes a lab.
type labSpec struct {
	launch  Launcher
	n       int
	period  time.Duration
	initial int
	backend testbed.QueueConfig
	maxConc int
	policy  policy.Config // classes and stages
	shares  *share.Config // nil: none
	prefix  string
}

// startLab starts everything and waits until every proxy is synced with
// all the others.
func startLab(ctx context.Context, s labSpec) (_ *lab, err error) {
	// l is a local, not the named result: "return nil, err" must not
	// clear it before the deferred cleanup runs.
	l := &lab{prefix: s.prefix, period: s.period}
	defer func() {
		if err != nil {
			l.Close()
		}
	}()
	if l.dir, err = os.MkdirTemp("", "sluice-figures-"); err != nil {
		return nil, err
	}
	if l.redis, err = localredis.Start(); err != nil {
		return nil, err
	}
	q, err := testbed.NewQueue(s.backend)
	if err != nil {
		return nil, err
	}
	l.be = q
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	l.backend = &http.Server{Handler: q, ReadHeaderTimeout: 10 * time.Second}
	go l.backend.Serve(ln) //nolint:errcheck // Close ends it
	for i := range s.n {
		// A port picked free can be taken before the child binds it; the
		// child then exits at start, and a second try picks new ports.
		var inst *Instance
		for try := 0; ; try++ {
			inst, err = l.startInstance(s, i, "http://"+ln.Addr().String())
			if err == nil || !errors.Is(err, errExitedAtStart) || try == 2 {
				break
			}
		}
		if err != nil {
			return nil, err
		}
		l.instances = append(l.instances, inst)
	}
	err = waitFor(ctx, 20*time.Second, "every proxy synced with all of them", func() bool {
		for _, in := range l.instances {
			st, err := in.State()
			if err != nil || st.Cluster == nil || st.Cluster.Mode != "synced" || st.Cluster.Instances != s.n || st.Cluster.Unseen != 0 {
				return false
			}
		}
		return true
	})
	return l, err
}

func (l *lab) startInstance(s labSpec, i int, backendURL string) (*Instance, error) {
	ports, err := localredis.FreePorts(2)
	if err != nil {
		return nil, err
	}
	lp, ap := ports[0], ports[1]
	id := string(rune('a' + i))
	in := &Instance{ID: id, Addr: "127.0.0.1:" + strconv.Itoa(lp), Admin: "http://127.0.0.1:" + strconv.Itoa(ap), done: make(chan struct{})}
	pc := &proxy.Config{
		Listeners:      []proxy.ListenerConfig{{Addr: in.Addr}},
		Admin:          proxy.AdminConfig{Addr: "127.0.0.1:" + strconv.Itoa(ap)},
		Backends:       proxy.BackendsConfig{Servers: []proxy.ServerConfig{{URL: backendURL, MaxConcurrency: s.maxConc}}},
		DrainTimeout:   2 * time.Second,
		Config:         s.policy,
		OverloadConfig: proxy.OverloadConfig{Shares: s.shares},
		Cluster: &cluster.Config{Addrs: []string{l.redis.Addr}, Instance: id, Prefix: s.prefix,
			Period: s.period, InitialInstances: s.initial},
	}
	cfg, err := yaml.Marshal(pc)
	if err != nil {
		return nil, err
	}
	file := filepath.Join(l.dir, "proxy-"+id+".yaml")
	if err := os.WriteFile(file, cfg, 0o644); err != nil {
		return nil, err
	}
	if _, err := proxy.Parse(file, cfg); err != nil {
		return nil, err
	}
	in.cmd = s.launch(file)
	in.cmd.Stderr = os.Stderr
	if err := in.cmd.Start(); err != nil {
		return nil, fmt.Errorf("instance %s: %w", id, err)
	}
	go func() { _ = in.cmd.Wait(); close(in.done) }()
	err = waitFor(context.Background(), 15*time.Second, "instance "+id+" to answer /state", func() bool {
		select {
		case <-in.done:
			return true
		default:
		}
		_, err := in.State()
		return err == nil
	})
	select {
	case <-in.done:
		return nil, fmt.Errorf("instance %s: %w", id, errExitedAtStart)
	default:
	}
	return in, err
}

// State fetches the instance's /state.
func (in *Instance) State() (proxy.StateDoc, error) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(in.Admin + "/state?decisions=0")
	if err != nil {
		return proxy.StateDoc{}, err
	}
	defer resp.Body.Close()
	var st proxy.StateDoc
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("/state: %s", resp.Status)
	}
	err = json.NewDecoder(resp.Body).Decode(&st)
	return st, err
}

// Kill ends the instance at once (SIGKILL): a crash, no goodbye.
func (in *Instance) Kill() error {
	if err := in.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	<-in.done
	return nil
}

// stop ends the instance gracefully (SIGTERM), killing it after 10 s.
func (in *Instance) stop() {
	select {
	case <-in.done:
		return
	default:
	}
	_ = in.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-in.done:
	case <-time.After(10 * time.Second):
		_ = in.Kill()
	}
}

// Close stops the proxies, the backend and Redis, and removes the files.
func (l *lab) Close() {
	var wg sync.WaitGroup
	for _, in := range l.instances {
		wg.Go(in.stop)
	}
	wg.Wait()
	if l.backend != nil {
		_ = l.backend.Close()
	}
	if l.be != nil {
		_ = l.be.Close()
	}
	if l.redis != nil {
		_ = l.redis.Stop()
	}
	if l.dir != "" {
		_ = os.RemoveAll(l.dir)
	}
}

// waitFor polls cond every 20 ms until it holds, ctx ends or limit
// passes.
func waitFor(ctx context.Context, limit time.Duration, what string, cond func() bool) error {
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %v waiting for %s", limit, what)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

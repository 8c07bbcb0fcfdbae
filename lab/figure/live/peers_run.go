// SPDX-License-Identifier: Apache-2.0

package live

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sluicehq/sluice/lab/dist"
	"github.com/sluicehq/sluice/lab/loadgen"
	"github.com/sluicehq/sluice/lab/testbed"
)

// peersSystem is one system's run.
type peersSystem struct {
	name, label string
	res         *phaseResult
	rig         rigUsage // while its load ran
}

// peersSetup is the plan every system's run shares.
type peersSetup struct {
	tl                 peersTimeline
	tools              map[string]string
	nginxArgs          string // nginx -V, whose configure arguments give its temp paths
	nginxVersion       string // first lines of nginx -V and haproxy -v
	haproxyVersion     string
	dir                string
	capacity, capAfter float64 // measured, req/s
	nginxRate, burst   int
	rate               dist.Schedule
}

// peersCapacity measures the backend's throughput with 8 users per
// worker sending without think time, directly, over length (the first
// quarter left out); slow measures it with the capacity halved.
func peersCapacity(ctx context.Context, env *Env, length time.Duration, slow bool) (float64, error) {
	be, err := newCapacityStep(env.Seed)
	if err != nil {
		return 0, err
	}
	if slow {
		be.halveAt(time.Now())
	}
	srv, err := serveHTTP(be)
	if err != nil {
		return 0, errors.Join(err, be.Close())
	}
	users, err := dist.ConstantSchedule(8 * peersWorkers)
	if err != nil {
		return 0, errors.Join(err, srv.Close(), be.Close())
	}
	load, err := closedLoad("capacity", env.Seed, users, 0, 0, peersTimeout, length, nil)
	if err != nil {
		return 0, errors.Join(err, srv.Close(), be.Close())
	}
	name := "capacity"
	if slow {
		name = "capacity/2"
	}
	ph := phase{name: name, length: length, loads: []loadgen.Config{load}, target: srv.URL}
	res, err := ph.run(ctx, env)
	if err := errors.Join(err, srv.Close(), be.Close()); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	warm := length / 4
	return float64(countSent(res.recs, warm, length, nil).ok) / (length - warm).Seconds(), nil
}

// run serves a fresh backend, starts the system in front of it, runs the
// load and stops everything, also on error and on Ctrl-C.
func (ps *peersSetup) run(ctx context.Context, env *Env, sys *peersSystem) (err error) {
	var closers []func() error
	defer func() {
		for i := len(closers) - 1; i >= 0; i-- {
			err = errors.Join(err, closers[i]())
		}
		if err != nil {
			err = fmt.Errorf("%s: %w", sys.name, err)
		}
	}()
	be, err := newCapacityStep(env.Seed)
	if err != nil {
		return err
	}
	closers = append(closers, be.Close)
	srv, err := serveHTTP(be)
	if err != nil {
		return err
	}
	closers = append(closers, srv.Close)
	backend := strings.TrimPrefix(srv.URL, "http://")
	ph := phase{name: sys.name, length: ps.tl.length}
	switch sys.name {
	case "uncontrolled", "seda", "yaksha":
		policy := nonePolicy()
		switch sys.name {
		case "seda":
			policy = peersSEDAPolicy(ps.capacity)
		case "yaksha":
			policy = peersYakshaPolicy()
		}
		px, err := startProxy(ctx, proxyConfig(srv.URL, peersProxyConns, policy, ""))
		if err != nil {
			return err
		}
		closers = append(closers, px.Close)
		ph.target, ph.proxy, ph.stageName = px.URL, px, mainStage
		if err := testbed.WaitReady(ctx, px.URL+"/", 10*time.Second); err != nil {
			return err
		}
	case "nginx":
		sub := filepath.Join(ps.dir, "nginx")
		if err := os.MkdirAll(sub, 0o755); err != nil {
			return err
		}
		p, err := startPeerProc(ctx, "nginx", func(port int) ([]string, error) {
			conf := nginxConf{Dir: sub, Listen: fmt.Sprintf("127.0.0.1:%d", port), Backends: []string{backend}, Rate: ps.nginxRate,
				Burst: ps.burst, TempPaths: nginxTempDirectives(ps.nginxArgs)}
			if err := conf.Validate(); err != nil {
				return nil, err
			}
			path := filepath.Join(sub, "nginx.conf")
			if err := os.WriteFile(path, []byte(conf.Text()), 0o644); err != nil {
				return nil, err
			}
			return []string{ps.tools["nginx"], "-p", sub + "/", "-c", path, "-g", "daemon off;"}, nil
		})
		if err != nil {
			return err
		}
		closers = append(closers, p.Close)
		ph.target = p.URL
		env.Logf("nginx (pid %d) at %s: limit_req rate=%dr/s burst=%d → %s", p.cmd.Process.Pid, p.URL, ps.nginxRate, ps.burst, srv.URL)
	case "haproxy":
		p, err := startPeerProc(ctx, "haproxy", func(port int) ([]string, error) {
			conf := haproxyConf{Listen: fmt.Sprintf("127.0.0.1:%d", port), Backends: []string{backend}, MaxConn: peersWorkers,
				QueueTimeout: peersPeerWait, IdleTimeout: 30 * time.Second}
			if err := conf.Validate(); err != nil {
				return nil, err
			}
			path := filepath.Join(ps.dir, "haproxy.cfg")
			if err := os.WriteFile(path, []byte(conf.Text()), 0o644); err != nil {
				return nil, err
			}
			return []string{ps.tools["haproxy"], "-f", path, "-db"}, nil
		})
		if err != nil {
			return err
		}
		closers = append(closers, p.Close)
		ph.target = p.URL
		env.Logf("haproxy (pid %d) at %s: server maxconn %d, timeout queue %v → %s", p.cmd.Process.Pid, p.URL, peersWorkers, peersPeerWait, srv.URL)
	default:
		return fmt.Errorf("unknown system %q", sys.name)
	}
	load, err := openLoad("peers", env.Seed, ps.rate, peersTimeout, ps.tl.length)
	if err != nil {
		return err
	}
	load.MaxConns = peersClientConns
	ph.loads = []loadgen.Config{load}
	ph.sampleEvery = 250 * time.Millisecond
	be.halveAt(time.Now().Add(ps.tl.half))
	before := rigNow()
	sys.res, err = ph.run(ctx, env)
	sys.rig = rigBetween(before, rigNow())
	env.Logf("%s: this process used %.2f cores; the host's listeners dropped %.0f connections at a full accept queue", sys.name, sys.rig.cores, sys.rig.overflows)
	return err
}

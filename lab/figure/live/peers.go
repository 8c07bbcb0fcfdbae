// SPDX-License-Identifier: Apache-2.0

package live

import (
	"context"
	"fmt"
	"math"
	"os"
	"strings"
	"time"

	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/lab/figure"
	"github.com/sluicehq/sluice/policy"
)

// peers puts sluice next to the tools operators use today, on this
// machine: the same open-loop overload (a flash crowd at ten times the
// backend's capacity (peersCrowd), and in the middle of it the backend's capacity
// halved) against no admission control, nginx's limit_req set at the
// measured capacity, HAProxy's per-server maxconn with a queue timeout,
// and sluice's adaptive SEDA and Yaksha stages. nginx and HAProxy run as
// child processes in the foreground with configurations generated in a
// temporary directory, on free loopback ports, and are stopped at the end
// (and on Ctrl-C). When they are missing, the experiment installs the
// Debian packages if it runs as root and otherwise says how to.
//
// The point is the capacity change. A static rate (limit_req) tuned for
// the first capacity admits twice what the backend can do once it slows
// down, and its backlog grows until every answer misses the client's
// timeout; a concurrency limit (maxconn) follows the capacity but keeps a
// standing queue as long as its queue timeout; the adaptive controllers
// measure response times and follow the change without being told the
// capacity.

// The backend and the targets of the peers experiment. The backend is
// the queue testbed with peersWorkers FIFO servers of exponential service
// of mean peersService (peersWorkers/peersService = 400 req/s), which
// doubles at the capacity change.
const (
	peersWorkers = 4
	peersService = 10 * time.Millisecond
	// peersTarget is the response-time target: SEDA's p90 target (as in
	// the demo), three times Yaksha's Tref, and the latency a request must
	// meet to count as goodput.
	peersTarget = 250 * time.Millisecond
	// peersPeerWait is the longest time nginx (burst/rate) and HAProxy
	// (timeout queue) make a request wait before the backend: half the
	// target, so that a delayed request still answers within it.
	peersPeerWait = peersTarget / 2
	// peersTimeout is the client timeout.
	peersTimeout = 2 * time.Second
	// peersProxyConns bounds the sluice proxy's upstream connections (it
	// never binds: the controllers are the only control).
	peersProxyConns = 2048
	// peersClientConns bounds the load generator's connections. At 10×
	// capacity a system that holds requests for up to peersPeerWait has
	// about 10·capacity·peersPeerWait ≈ 500 in flight; with loadgen's
	// default of 256 the load generator itself would become the queue.
	peersClientConns = 2048
	// peersCrowd is the crowd's offered load in multiples of the measured
	// capacity (the field notes compare the peers at 10× capacity).
	peersCrowd = 10.0
	// peersInstallTimeout bounds each apt-get command.
	peersInstallTimeout = 5 * time.Minute
)

// peersSystems are the systems compared, in order; the names are the
// suffixes of the summary's metrics.
var peersSystems = []peerRow{
	{"uncontrolled", "no control (sluice proxy, controller none)"},
	{"nginx", "nginx limit_req at the measured capacity"},
	{"haproxy", "HAProxy maxconn + timeout queue"},
	{"seda", "sluice seda (p90 target)"},
	{"yaksha", "sluice yaksha (mean target)"},
}

// peerRow is one system of the peers experiment: its name (the suffix of
// its metrics) and its label.
type peerRow struct{ name, label string }

// peersTimeline is the shape of one run: the base load until from, the
// crowd from from to length, the capacity halved at half; each window is
// measured from settle after its start.
type peersTimeline struct {
	from, half, length, settle, capLength time.Duration
}

func peersTimelineFor(env *Env) peersTimeline {
	return pick(env,
		peersTimeline{from: 4 * time.Second, half: 16 * time.Second, length: 30 * time.Second, settle: 2 * time.Second, capLength: 2 * time.Second},
		peersTimeline{from: time.Second, half: 5 * time.Second, length: 9 * time.Second, settle: time.Second, capLength: 1500 * time.Millisecond})
}

// peersSEDAPolicy is the seda stage: the p90 target, a run every 250 ms
// or 100 samples, an additive increase of 2% of the capacity (the tuning
// notes' advice) and the measured capacity as its initial rate: what
// nginx's limit_req is told, and what the demo does. Without it the stage
// admits everything in the crowd's first run, a backlog of seconds at 10×
// that no later cut can undo (a full run measured 35 req/s within the
// target before the halving, against nginx's 387).
func peersSEDAPolicy(capacity float64) policy.Config {
	c := control.DefaultSEDAConfig()
	c.Target, c.Timeout = peersTarget, 250*time.Millisecond
	c.InitialRate, c.AdjI = math.Round(capacity), math.Max(1, math.Round(0.02*capacity))
	return mainPolicy(&c)
}

// peersYakshaPolicy is the self-tuning yaksha stage with Tref a third of
// the target (the demo's parameters).
func peersYakshaPolicy() policy.Config {
	return mainPolicy(selfTuningYaksha(peersTarget / 3))
}

// runPeers is the experiment in four steps: plan (install or find nginx
// and HAProxy, measure the backend's capacity, derive the load), run
// (each system in turn on a fresh backend), analyse (the summary's
// metrics per system and window) and render (tables, plots, checks and
// the setup).
func runPeers(ctx context.Context, env *Env) (*figure.Result, error) {
	rows, err := peersRows(env.Rows)
	if err != nil {
		return nil, err
	}
	setup, err := planPeers(ctx, env)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(setup.dir)
	var systems []*peersSystem
	for _, ps := range rows {
		sys := &peersSystem{name: ps.name, label: ps.label}
		if err := setup.run(ctx, env, sys); err != nil {
			return nil, err
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		systems = append(systems, sys)
	}
	res := figure.NewResult(env.Name, figure.Live, env.Seed)
	an := analysePeers(res.Summary, setup, systems, pick(env, time.Second, 500*time.Millisecond))
	if err := renderPeers(res, setup, an); err != nil {
		return nil, err
	}
	return res, nil
}

// peersRows returns the rows of peersSystems named in names, in the
// experiment's order; all of them when names is empty.
func peersRows(names []string) ([]peerRow, error) {
	return selectRows("peers", peersSystems, func(r peerRow) string { return r.name }, names)
}

// selectRows returns the rows of all named in names (--rows), in all's
// order; all of them when names is empty, and an error naming the
// experiment, the unknown name and the rows it has otherwise.
func selectRows[R any](exp string, all []R, name func(R) string, names []string) ([]R, error) {
	if len(names) == 0 {
		return all, nil
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	var rows []R
	for _, r := range all {
		if want[name(r)] {
			rows = append(rows, r)
			delete(want, name(r))
		}
	}
	for _, n := range names {
		if want[n] {
			known := make([]string, len(all))
			for i, r := range all {
				known[i] = name(r)
			}
			return nil, fmt.Errorf("%s: no row %q (rows: %s)", exp, n, strings.Join(known, ", "))
		}
	}
	return rows, nil
}

// planPeers prepares the runs: the peers' binaries and versions, a
// temporary directory for their configurations (the caller removes it),
// the timeline, the backend's capacity before and after the halving
// (measured directly, without any proxy) and the load derived from it.
func planPeers(ctx context.Context, env *Env) (*peersSetup, error) {
	tools, err := ensurePeerTools(ctx, env)
	if err != nil {
		return nil, err
	}
	ps := &peersSetup{tools: tools, tl: peersTimelineFor(env),
		nginxArgs: peerVersion(ctx, tools["nginx"], "-V"), haproxyVersion: firstLine(peerVersion(ctx, tools["haproxy"], "-v"))}
	ps.nginxVersion = firstLine(ps.nginxArgs)
	tl := ps.tl
	env.Phasef("measuring the backend's capacity (%v each, %d closed-loop users without think time, directly)", tl.capLength, 8*peersWorkers)
	if ps.capacity, err = peersCapacity(ctx, env, tl.capLength, false); err != nil {
		return nil, err
	}
	if ps.capAfter, err = peersCapacity(ctx, env, tl.capLength, true); err != nil {
		return nil, err
	}
	env.Phasef("capacity %.0f req/s, %.0f req/s once halved (nominal %.0f and %.0f)", ps.capacity, ps.capAfter,
		peersWorkers/peersService.Seconds(), peersWorkers/(2*peersService).Seconds())
	if ps.capacity < 20 {
		return nil, fmt.Errorf("the backend answered only %.1f req/s while measuring its capacity", ps.capacity)
	}
	if ps.rate, err = stepSchedule(0, 0.6*ps.capacity, tl.from.Seconds(), peersCrowd*ps.capacity); err != nil {
		return nil, err
	}
	ps.nginxRate, ps.burst = int(math.Round(ps.capacity)), int(math.Round(ps.capacity*peersPeerWait.Seconds()))
	if ps.dir, err = os.MkdirTemp("", "sluice-peers-"); err != nil {
		return nil, err
	}
	// nginx's workers run as an unprivileged user when sluice is root.
	if err := os.Chmod(ps.dir, 0o755); err != nil {
		os.RemoveAll(ps.dir)
		return nil, err
	}
	return ps, nil
}

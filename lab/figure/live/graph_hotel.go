// SPDX-License-Identifier: Apache-2.0

package live

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	"gopkg.in/yaml.v3"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/lab/dist"
	"github.com/sluicehq/sluice/lab/figure"
	"github.com/sluicehq/sluice/lab/report"
	"github.com/sluicehq/sluice/lab/testbed"
	"github.com/sluicehq/sluice/lab/tick"
)

// graph-hotel on real sockets (the spec: figure/hotel.go): every service
// of the hotel graph is its own process, `sluice-lab testbed hotel`,
// with grpc-go's own server on loopback, its handlers burning CPU time
// on a worker pool; the row's control is in every process (grpcsluice's
// interceptors with the policy, or the peer's peers.LiveServer and
// peers.LiveClient with its configuration, the same the simulator
// builds). The end users are open loops in this process, one per API
// stream, evenly spaced from the intended send times, each call with its
// user's deadline (grpc-timeout) and its request index, class and user
// in metadata, through the row's client side for end users. The events
// are the load's schedule and hotel.Control's Scale on the services.
// Every row starts fresh processes; the users' records and the
// services' go through figure.HotelResult, as the simulator's do.

// hotelPlan is a live run's parameters.
type hotelPlan struct {
	c     figure.HotelParams
	g     *figure.HotelGraph
	grace time.Duration
}

func planHotel(env *Env) (hotelPlan, error) {
	var c figure.HotelParams
	ps := figure.NewParams("graph-hotel")
	figure.DeclareHotel(ps, &c)
	if env.Quick {
		c.Scenarios = []string{figure.HotelStep3, figure.HotelCrowd}
		c.Rows = []string{figure.HotelNone, figure.HotelSluice}
		c.Warm, c.StepLen, c.CrowdLen, c.DropLen, c.CostLen, c.After = 6*time.Second, 8*time.Second, 8*time.Second,
			6*time.Second, 8*time.Second, 8*time.Second
	}
	if len(env.Rows) > 0 {
		c.Rows = env.Rows
	}
	if err := ps.SetAll(env.Sets); err != nil {
		return hotelPlan{}, err
	}
	for _, r := range c.Rows {
		if !slices.Contains(figure.HotelRows, r) {
			return hotelPlan{}, fmt.Errorf("row %q: want some of %s", r, strings.Join(figure.HotelRows, ", "))
		}
	}
	if c.Topology != "hotel" {
		return hotelPlan{}, fmt.Errorf("topology %s: the live experiment runs the hotel graph (the scaled one is the simulator's)", c.Topology)
	}
	g, err := c.Graph()
	if err != nil {
		return hotelPlan{}, err
	}
	return hotelPlan{c: c, g: g, grace: 2 * time.Second}, nil
}

func runGraphHotel(ctx context.Context, env *Env) (*figure.Result, error) {
	if !childCapable(env.Executable) {
		return nil, fmt.Errorf("graph-hotel starts `sluice-lab testbed hotel` processes: run it from the sluice-lab binary")
	}
	pl, err := planHotel(env)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "sluice-hotel-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	s := newSummary(env)
	res := &figure.Result{Bundle: report.NewBundle(s)}
	var runs []*figure.HotelRun
	for _, scn := range pl.c.Scenarios {
		for _, row := range pl.c.Rows {
			load := loadAverage()
			env.Phasef("%s, %s (%s; load average %.2f)", scn, row, pl.c.HotelRowParams(scn, row), load)
			s.Set(figure.HotelMetric("loadavg_1m_start", scn, row), load)
			run, err := pl.runRow(ctx, env, dir, scn, row)
			if err != nil {
				return nil, fmt.Errorf("%s, %s: %w", scn, row, err)
			}
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			runs = append(runs, run)
		}
	}
	if err := figure.HotelResult(res, pl.c, pl.g, runs); err != nil {
		return nil, err
	}
	res.Setup = pl.setup()
	return res, nil
}

func (pl hotelPlan) setup() []string {
	c, g := pl.c, pl.g
	var svcs []string
	for _, s := range g.Services {
		svcs = append(svcs, s.Name)
	}
	return []string{
		fmt.Sprintf("Services: %s, each `sluice-lab testbed hotel` (grpc-go's server, loopback), one worker burning each call's CPU time, a worker queue of %d; C = %.1f requests/s.",
			strings.Join(svcs, ", "), c.QueueLimit, c.Capacity(g)),
		fmt.Sprintf("Users: open loops in the experiment's process, one per API, evenly spaced, load %.2f × C, deadline %v (grpc-timeout), SLO %v.", c.Load, c.Deadline, c.SLO),
		"Rows: none; each research peer (peers.LiveServer on the worker queue's delay, peers.LiveClient at every caller; peer_params=" + c.PeerParams + "); sluice: grpcsluice's interceptors with the policy at every service (auto told only the SLO) and its client side at every caller.",
	}
}

// hotelProcs are a row's services, by graph index.
type hotelProcs struct {
	procs []*childBackend
	addrs []string
	conns []*grpc.ClientConn // control connections
}

func (h *hotelProcs) Close() error {
	var err error
	for _, cc := range h.conns {
		if cc != nil {
			err = errors.Join(err, cc.Close())
		}
	}
	for i := len(h.procs) - 1; i >= 0; i-- {
		if h.procs[i] != nil {
			err = errors.Join(err, h.procs[i].Close())
		}
	}
	return err
}

// order returns the services callees first.
func (pl hotelPlan) order() []int {
	g := pl.g
	deps := make([][]int, len(g.Services))
	var walk func(st figure.HotelStep)
	walk = func(st figure.HotelStep) {
		for _, c := range st.Calls {
			if !slices.Contains(deps[st.Service], c.Service) {
				deps[st.Service] = append(deps[st.Service], c.Service)
			}
			walk(c)
		}
	}
	for _, a := range g.APIs {
		walk(a.Root)
	}
	var out []int
	seen := make([]bool, len(g.Services))
	var visit func(s int)
	visit = func(s int) {
		if seen[s] {
			return
		}
		seen[s] = true
		for _, d := range deps[s] {
			visit(d)
		}
		out = append(out, s)
	}
	for s := range g.Services {
		visit(s)
	}
	return out
}

// serviceConfig returns service s's configuration, its callees'
// addresses known.
func (pl hotelPlan) serviceConfig(s int, row string, addrs []string, seed uint64) testbed.HotelServiceConfig {
	g := pl.g
	cfg := testbed.HotelServiceConfig{Name: g.Services[s].Name, Entry: s == g.Entry, Workers: g.Services[s].Workers,
		QueueLimit: pl.c.QueueLimit, Mode: row, Seed: seed*100 + uint64(s)}
	for _, a := range g.APIs {
		var walk func(st figure.HotelStep)
		walk = func(st figure.HotelStep) {
			if st.Service == s {
				m := testbed.HotelMethodConfig{API: a.Name, Work: st.Work}
				for _, c := range st.Calls {
					m.Calls = append(m.Calls, testbed.HotelCallConfig{Service: g.Services[c.Service].Name, Addr: addrs[c.Service]})
				}
				cfg.Methods = append(cfg.Methods, m)
			}
			for _, c := range st.Calls {
				walk(c)
			}
		}
		walk(a.Root)
	}
	return cfg
}

// writeFiles writes the row's control configuration: the policy (sluice)
// or the peer's configuration; it returns the flags that pass it.
func (pl hotelPlan) writeFiles(dir, scn, row string) ([]string, error) {
	switch row {
	case figure.HotelNone:
		return nil, nil
	case figure.HotelSluice:
		pol, err := pl.c.PolicyConfig()
		if err != nil {
			return nil, err
		}
		b, err := yaml.Marshal(&pol)
		if err != nil {
			return nil, err
		}
		path := filepath.Join(dir, "policy.yaml")
		return []string{"--policy", path}, os.WriteFile(path, b, 0o644)
	}
	p, _ := pl.c.PeerPoint(scn, row)
	cfg, err := figure.HotelPeerConfig(row, pl.g, p)
	if err != nil {
		return nil, err
	}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, row+"-"+figure.HotelTag(scn)+".yaml")
	return []string{"--peer-config", path}, os.WriteFile(path, b, 0o644)
}

// start starts the row's services, callees first.
func (pl hotelPlan) start(ctx context.Context, env *Env, dir, scn, row string) (*hotelProcs, error) {
	g := pl.g
	h := &hotelProcs{procs: make([]*childBackend, len(g.Services)), addrs: make([]string, len(g.Services)),
		conns: make([]*grpc.ClientConn, len(g.Services))}
	extra, err := pl.writeFiles(dir, scn, row)
	if err != nil {
		return h, err
	}
	for _, s := range pl.order() {
		cfg := pl.serviceConfig(s, row, h.addrs, env.Seed)
		b, err := json.Marshal(cfg)
		if err != nil {
			return h, err
		}
		file := filepath.Join(dir, cfg.Name+".json")
		if err := os.WriteFile(file, b, 0o644); err != nil {
			return h, err
		}
		p, err := startChildProcess(ctx, env.Executable, nil, append([]string{"hotel", "--config", file}, extra...)...)
		if err != nil {
			return h, fmt.Errorf("%s: %w", cfg.Name, err)
		}
		h.procs[s] = p
		h.addrs[s] = strings.TrimPrefix(p.URL, "http://")
		if h.conns[s], err = grpc.NewClient(h.addrs[s], grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
			return h, err
		}
		// Ready once it answers the lab's control service.
		if _, err := h.busy(ctx, s); err != nil {
			return h, fmt.Errorf("%s: not ready: %w", cfg.Name, err)
		}
	}
	return h, nil
}

// scale sets the scale of API api ("" every API) at service s.
func (h *hotelProcs) scale(ctx context.Context, s int, api string, f float64) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return h.conns[s].Invoke(ctx, testbed.HotelScaleMethod, wrapperspb.String(api+"="+strconv.FormatFloat(f, 'g', -1, 64)), &emptypb.Empty{})
}

// busy returns service s's busy seconds so far.
func (h *hotelProcs) busy(ctx context.Context, s int) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var out wrapperspb.DoubleValue
	err := h.conns[s].Invoke(ctx, testbed.HotelBusyMethod, &emptypb.Empty{}, &out)
	return out.GetValue(), err
}

// records returns service s's records.
func (h *hotelProcs) records(ctx context.Context, s int) ([]testbed.HotelRecord, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var out wrapperspb.BytesValue
	if err := h.conns[s].Invoke(ctx, testbed.HotelRecordsMethod, &emptypb.Empty{}, &out, grpc.MaxCallRecvMsgSize(1<<30)); err != nil {
		return nil, err
	}
	return testbed.ParseHotelRecords(strings.NewReader(string(out.GetValue())))
}

// runRow starts the row's services, runs its load with its events and
// collects the records of both ends.
func (pl hotelPlan) runRow(ctx context.Context, env *Env, dir, scn, row string) (run *figure.HotelRun, err error) {
	c, g := pl.c, pl.g
	s, streams, err := c.ScenarioStreams(g, scn)
	if err != nil {
		return nil, err
	}
	procs, err := pl.start(ctx, env, dir, scn, row)
	defer func() { err = errors.Join(err, procs.Close()) }()
	if err != nil {
		return nil, err
	}
	users, err := pl.newUsers(ctx, env, procs, scn, row)
	if err != nil {
		return nil, err
	}
	defer users.close()
	run = &figure.HotelRun{Scenario: scn, Row: row, Params: c.HotelRowParams(scn, row)}
	lctx, cancel := context.WithTimeout(ctx, s.Stop+c.Deadline+pl.grace)
	defer cancel()
	t0 := time.Now()
	var evErr error
	var evMu sync.Mutex
	event := func(on bool) {
		var err error
		for sv, svc := range g.Services {
			if svc.Shared && s.Drop != 1 {
				err = errors.Join(err, procs.scale(lctx, sv, "", eventFactor(on, s.Drop)))
			}
			for a, api := range g.APIs {
				if api.Heavy && s.Cost != 1 && g.Work(a, sv) > 0 {
					err = errors.Join(err, procs.scale(lctx, sv, api.Name, eventFactor(on, s.Cost)))
				}
			}
		}
		evMu.Lock()
		evErr = errors.Join(evErr, err)
		evMu.Unlock()
	}
	t1 := time.AfterFunc(s.Start, func() { event(true) })
	t2 := time.AfterFunc(s.End, func() { event(false) })
	defer t1.Stop()
	defer t2.Stop()
	stop := make(chan struct{})
	var bg sync.WaitGroup
	bg.Go(func() { users.progress(env, run, t0, stop) })
	var wg sync.WaitGroup
	for i, st := range streams {
		rng := rand.New(rand.NewPCG(env.Seed, uint64(i)+1))
		wg.Go(func() { users.stream(lctx, st, rng, run, t0, s.Stop) })
	}
	wg.Wait()
	users.inflight.Wait()
	close(stop)
	bg.Wait()
	evMu.Lock()
	err = evErr
	evMu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	for sv := range g.Services {
		recs, err := procs.records(ctx, sv)
		if err != nil {
			return nil, fmt.Errorf("%s's records: %w", g.Services[sv].Name, err)
		}
		for _, r := range recs {
			a := slices.IndexFunc(g.APIs, func(x figure.HotelAPI) bool { return x.Name == r.API })
			off := func(t time.Time) time.Duration {
				if t.IsZero() {
					return 0
				}
				return max(t.Sub(t0), time.Nanosecond)
			}
			user := r.Request
			if user >= len(run.Users) {
				user = -1
			}
			run.Calls = append(run.Calls, figure.HotelCall{Service: sv, API: a, User: user, Arrival: off(r.Arrival),
				Start: off(r.Start), Finish: off(r.Finish), Demand: r.CPU.Seconds(), Deadline: off(r.Deadline), Gone: r.Gone})
		}
	}
	return run, nil
}

// hotelCode is how the users count a call's gRPC status.
func hotelCode(err error) figure.HotelCode {
	switch status.Code(err) {
	case codes.OK:
		return figure.HotelOK
	case codes.ResourceExhausted:
		return figure.HotelRejected
	case codes.DeadlineExceeded, codes.Canceled:
		return figure.HotelTimeout
	}
	return figure.HotelFailed
}

// stream sends one stream's user requests, evenly spaced from their
// intended send times, each on its own goroutine.
func (u *hotelUsers) stream(ctx context.Context, st figure.HotelStream, rng *rand.Rand, run *figure.HotelRun, t0 time.Time, end time.Duration) {
	arr := dist.Constant{Rate: st.Rate}
	pl := u.pl
	method := pl.g.Method(st.API, pl.g.Entry)
	class := figure.HotelClasses[st.Class]
	for next := arr.Next(rng, 0); next != dist.Never && next < end; next = arr.Next(rng, next) {
		if d := time.Until(t0.Add(next)); d > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(d):
			}
		}
		if ctx.Err() != nil {
			return
		}
		user := rng.IntN(pl.c.Users)
		u.mu.Lock()
		i := len(run.Users)
		run.Users = append(run.Users, figure.HotelUser{API: st.API, Class: st.Class, Sent: next})
		u.mu.Unlock()
		u.inflight.Go(func() {
			cctx, cancel := context.WithDeadline(ctx, t0.Add(next+pl.c.Deadline))
			defer cancel()
			cctx = metadata.AppendToOutgoingContext(cctx, testbed.HotelRequestMD, strconv.Itoa(i), testbed.HotelClassMD, class)
			cctx = sluice.WithHop(cctx, sluice.Hop{Priority: class, Tenant: pl.g.APIs[st.API].Name})
			cctx = u.side(cctx, st.Class, user)
			err := u.conns[st.Class].Invoke(cctx, method, &emptypb.Empty{}, &emptypb.Empty{})
			done := time.Since(t0)
			u.mu.Lock()
			rec := &run.Users[i]
			rec.Done, rec.Code = done, hotelCode(err)
			u.mu.Unlock()
		})
	}
}

// progress prints one line a second: answers within the SLO and the
// others of the last second, by completion.
func (u *hotelUsers) progress(env *Env, run *figure.HotelRun, t0 time.Time, stop <-chan struct{}) {
	last := time.Duration(0)
	tick.Every(stop, time.Second, func() {
		now := time.Since(t0)
		u.mu.Lock()
		good, other := 0, 0
		for _, x := range run.Users {
			if x.Done <= last || x.Done > now {
				continue
			}
			if x.Good(u.pl.c.SLO) {
				good++
			} else {
				other++
			}
		}
		u.mu.Unlock()
		last = now
		env.Logf("%-10s %-10s %3.0fs  within the SLO %4d/s  other %4d/s", run.Scenario, run.Row, now.Seconds(), good, other)
	})
}

// eventFactor returns f when on, else 1.
func eventFactor(on bool, f float64) float64 {
	if on {
		return f
	}
	return 1
}

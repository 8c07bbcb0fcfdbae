// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"sync"

	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/proxy/internal/dashboard"
	"github.com/sluicehq/sluice/stage"
)

// The proxy's side of the live dashboard (internal/dashboard): the view
// of the server it reads, and what the proxy knows of each stage's
// controller that /state does not say. The routes and their guard are
// the admin API's (package admin).

// dashView is the dashboard's read-only view of the server
// (dashboard.View): the readings of GET /state as typed values, with
// each stage's objective and setting floor.
type dashView struct{ s *Server }

var _ dashboard.View = dashView{}

func (v dashView) State(n int) dashboard.State {
	s := v.s
	g := s.h.gen.Load()
	doc := s.State(n)
	out := dashboard.State{ConfigVersion: doc.ConfigVersion, Shadow: doc.Shadow, InFlight: doc.InFlight,
		Streams: doc.Streams, Token: g.cfg.Admin.Token.IsSet(), Shares: doc.Shares,
		Stages: make([]dashboard.Stage, len(doc.Stages))}
	for i, st := range doc.Stages {
		ds := dashboard.Stage{State: st}
		if stg := g.pol.Stage(st.Name); stg != nil {
			ds.Objective = objectiveOf(stg)
		}
		if f, ok := settingFloor(g.cfg, st.Name, st.Kind); ok {
			ds.Floor = &f
		}
		out.Stages[i] = ds
	}
	ps := &doc.Backends
	waited, waitNS := g.pool.waits()
	out.Pool = dashboard.Pool{Capacity: ps.Capacity, InFlight: ps.InFlight, Queue: ps.Queue.Length, QueueMax: ps.Queue.Max,
		QueueTimeout: ps.Queue.Timeout, Rejected: ps.Queue.Full + ps.Queue.TimedOut, Waited: waited, WaitNS: waitNS,
		Servers: make([]dashboard.Backend, len(ps.Servers))}
	for i, b := range ps.Servers {
		out.Pool.Servers[i] = dashboard.Backend{URL: b.URL, InFlight: b.InFlight, Limit: b.MaxConcurrency, Served: b.Served}
	}
	if p := doc.Policer; p != nil {
		out.Policer = &dashboard.Policer{Controller: p.Controller, Rate: p.Rate, Burst: p.Burst, Offered: p.Offered,
			Admitted: p.Admitted, Rejected: p.RejectedRate + p.RejectedSource + p.RejectedKernel, LiveConns: p.LiveConns,
			Last: p.Last, GuardError: p.GuardError, Decisions: p.Decisions}
	}
	for _, r := range doc.Resources {
		out.Resources = append(out.Resources, dashboard.Resource{Stage: r.Stage, Resource: r.Resource, Sensor: r.Sensor,
			Rate: r.Rate, HitsPerSec: r.HitsPerSec, Rejected: r.Rejected, Input: r.Input, SensorError: r.SensorError})
	}
	out.Sensors = doc.Sensors
	return out
}

// objectiveOf returns the statistic a stage's response-time target holds
// (control.ObjectiveOf).
func objectiveOf(st *stage.Stage) string { return control.ObjectiveOf(st.Controller().Unwrap()) }

// floors caches the setting floors of one configuration.
var floors struct {
	mu  sync.Mutex
	cfg *Config
	m   map[string]float64
}

// settingFloor returns the most restrictive setting of stage name's
// controller in cfg (control.FloorOf) and whether it has one.
func settingFloor(cfg *Config, name, kind string) (float64, bool) {
	floors.mu.Lock()
	defer floors.mu.Unlock()
	if floors.cfg != cfg {
		floors.cfg, floors.m = cfg, map[string]float64{}
		if ctrls, err := cfg.StageControllers(); err == nil {
			for n, c := range ctrls {
				if f, ok := control.FloorOf(c); ok {
					floors.m[n] = f
				}
			}
		}
	}
	f, ok := floors.m[name]
	if ok && kind == "none" {
		return 0, false
	}
	return f, ok
}

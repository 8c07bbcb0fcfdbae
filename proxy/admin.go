// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"time"

	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/proxy/admin"
	"github.com/sluicehq/sluice/proxy/buffer"
	"github.com/sluicehq/sluice/proxy/overload"
	"github.com/sluicehq/sluice/share"
	"github.com/sluicehq/sluice/stage"
)

// The admin API (package admin: its route table, guard and handlers)
// reads and changes the server through adminServer; this file is the
// server's side: the document of GET /state, and the changes the API
// makes.

// DefaultStateDecisions is how many recent decisions per stage GET /state
// shows unless ?decisions=N says otherwise (at most MaxStateDecisions).
const DefaultStateDecisions = admin.DefaultStateDecisions

// MaxStateDecisions is the most decisions per stage GET /state shows.
const MaxStateDecisions = admin.MaxStateDecisions

// MaxAdminBodyBytes bounds the body of an admin request, in bytes: a
// larger one gets 413 and changes nothing.
const MaxAdminBodyBytes = admin.MaxBodyBytes

// MinAdminTokenLen is the shortest admin.token accepted, in bytes.
const MinAdminTokenLen = admin.MinTokenLen

// StateDoc is the JSON document of GET /state.
type StateDoc struct {
	ConfigVersion uint64        `json:"config_version"`
	LoadedAt      time.Time     `json:"loaded_at"`
	ConfigFile    string        `json:"config_file,omitempty"`
	Shadow        bool          `json:"shadow"`
	InFlight      int64         `json:"requests_in_flight"`
	Streams       int64         `json:"streams_in_flight"`
	Stages        []stage.State `json:"stages"`
	Backends      PoolState     `json:"backends"`
	// Policer is the connection policer (absent without one).
	Policer *PolicerState `json:"policer,omitempty"`
	// Resources are the resource rules, Sensors every sensor.
	Resources []ResourceState `json:"resources,omitempty"`
	Sensors   []SensorState   `json:"sensors,omitempty"`
	// Shares are the client bandwidth shares (absent without them).
	Shares *share.Snapshot `json:"shares,omitempty"`
	// Cluster is the cluster as this instance sees it (absent without a
	// cluster section): mode, live instances, each global budget and
	// client allocation with this instance's part and the demand.
	Cluster *cluster.View `json:"cluster,omitempty"`
	// ResponseBuffering is the response buffers' memory and disk in use
	// against their caps, and the open temporary files.
	ResponseBuffering buffer.State `json:"response_buffering"`
}

// ResourceState is one resource rule as /state shows it
// (overload.ResourceState).
type ResourceState = overload.ResourceState

// PolicerState is the connection policer as /state shows it
// (overload.PolicerState).
type PolicerState = overload.PolicerState

// PolicerPeriod is the input of the policer's last control step
// (overload.PolicerPeriod).
type PolicerPeriod = overload.PolicerPeriod

// SensorState is a sensor as /state shows it (overload.SensorState).
type SensorState = overload.SensorState

// State returns the proxy's state with the last n decisions per stage,
// rule and policer.
func (s *Server) State(n int) StateDoc {
	g := s.h.gen.Load()
	doc := StateDoc{ConfigVersion: g.version, LoadedAt: g.loaded, ConfigFile: s.file, Shadow: g.cfg.Shadow,
		InFlight: s.h.active.Load(), Streams: s.h.streams.Load(), Stages: g.pol.State(n), Backends: g.pool.State(),
		Resources: s.ov.ResourceStates(g.pol, n), ResponseBuffering: s.h.buf.State(&g.buf)}
	overload.SanitizeStages(doc.Stages)
	if pr := s.ov.Policer(); pr != nil {
		ps := pr.State(n)
		doc.Policer = &ps
	}
	for _, sn := range s.ov.Sensors() {
		doc.Sensors = append(doc.Sensors, sn.State())
	}
	if g.shares != nil {
		snap := g.shares.Snapshot()
		doc.Shares = &snap
	}
	if g.cluster != nil {
		v := g.cluster.View()
		doc.Cluster = &v
	}
	return doc
}

// adminServer is the server as the admin API sees it (admin.Server).
type adminServer struct{ s *Server }

var _ admin.Server = adminServer{}

func (a adminServer) Admin() *admin.Config { return &a.s.h.gen.Load().cfg.Admin }

func (a adminServer) State(n int) any { return a.s.State(n) }

func (a adminServer) RunningConfig() any { return a.s.h.gen.Load().cfg }

func (a adminServer) Reload() (uint64, error) {
	if err := a.s.Reload(); err != nil {
		return 0, err
	}
	return a.s.h.gen.Load().version, nil
}

// SetTarget sets the target of the running generation's stage name and
// counts the change (proxy_target_changes_total).
func (a adminServer) SetTarget(name string, d time.Duration) (string, error) {
	st := a.s.h.gen.Load().pol.Stage(name)
	if st == nil {
		return "", admin.ErrNoStage
	}
	old := st.State(0).Target
	if err := st.SetTarget(d); err != nil {
		return "", err
	}
	a.s.m.targetChanges.WithLabelValues(name).Inc()
	return old, nil
}

func (a adminServer) SetShadow(on bool) (bool, uint64, error) { return a.s.setShadow(on) }

// setShadow applies the running configuration with Shadow = on (nothing
// when it already is) and returns the old value and the running
// configuration version.
func (s *Server) setShadow(on bool) (old bool, version uint64, err error) {
	err = s.applyFrom(func(cur *Config) *Config {
		old = cur.Shadow
		if old == on {
			return nil
		}
		c := *cur // configurations are never modified once running: a shallow copy is enough
		c.Shadow = on
		return &c
	})
	return old, s.h.gen.Load().version, err
}

// SPDX-License-Identifier: Apache-2.0

package figure

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/lab/dist"
	"github.com/sluicehq/sluice/policy"
)

// graph-hotel (docs/experiments.md): a gRPC service graph of the shape
// of DeathStarBench's hotelReservation, overloaded six ways, with no
// control, each of the research's graph controllers at its tuned best
// (package lab/peers) and sluice at every service told only the
// end-to-end SLO. This file is the part both drivers share: the graph,
// the parameters, the scenarios and the load; hotel_result.go the
// records, the metrics and the checks; hotel_peers.go the peers' rows.
//
// The graph (HotelGraphSmall): an entry service (frontend) and four
// services behind it, each with CPU-bound handlers on a worker pool
// (Workers goroutines that burn CPU time, live; a FIFO of Workers
// servers, in virtual time). A handler waits for a worker, does its work
// (neither the wait nor the work watches the call's context: the work of
// a call whose caller has gone is done all the same, as a CPU-bound Go
// handler does it), then makes its calls one after the other with the
// call's context (a call whose context has ended makes none), and
// answers. Two API types of different cost share the backend rate:
//
//	search:  frontend → search → geo, then rate (DeathStarBench's Nearby)
//	reserve: frontend → reservation → rate (rate's work 4× search's)
//
// and, in the crowd scenario only, prefetch, the low class: search's
// path and work (Netflix's prefetch traffic beside the users' requests).
//
// The load: each API is its own stream of evenly spaced user requests,
// each with Deadline; the high class's APIs share Load × C by their
// Share, where C is the graph's capacity at that mix (Capacity).

// HotelService is one service of a graph.
type HotelService struct {
	// Name is the service's name (frontend); its gRPC service is
	// "hotel." + Name with the first letter upper-cased.
	Name string
	// Instances is how many replicas serve it (1 in the hotel graph);
	// a caller spreads its calls over them.
	Instances int
	// Workers is each instance's worker pool: its CPU quota in cores.
	Workers int
	// Shared marks a backend that both API types use (the drop scenario
	// divides its capacity).
	Shared bool
}

// HotelStep is one call of an API's call tree: the service it visits,
// the CPU time its handler spends there, and the calls the handler makes
// after its work, one after the other.
type HotelStep struct {
	Service int
	Work    time.Duration
	Calls   []HotelStep
}

// HotelAPI is one API type: its call tree from the entry service.
type HotelAPI struct {
	// Name is the API's name (search); every service's method for it is
	// its name with the first letter upper-cased.
	Name string
	// Low marks the low class's API (prefetch): offered only in the
	// crowd scenario, which the others (the high class) are not.
	Low bool
	// Heavy marks the costly API, whose work the cost scenarios
	// multiply at every service it visits.
	Heavy bool
	// Share is its share of its class's load.
	Share float64
	// Root is its call at the entry service.
	Root HotelStep
}

// HotelGraph is a service graph: its services, its APIs and its entry.
type HotelGraph struct {
	Name     string
	Services []HotelService
	APIs     []HotelAPI
	// Entry is the index of the service the end users call.
	Entry int
}

// The hotel graph's services, by index.
const (
	HotelFrontend = iota
	HotelSearch
	HotelGeo
	HotelRate
	HotelReservation
)

// HotelGraphSmall returns the hotel graph: five services of one
// instance and one worker each; search costs 0.3 ms at the frontend, 0.5
// at search, 1 at geo and 4 at rate; reserve 0.3 at the frontend, 2 at
// reservation and 16 at rate; searches are 80 % of the users' requests.
// C = 1 / (0.8·4 ms + 0.2·16 ms) = 156.25 requests/s, rate the
// bottleneck.
func HotelGraphSmall() *HotelGraph {
	ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
	search := HotelStep{Service: HotelFrontend, Work: ms(0.3), Calls: []HotelStep{
		{Service: HotelSearch, Work: ms(0.5), Calls: []HotelStep{
			{Service: HotelGeo, Work: ms(1)}, {Service: HotelRate, Work: ms(4)}}}}}
	reserve := HotelStep{Service: HotelFrontend, Work: ms(0.3), Calls: []HotelStep{
		{Service: HotelReservation, Work: ms(2), Calls: []HotelStep{{Service: HotelRate, Work: ms(16)}}}}}
	return &HotelGraph{
		Name: "hotel",
		Services: []HotelService{{Name: "frontend", Instances: 1, Workers: 1}, {Name: "search", Instances: 1, Workers: 1},
			{Name: "geo", Instances: 1, Workers: 1}, {Name: "rate", Instances: 1, Workers: 1, Shared: true},
			{Name: "reservation", Instances: 1, Workers: 1}},
		APIs: []HotelAPI{{Name: "search", Share: 0.8, Root: search}, {Name: "reserve", Heavy: true, Share: 0.2, Root: reserve},
			{Name: "prefetch", Low: true, Share: 1, Root: search}},
		Entry: HotelFrontend,
	}
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// Method returns the gRPC full method of API api at service svc:
// "/hotel.Rate/Reserve".
func (g *HotelGraph) Method(api, svc int) string {
	return "/hotel." + upperFirst(g.Services[svc].Name) + "/" + upperFirst(g.APIs[api].Name)
}

// Validate checks the graph's shape: at least one instance and worker
// per service, steps that name services, the entry at every root, and
// shares > 0.
func (g *HotelGraph) Validate() error {
	if len(g.Services) == 0 || len(g.APIs) == 0 {
		return fmt.Errorf("graph %s: no services or no APIs", g.Name)
	}
	for i, s := range g.Services {
		if s.Name == "" || s.Instances < 1 || s.Workers < 1 {
			return fmt.Errorf("graph %s: service %d (%q): a name, ≥ 1 instance and ≥ 1 worker needed", g.Name, i, s.Name)
		}
	}
	var walk func(a string, st HotelStep) error
	walk = func(a string, st HotelStep) error {
		if st.Service < 0 || st.Service >= len(g.Services) || st.Work < 0 {
			return fmt.Errorf("graph %s: API %s: a step at service %d with work %v", g.Name, a, st.Service, st.Work)
		}
		for _, c := range st.Calls {
			if err := walk(a, c); err != nil {
				return err
			}
		}
		return nil
	}
	for _, a := range g.APIs {
		if a.Root.Service != g.Entry || !(a.Share > 0) {
			return fmt.Errorf("graph %s: API %s must start at the entry and have a share > 0", g.Name, a.Name)
		}
		if err := walk(a.Name, a.Root); err != nil {
			return err
		}
	}
	return nil
}

// Paths returns, per API, the services its calls visit (each once, in
// the order first visited): TopFull's execution paths.
func (g *HotelGraph) Paths() [][]int {
	out := make([][]int, len(g.APIs))
	for i, a := range g.APIs {
		var walk func(st HotelStep)
		walk = func(st HotelStep) {
			if !slices.Contains(out[i], st.Service) {
				out[i] = append(out[i], st.Service)
			}
			for _, c := range st.Calls {
				walk(c)
			}
		}
		walk(a.Root)
	}
	return out
}

// Leaves returns the services that call no other service.
func (g *HotelGraph) Leaves() []int {
	calls := make([]bool, len(g.Services))
	var walk func(st HotelStep)
	walk = func(st HotelStep) {
		if len(st.Calls) > 0 {
			calls[st.Service] = true
		}
		for _, c := range st.Calls {
			walk(c)
		}
	}
	for _, a := range g.APIs {
		walk(a.Root)
	}
	var out []int
	for i := range g.Services {
		if !calls[i] {
			out = append(out, i)
		}
	}
	return out
}

// demand returns, per service, the work (server-seconds) one request of
// API api brings it, each step's work multiplied by factor(svc).
func (g *HotelGraph) demand(api int, factor func(svc int) float64) []float64 {
	d := make([]float64, len(g.Services))
	var walk func(st HotelStep)
	walk = func(st HotelStep) {
		d[st.Service] += st.Work.Seconds() * factor(st.Service)
		for _, c := range st.Calls {
			walk(c)
		}
	}
	walk(g.APIs[api].Root)
	return d
}

// capacityAt returns the requests per second the graph serves at the
// mix rates (per API, any unit), each API's work at a service
// multiplied by factor(api, svc): Σ rates / max over services of the
// utilization they bring per unit of rate.
func (g *HotelGraph) capacityAt(rates []float64, factor func(api, svc int) float64) float64 {
	util := make([]float64, len(g.Services))
	total := 0.0
	for a, r := range rates {
		if r <= 0 {
			continue
		}
		total += r
		for s, w := range g.demand(a, func(svc int) float64 { return factor(a, svc) }) {
			sv := g.Services[s]
			util[s] += r * w / float64(sv.Instances*sv.Workers)
		}
	}
	worst := slices.Max(util)
	if total == 0 || worst == 0 {
		return math.Inf(1)
	}
	return total / worst
}

// The scenarios of graph-hotel.
const (
	HotelStep14 = "step-1.4"
	HotelStep3  = "step-3"
	HotelStep8  = "step-8"
	HotelDrop   = "drop"
	HotelCrowd  = "crowd"
	HotelCost10 = "cost-10"
	HotelCost50 = "cost-50"
)

// HotelScenarios are the scenarios, in table order.
var HotelScenarios = []string{HotelStep14, HotelStep3, HotelStep8, HotelDrop, HotelCrowd, HotelCost10, HotelCost50}

// The rows of graph-hotel: no control, each research peer, sluice.
const (
	HotelNone   = "none"
	HotelSluice = "sluice"
)

// HotelPeers are the research peers' rows.
var HotelPeers = []string{"breakwater", "dagor", "rajomon", "topfull"}

// HotelRows are the rows, in table order.
var HotelRows = append(append([]string{HotelNone}, HotelPeers...), HotelSluice)

// HotelScenario is one scenario: a phase before (Warm), the event, and a
// phase after (After); what changes during the event is the scenario's.
type HotelScenario struct {
	Name string
	// Load multiplies every API's rate during the event (the load
	// steps); 1 otherwise.
	Load float64
	// Crowd multiplies the low class's rate during the event; the
	// crowd scenario is the only one with a low class.
	Crowd float64
	// Drop divides the capacity of the shared backends during the event
	// (each call arriving then costs Drop times its work).
	Drop float64
	// Cost multiplies the heavy API's work at every service during the
	// event.
	Cost float64
	// Start and End bound the event; Stop is the end of the load.
	Start, End, Stop time.Duration
}

// Phases returns the phase boundaries: 0, the event's start and end, the
// end of the load.
func (s HotelScenario) Phases() []time.Duration { return []time.Duration{0, s.Start, s.End, s.Stop} }

// PhaseNames are the three phases' names, in metric names.
var PhaseNames = []string{"before", "event", "after"}

// HotelParams are graph-hotel's parameters, declared once (DeclareHotel)
// for both drivers.
type HotelParams struct {
	// Scenarios and Rows to run.
	Scenarios, Rows []string
	// Load is the offered load before and after the event, × C.
	Load float64
	// SLO is the objective: goodput counts answers within it, every
	// sluice stage's auto is told it.
	SLO time.Duration
	// Deadline is every user request's deadline (the caller gives up).
	Deadline time.Duration
	// Warm, After: the phases before and after the event.
	Warm, After time.Duration
	// StepLen, DropLen, CrowdLen, CostLen: the events' lengths.
	StepLen, DropLen, CrowdLen, CostLen time.Duration
	// DropFactor, CrowdX: the drop's and the crowd's sizes; HighShare
	// the high class's share of the load in the crowd scenario.
	DropFactor, CrowdX, HighShare float64
	// QueueLimit bounds each instance's worker queue (0: unbounded).
	QueueLimit int
	// PeerParams says which parameters the peers' rows run with: the
	// search's best per scenario ("tuned") or their papers' ("defaults").
	PeerParams string
	// Topology is "hotel" (HotelGraphSmall) or "scaled"
	// (HotelGraphScaled with Services and Instances).
	Topology           string
	Services, Instance int
	// Policy is HotelBuiltinPolicy or a policy YAML file that every
	// sluice service loads instead (a row with other policy settings:
	// PolicyConfig).
	Policy string
	// UserClients is how many end-user client sides each class has for
	// the peers' rows; Users how many users each class has.
	UserClients, Users int
}

// DeclareHotel declares graph-hotel's parameters on ps.
func DeclareHotel(ps *Params, c *HotelParams) {
	ps.Subset(&c.Scenarios, "scenarios", HotelScenarios, HotelScenarios, "scenarios to run, each a phase before, an event and a phase after")
	ps.Subset(&c.Rows, "rows", HotelRows, HotelRows, "rows to run")
	ps.Float(&c.Load, "load", 0.7, 0.01, 100, "offered load before and after the event, × C (the graph's capacity at the high class's mix)")
	ps.Duration(&c.SLO, "slo", 250*time.Millisecond, time.Millisecond, time.Hour, "the end-to-end objective: goodput counts user requests answered within it; every sluice service's auto is told it and nothing else")
	ps.Duration(&c.Deadline, "deadline", 500*time.Millisecond, time.Millisecond, time.Hour, "every user request's deadline (grpc-timeout; the user gives up then)")
	ps.Duration(&c.Warm, "warm", 10*time.Second, 2*time.Second, time.Hour, "phase before the event (its second half is the level before)")
	ps.Duration(&c.After, "after", 15*time.Second, time.Second, time.Hour, "phase after the event")
	ps.Duration(&c.StepLen, "step_len", 15*time.Second, time.Second, time.Hour, "length of the load steps")
	ps.Duration(&c.DropLen, "drop_len", 10*time.Second, time.Second, time.Hour, "length of the capacity drop")
	ps.Duration(&c.CrowdLen, "crowd_len", 20*time.Second, time.Second, time.Hour, "length of the crowd")
	ps.Duration(&c.CostLen, "cost_len", 20*time.Second, time.Second, time.Hour, "length of the costly phase (cost-10, cost-50)")
	ps.Float(&c.DropFactor, "drop_factor", 3, 1, 1000, "drop: the shared backend's capacity is divided by this")
	ps.Float(&c.CrowdX, "crowd", 12, 1, 1000, "crowd: the low class's rate, × its rate before (Netflix's prefetch spike: 12×)")
	ps.Float(&c.HighShare, "high_share", 0.5, 0.01, 0.99, "crowd: the high class's share of the load before the crowd")
	ps.Int(&c.QueueLimit, "queue_limit", 2048, 0, 1<<20, "calls each instance's worker queue holds (0: unbounded); a full queue answers RESOURCE_EXHAUSTED")
	ps.Choice(&c.PeerParams, "peer_params", "tuned", []string{"tuned", "defaults"}, "the peers' parameters: each one's best per scenario from the search (HotelTuned), or its paper's")
	ps.Choice(&c.Topology, "topology", "hotel", []string{"hotel", "scaled"}, "the graph: the hotel (5 services), or the scaled graph (services, instances; virtual time only)")
	ps.Int(&c.Services, "services", 100, 5, 10000, "scaled: number of services")
	ps.Int(&c.Instance, "instances", 1000, 5, 1000000, "scaled: number of instances over all services")
	ps.Text(&c.Policy, "policy", HotelBuiltinPolicy, "a policy YAML file every sluice service loads instead of the built-in one (auto told slo, classes high and low); builtin: the built-in")
	ps.Int(&c.UserClients, "user_clients", 16, 1, 1024, "peers' rows: end-user client sides per class")
	ps.Int(&c.Users, "users", 1000, 1, 1000000, "peers' rows: users per class, spread over the client sides")
}

// DefaultHotel returns graph-hotel's defaults.
func DefaultHotel() HotelParams {
	var c HotelParams
	DeclareHotel(NewParams("graph-hotel"), &c)
	return c
}

// Graph returns the run's graph.
func (c HotelParams) Graph() (*HotelGraph, error) {
	var g *HotelGraph
	if c.Topology == "scaled" {
		var err error
		if g, err = HotelGraphScaled(c.Services, c.Instance); err != nil {
			return nil, err
		}
	} else {
		g = HotelGraphSmall()
	}
	return g, g.Validate()
}

// Capacity returns C, the graph's capacity at the high class's mix,
// requests/s.
func (c HotelParams) Capacity(g *HotelGraph) float64 {
	return g.capacityAt(c.mix(g), func(int, int) float64 { return 1 })
}

// mix returns the high class's shares per API.
func (c HotelParams) mix(g *HotelGraph) []float64 {
	r := make([]float64, len(g.APIs))
	for i, a := range g.APIs {
		if !a.Low {
			r[i] = a.Share
		}
	}
	return r
}

// Scenario returns the named scenario's shape.
func (c HotelParams) Scenario(name string) (HotelScenario, error) {
	s := HotelScenario{Name: name, Load: 1, Crowd: 1, Drop: 1, Cost: 1, Start: c.Warm}
	n := c.StepLen
	switch name {
	case HotelStep14:
		s.Load = 1.4 / c.Load
	case HotelStep3:
		s.Load = 3 / c.Load
	case HotelStep8:
		s.Load = 8 / c.Load
	case HotelDrop:
		s.Drop, n = c.DropFactor, c.DropLen
	case HotelCrowd:
		s.Crowd, n = c.CrowdX, c.CrowdLen
	case HotelCost10:
		s.Cost, n = 10, c.CostLen
	case HotelCost50:
		s.Cost, n = 50, c.CostLen
	default:
		return s, fmt.Errorf("unknown scenario %q (valid: %s)", name, strings.Join(HotelScenarios, ", "))
	}
	s.End = s.Start + n
	s.Stop = s.End + c.After
	return s, nil
}

// ScenarioStreams returns the named scenario's shape and its streams on
// g: Scenario, then Streams, as every driver of the figure starts a run.
func (c HotelParams) ScenarioStreams(g *HotelGraph, name string) (HotelScenario, []HotelStream, error) {
	s, err := c.Scenario(name)
	if err != nil {
		return s, nil, err
	}
	st, err := c.Streams(g, s)
	return s, st, err
}

// Factor returns, for scenario s at time t, the factor by which the work
// of API api at service svc is multiplied (for a call arriving then).
func (s HotelScenario) Factor(g *HotelGraph, api, svc int, t time.Duration) float64 {
	if t < s.Start || t >= s.End {
		return 1
	}
	f := 1.0
	if g.Services[svc].Shared {
		f *= s.Drop
	}
	if g.APIs[api].Heavy {
		f *= s.Cost
	}
	return f
}

// HotelStream is one stream of user requests: an API, its class (0
// high, 1 low) and its rate over time.
type HotelStream struct {
	API, Class int
	Rate       dist.Schedule
}

// Streams returns scenario s's streams. The high class offers Load × C
// (in the crowd scenario HighShare of it), spread over its APIs by
// share, times s.Load during the event; the low class (crowd only) the
// rest, times s.Crowd during the event.
func (c HotelParams) Streams(g *HotelGraph, s HotelScenario) ([]HotelStream, error) {
	total := c.Load * c.Capacity(g)
	high := total
	crowd := s.Name == HotelCrowd
	if crowd {
		high = total * c.HighShare
	}
	var lowShare float64
	for _, a := range g.APIs {
		if a.Low {
			lowShare += a.Share
		}
	}
	var out []HotelStream
	for i, a := range g.APIs {
		base, mult := high*a.Share, s.Load
		if a.Low {
			if !crowd {
				continue
			}
			base, mult = (total-high)*a.Share/lowShare, s.Crowd
		}
		sch, err := dist.NewSchedule(dist.Segment{Start: 0, Rate: base}, dist.Segment{Start: s.Start, Rate: base * mult},
			dist.Segment{Start: s.End, Rate: base})
		if err != nil {
			return nil, err
		}
		cl := 0
		if a.Low {
			cl = 1
		}
		out = append(out, HotelStream{API: i, Class: cl, Rate: sch})
	}
	return out, nil
}

// CapacityAt returns what the graph can serve at time t of scenario s,
// requests/s, given what the streams offer then: the goodput of an
// ideal controller that serves the classes in priority order and, within
// a class, gives each API its max-min fair share of the services' CPU
// time (docs/experiments.md's fair share by service time, the measure of
// costly requests). It is found by progressive filling (as DRF fills):
// within a class every API's rate grows so that its dominant share
// (its work per request at its busiest service over that service's
// servers, times the rate) grows equally, until the API's offered rate
// is reached or a service it uses is full. With one API mix and no
// priorities it is the capacity at the offered mix when the APIs bring
// the bottleneck equal work (the hotel's search and reserve do: 0.8·4 ms
// = 0.2·16 ms); it is never above what is offered.
func (c HotelParams) CapacityAt(g *HotelGraph, s HotelScenario, streams []HotelStream, t time.Duration) float64 {
	offered := make([]float64, len(g.APIs))
	for _, st := range streams {
		offered[st.API] += st.Rate.At(t)
	}
	servers := make([]float64, len(g.Services))
	for i, sv := range g.Services {
		servers[i] = float64(sv.Instances * sv.Workers)
	}
	used := make([]float64, len(g.Services))
	total := 0.0
	for _, low := range []bool{false, true} {
		type api struct {
			i    int
			w    []float64 // work per request at each service
			dom  float64   // dominant share per request
			rate float64
		}
		var active []*api
		for i, a := range g.APIs {
			if a.Low != low || offered[i] <= 0 {
				continue
			}
			w := g.demand(i, func(svc int) float64 { return s.Factor(g, i, svc, t) })
			x := &api{i: i, w: w}
			for k, v := range w {
				x.dom = math.Max(x.dom, v/servers[k])
			}
			if x.dom == 0 {
				total += offered[i]
				continue
			}
			active = append(active, x)
		}
		for len(active) > 0 {
			// The largest growth dt of the dominant share before an API
			// reaches its offered rate or a service fills.
			dt := math.Inf(1)
			load := make([]float64, len(g.Services))
			for _, x := range active {
				dt = math.Min(dt, (offered[x.i]-x.rate)*x.dom)
				for k, v := range x.w {
					load[k] += v / x.dom
				}
			}
			for k, l := range load {
				if l > 0 {
					dt = math.Min(dt, (servers[k]-used[k])/l)
				}
			}
			dt = math.Max(dt, 0)
			for k, l := range load {
				used[k] += l * dt
			}
			var next []*api
			for _, x := range active {
				x.rate += dt / x.dom
				full := x.rate >= offered[x.i]*(1-1e-9)
				for k, v := range x.w {
					full = full || (v > 0 && used[k] >= servers[k]*(1-1e-9))
				}
				if full {
					total += x.rate
					continue
				}
				next = append(next, x)
			}
			active = next
		}
	}
	return total
}

// HotelClasses are the class names, by class index.
var HotelClasses = []string{"high", "low"}

// HotelBuiltinPolicy is the policy parameter's value that selects the
// built-in policy (HotelParams.PolicyConfig).
const HotelBuiltinPolicy = "builtin"

// HotelStage is the name of the built-in policy's one stage.
const HotelStage = "hotel"

// PolicyConfig returns the admission policy of every sluice service,
// live and in virtual time: the file named by the policy parameter, or
// the built-in one — classes high and low (high by GraphClassHeader,
// believed from anyone: the lab's clients stand for the edge's own
// classification; the rest low), the hop in front trusted (127.0.0.1,
// every process of the graph) so that the priority the edge decided
// travels on, and one stage, auto told the SLO and nothing else. Every
// user request carries its API's name as its hop tenant
// (X-Sluice-Tenant), so that a policy may share a stage among the APIs
// (tenants.fair, and whatever keys on the tenant).
func (c HotelParams) PolicyConfig() (policy.Config, error) {
	if c.Policy != HotelBuiltinPolicy {
		pc, err := policy.Load(c.Policy)
		if err != nil {
			return policy.Config{}, err
		}
		return *pc, nil
	}
	return hopPolicy(HotelStage, c.SLO)
}

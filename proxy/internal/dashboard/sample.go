// SPDX-License-Identifier: Apache-2.0

package dashboard

import (
	"math"
	"strings"
	"time"

	"github.com/sluicehq/sluice/share"
	"github.com/sluicehq/sluice/stage"
)

// sampleDecisions is the most decisions per stage (and for the policer) a
// sample carries: those taken since the previous sample, newest last.
const sampleDecisions = 10

// Sample is one second of the proxy as the dashboard shows it. Rates are
// per second; times are Unix milliseconds; latencies milliseconds.
type Sample struct {
	// Boot identifies the process (random per Dashboard): a viewer that sees
	// it change starts its charts afresh. Seq numbers the samples from 1.
	Boot          string `json:"boot"`
	Seq           uint64 `json:"seq"`
	T             int64  `json:"t"`
	ConfigVersion uint64 `json:"config_version"`
	Shadow        bool   `json:"shadow"`
	InFlight      int64  `json:"requests_in_flight"`
	Streams       int64  `json:"streams_in_flight"`
	// Token reports whether admin.token is configured (the page then
	// asks for it before a change).
	Token     bool             `json:"token"`
	Stages    []SampleStage    `json:"stages"`
	Pool      SamplePool       `json:"pool"`
	Policer   *SamplePolicer   `json:"policer,omitempty"`
	Resources []SampleResource `json:"resources,omitempty"`
	Sensors   []Sensor         `json:"sensors,omitempty"`
	Shares    *share.Snapshot  `json:"shares,omitempty"`
}

// SampleStage is one stage: its controller's setting with the setting's
// kind and unit, every other numeric field of its /state entry (Numbers,
// by JSON path, e.g. "concurrency.in_flight"), its classes and the
// decisions taken since the previous sample.
type SampleStage struct {
	Name       string  `json:"name"`
	Controller string  `json:"controller"`
	Kind       string  `json:"kind"`
	Unit       string  `json:"unit"`
	Setting    float64 `json:"setting"`
	// Floor is the most restrictive setting the controller can reach
	// (lowest rate or limit, highest drop probability), when known.
	Floor   *float64 `json:"floor,omitempty"`
	Quality float64  `json:"quality"`
	GateOff bool     `json:"gate_off"`
	Shadow  bool     `json:"shadow"`
	// Target is the response-time target ("" without one); TargetMS the
	// same in milliseconds; Objective the statistic it holds (p90, mean)
	// when known.
	Target    string                `json:"target,omitempty"`
	TargetMS  float64               `json:"target_ms,omitempty"`
	Objective string                `json:"objective,omitempty"`
	Numbers   map[string]float64    `json:"numbers,omitempty"`
	Classes   []SampleClass         `json:"classes"`
	Decisions []stage.DecisionState `json:"decisions,omitempty"`
}

// SampleClass is one class of a stage: totals since start (up to the last
// control period), rates per second over the control periods that ended
// since the previous sample, and every numeric field of the last period
// (Last: p50_ms, p90_ms, p99_ms, mean_ms, queue, …).
type SampleClass struct {
	Name   string             `json:"name"`
	Totals stage.ClassTotals  `json:"totals"`
	Rates  ClassRates         `json:"rates"`
	Last   map[string]float64 `json:"last,omitempty"`
}

// ClassRates are a class's requests per second.
type ClassRates struct {
	Offered        float64 `json:"offered"`
	Admitted       float64 `json:"admitted"`
	Rejected       float64 `json:"rejected"`
	ShadowRejected float64 `json:"shadow_rejected"`
	Completed      float64 `json:"completed"`
	Errors         float64 `json:"errors"`
}

// SamplePool is the backend pool: occupancy, the wait queue, its
// rejections and mean wait per second, and every server.
type SamplePool struct {
	Capacity int `json:"capacity"`
	InFlight int `json:"in_flight"`
	// Queue is the wait queue's length, QueueMax its bound, QueueTimeout
	// its longest wait.
	Queue        int    `json:"queue"`
	QueueMax     int    `json:"queue_max"`
	QueueTimeout string `json:"queue_timeout"`
	// RejectedPS are the pool's 503s per second (queue full or timed out);
	// WaitMS the mean wait, in ms, of the requests that waited for a slot
	// and got one since the previous sample (0 when none waited); WaitedPS
	// how many did per second.
	RejectedPS float64         `json:"rejected_per_second"`
	WaitMS     float64         `json:"wait_ms"`
	WaitedPS   float64         `json:"waited_per_second"`
	Servers    []SampleBackend `json:"servers"`
}

// SampleBackend is one upstream server.
type SampleBackend struct {
	URL      string  `json:"url"`
	InFlight int     `json:"in_flight"`
	Limit    int     `json:"max_concurrency"`
	ServedPS float64 `json:"served_per_second"`
}

// SamplePolicer is the connection policer: its rate and burst,
// connections per second offered, admitted and reset, live connections,
// the numeric inputs of its last period and its new decisions.
type SamplePolicer struct {
	Controller string                `json:"controller"`
	Rate       float64               `json:"rate"`
	Burst      int                   `json:"burst"`
	OfferedPS  float64               `json:"offered_per_second"`
	AdmittedPS float64               `json:"admitted_per_second"`
	RejectedPS float64               `json:"rejected_per_second"`
	LiveConns  int                   `json:"live_connections"`
	Last       map[string]float64    `json:"last,omitempty"`
	GuardError string                `json:"guard_error,omitempty"`
	Decisions  []stage.DecisionState `json:"decisions,omitempty"`
}

// SampleResource is one resource rule.
type SampleResource struct {
	Stage       string   `json:"stage"`
	Resource    string   `json:"resource"`
	Sensor      string   `json:"sensor"`
	Rate        float64  `json:"rate"`
	HitsPS      float64  `json:"hits_per_second"`
	RejectedPS  float64  `json:"rejected_per_second"`
	Input       *float64 `json:"input,omitempty"`
	SensorError string   `json:"sensor_error,omitempty"`
}

type classKey struct{ stage, class string }

type prevSample struct {
	at      time.Time
	classes map[classKey]classPrev
	served  map[string]uint64
	poolRej uint64
	waited  uint64
	waitNS  uint64
	pol     [3]uint64 // offered, admitted, rejected
	rules   map[classKey]uint64
}

type classPrev struct {
	end    time.Time
	totals stage.ClassTotals
	rates  ClassRates
}

// decisionCounts returns the number of decisions smp carries per stage
// ("" the policer).
func decisionCounts(smp *Sample) []decCount {
	var decs []decCount
	for _, st := range smp.Stages {
		if n := len(st.Decisions); n > 0 {
			decs = append(decs, decCount{st.Name, n})
		}
	}
	if p := smp.Policer; p != nil && len(p.Decisions) > 0 {
		decs = append(decs, decCount{"", len(p.Decisions)})
	}
	return decs
}

// take reads the server's state from v at now into a Sample. Only the
// sampler calls it.
func (h *history) take(v View, now time.Time) *Sample {
	state := v.State(3 * sampleDecisions)
	h.mu.Lock()
	seq := h.next
	h.mu.Unlock()
	prev := h.prev
	cur := prevSample{at: now, classes: map[classKey]classPrev{}, served: map[string]uint64{}, rules: map[classKey]uint64{}}
	dt := now.Sub(prev.at).Seconds()
	perSec := func(d uint64, old uint64) float64 {
		if prev.at.IsZero() || dt <= 0 || d < old {
			return 0
		}
		return float64(d-old) / dt
	}
	smp := &Sample{Boot: h.boot, Seq: seq, T: now.UnixMilli(), ConfigVersion: state.ConfigVersion, Shadow: state.Shadow,
		InFlight: state.InFlight, Streams: state.Streams, Token: state.Token, Sensors: state.Sensors,
		Shares: state.Shares}

	for i := range state.Stages {
		st := &state.Stages[i]
		ss := SampleStage{Name: st.Name, Controller: st.Controller, Kind: st.Kind, Unit: st.Unit, Setting: st.Setting,
			Quality: st.Quality, GateOff: st.GateOff, Shadow: st.Shadow, Target: st.Target, Numbers: stageNumbers(&st.State),
			Objective: st.Objective, Floor: st.Floor}
		if st.Target != "" {
			if d, err := time.ParseDuration(st.Target); err == nil {
				ss.TargetMS = float64(d) / float64(time.Millisecond)
			}
		}
		for _, c := range st.Classes {
			k := classKey{st.Name, c.Name}
			sc, cp := sampleClass(&c, prev.classes, k)
			cur.classes[k] = cp
			ss.Classes = append(ss.Classes, sc)
		}
		ss.Decisions = h.newDecisions(st.Name, st.Decisions)
		smp.Stages = append(smp.Stages, ss)
	}

	ps := &state.Pool
	cur.poolRej, cur.waited, cur.waitNS = ps.Rejected, ps.Waited, ps.WaitNS
	smp.Pool = SamplePool{Capacity: ps.Capacity, InFlight: ps.InFlight, Queue: ps.Queue, QueueMax: ps.QueueMax,
		QueueTimeout: ps.QueueTimeout, RejectedPS: perSec(cur.poolRej, prev.poolRej), WaitedPS: perSec(ps.Waited, prev.waited)}
	if ps.Waited > prev.waited && ps.WaitNS >= prev.waitNS && !prev.at.IsZero() {
		smp.Pool.WaitMS = float64(ps.WaitNS-prev.waitNS) / float64(ps.Waited-prev.waited) / 1e6
	}
	for _, b := range ps.Servers {
		cur.served[b.URL] = b.Served
		smp.Pool.Servers = append(smp.Pool.Servers, SampleBackend{URL: b.URL, InFlight: b.InFlight, Limit: b.Limit,
			ServedPS: perSec(b.Served, prev.served[b.URL])})
	}

	if p := state.Policer; p != nil {
		cur.pol = [3]uint64{p.Offered, p.Admitted, p.Rejected}
		sp := &SamplePolicer{Controller: p.Controller, Rate: p.Rate, Burst: p.Burst, LiveConns: p.LiveConns,
			OfferedPS: perSec(p.Offered, prev.pol[0]), AdmittedPS: perSec(p.Admitted, prev.pol[1]),
			RejectedPS: perSec(p.Rejected, prev.pol[2]), GuardError: p.GuardError, Decisions: h.newDecisions("", p.Decisions)}
		if p.Last != nil {
			sp.Last = policerNumbers(p.Last)
		}
		smp.Policer = sp
	}
	for _, r := range state.Resources {
		k := classKey{r.Stage, r.Resource}
		cur.rules[k] = r.Rejected
		smp.Resources = append(smp.Resources, SampleResource{Stage: r.Stage, Resource: r.Resource, Sensor: r.Sensor,
			Rate: r.Rate, HitsPS: r.HitsPerSec, RejectedPS: perSec(r.Rejected, prev.rules[k]), Input: r.Input,
			SensorError: r.SensorError})
	}
	h.prev = cur
	return smp
}

// sampleClass returns a class's sample and what the next sample needs of
// it, given the classes of the previous sample.
func sampleClass(c *stage.ClassState, prevs map[classKey]classPrev, k classKey) (SampleClass, classPrev) {
	tot := c.ClassTotals
	cp := classPrev{totals: tot}
	sc := SampleClass{Name: c.Name, Totals: tot}
	if c.Last != nil {
		cp.end = c.Last.End
		sc.Last = periodNumbers(c.Last)
	}
	old, had := prevs[k]
	switch {
	case c.Last == nil:
	case had && !cp.end.After(old.end) && tot.Offered >= old.totals.Offered:
		// No period ended since the previous sample: the rates
		// of the last periods still stand.
		cp.rates = old.rates
	case had && !old.end.IsZero() && tot.Offered >= old.totals.Offered && tot.Completed >= old.totals.Completed:
		// The periods that ended since: totals over their span.
		span := cp.end.Sub(old.end).Seconds()
		d := func(a, b uint64) float64 { return float64(a-min(a, b)) / span }
		cp.rates = ClassRates{Offered: d(tot.Offered, old.totals.Offered), Admitted: d(tot.Admitted, old.totals.Admitted),
			Rejected: d(tot.Rejected, old.totals.Rejected), ShadowRejected: d(tot.ShadowRejected, old.totals.ShadowRejected),
			Completed: d(tot.Completed, old.totals.Completed), Errors: d(tot.Errors, old.totals.Errors)}
	default:
		// First sight of the class, or a stage rebuilt by a
		// reload: the last period alone (errors are not in it).
		if sec := c.Last.Elapsed.Seconds(); sec > 0 {
			cp.rates = ClassRates{Offered: c.Last.Offered / sec, Admitted: c.Last.Admitted / sec,
				Rejected: c.Last.Rejected / sec, Completed: c.Last.Completed / sec}
		}
	}
	sc.Rates = cp.rates
	return sc, cp
}

// newDecisions returns the decisions of ds (oldest first) taken after the
// newest one seen for key, at most sampleDecisions of them.
func (h *history) newDecisions(key string, ds []stage.DecisionState) []stage.DecisionState {
	last := h.lastDecs[key]
	var out []stage.DecisionState
	for _, d := range ds {
		if d.At.After(last) {
			out = append(out, d)
		}
	}
	if len(ds) > 0 {
		h.lastDecs[key] = ds[len(ds)-1].At
	}
	if len(out) > sampleDecisions {
		out = out[len(out)-sampleDecisions:]
	}
	return out
}

// The page shows every numeric field of a stage's /state entry beside
// its setting and quality, of a class's last period and of the policer's,
// each under its JSON name (a dotted path inside the entry): these
// functions list them field by field, from the typed values. The tests
// (numbers_test.go) hold each equal to the JSON form of a value with
// every field set, so that a field added to stage.State, stage.Period or
// PolicerPeriod is either added here or fails them. Like that JSON form,
// which has no NaN or infinity, a value with a number that is not finite
// has no numbers at all.

// stageNumbers returns the numeric fields of a stage's /state entry
// outside its setting, quality, class rates, classes and decisions, by
// JSON path: concurrency.* (the concurrency limit's occupancy) and
// estimates.* (the controller's own estimates); nil when there are none.
func stageNumbers(st *stage.State) map[string]float64 {
	if !finite(st.Setting) || !finite(st.Quality) || !finite(st.ClassRates...) {
		return nil
	}
	var out map[string]float64
	if c := st.InFlightLimited; c != nil {
		if !finite(c.MaxWaitSeconds, c.Drain) {
			return nil
		}
		out = make(map[string]float64, 5+len(st.Estimates))
		out["concurrency.limit"] = float64(c.Limit)
		out["concurrency.in_flight"] = float64(c.InFlight)
		out["concurrency.queued"] = float64(c.Queued)
		out["concurrency.max_wait_s"] = c.MaxWaitSeconds
		out["concurrency.drain_rps"] = c.Drain
	}
	if p := st.Priority; p != nil {
		if !finite(p.Reserve) {
			return nil
		}
		if out == nil {
			out = make(map[string]float64, 1+len(st.Estimates))
		}
		out["priority.reserve"] = p.Reserve
	}
	// Counters of auto's guardrail and fair queueing, when not zero.
	if st.MaxRejectAdmitted > 0 || st.TenantsQueued > 0 {
		if out == nil {
			out = make(map[string]float64, 2+len(st.Estimates))
		}
		if st.MaxRejectAdmitted > 0 {
			out["max_reject_admitted"] = float64(st.MaxRejectAdmitted)
		}
		if st.TenantsQueued > 0 {
			out["tenants_queued"] = float64(st.TenantsQueued)
		}
	}
	for k, v := range st.Estimates {
		if !finite(v) {
			return nil
		}
		out = putNamed(out, "estimates.", k, v)
	}
	// The cost fair queueing estimates per tenant, and the hog rule's
	// cancellations by reason.
	for k, v := range st.TenantCosts {
		if !finite(v) {
			return nil
		}
		out = putNamed(out, "tenant_cost_s.", k, v)
	}
	for k, v := range st.HogCancelled {
		out = putNamed(out, "hog_cancelled.", k, float64(v))
	}
	return out
}

// putNamed sets out[prefix+name] = v, making out if it is nil. Names
// come from the controller or the stage: one in nanoseconds (…elapsed_ns)
// is shown in milliseconds, as a period's elapsed time is.
func putNamed(out map[string]float64, prefix, name string, v float64) map[string]float64 {
	if out == nil {
		out = make(map[string]float64, 8)
	}
	if base, ok := strings.CutSuffix(name, "elapsed_ns"); ok {
		out[prefix+base+"elapsed_ms"] = v / 1e6
		return out
	}
	out[prefix+name] = v
	return out
}

// periodNumbers returns the numeric fields of a class's last period by
// JSON name, its elapsed time in milliseconds (elapsed_ms).
func periodNumbers(p *stage.Period) map[string]float64 {
	return lastNumbers(p.Elapsed, "utilization", p.Utilization, []namedNumber{
		{"offered", p.Offered}, {"admitted", p.Admitted}, {"rejected", p.Rejected},
		{"completed", p.Completed}, {"samples", float64(p.Samples)},
		{"mean_ms", p.MeanMS}, {"p50_ms", p.P50MS}, {"p90_ms", p.P90MS}, {"p99_ms", p.P99MS},
		{"queue", p.Queue}, {"throughput_rps", p.ThroughputPS},
	})
}

// policerNumbers returns the numeric fields of the policer's last period
// by the JSON names of the proxy's /state, its elapsed time in
// milliseconds (elapsed_ms).
func policerNumbers(p *PolicerPeriod) map[string]float64 {
	return lastNumbers(p.Elapsed, "utilization_percent", p.Utilization, []namedNumber{
		{"hits_per_second", p.HitsPerSec}, {"admitted", p.Admitted}, {"rejected", p.Rejected}, {"queue", p.Queue},
	})
}

// namedNumber is one numeric field of a period and its JSON name.
type namedNumber struct {
	name string
	v    float64
}

// lastNumbers returns a period's fields by name, with elapsed in
// milliseconds (elapsed_ms) and, when util is not nil, *util under
// utilName; it returns nil when any value is NaN or infinite, which JSON
// cannot carry.
func lastNumbers(elapsed time.Duration, utilName string, util *float64, fields []namedNumber) map[string]float64 {
	out := make(map[string]float64, len(fields)+2)
	for _, f := range fields {
		if !finite(f.v) {
			return nil
		}
		out[f.name] = f.v
	}
	if util != nil {
		if !finite(*util) {
			return nil
		}
		out[utilName] = *util
	}
	out["elapsed_ms"] = float64(elapsed) / 1e6
	return out
}

// finite reports whether every x is neither NaN nor infinite.
func finite(xs ...float64) bool {
	for _, x := range xs {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return false
		}
	}
	return true
}

// SPDX-License-Identifier: Apache-2.0

package stage

import (
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/control"
)

// Hog is the rule by which a stage cancels requests while they are in
// service: what admission control cannot see coming, a request that
// turns out to hold its slot far longer than the others. The caller of
// an admitted request hands its cancellation to the stage
// (Ticket.Watch: live, the request context's cancel); at every control
// step (Step) the stage calls it, with a *HogError as the cause, for the
// requests the rule names, and counts them by reason (State.HogCancelled,
// sluice_hog_cancelled_total). The handler sees its context end and
// stops; the proxy cancels the upstream exchange; either answers the
// request explicitly (503 with Retry-After; gRPC RESOURCE_EXHAUSTED). The
// zero value cancels nothing.
//
// Two rules, each off unless set:
//
//   - MaxService: a request still in service MaxService after it got its
//     slot is cancelled (reason "max_service_time").
//   - OverShare: the policy of Atropos (Liu et al., "Mitigating
//     Application Resource Overload with Targeted Task Cancellation",
//     SOSP 2025): when requests are overloading a resource, cancel the
//     few that hog it rather than shed the many they block. Atropos
//     watches an application's internal resources (locks, buffer pools,
//     queues) and cancels the task whose usage, weighed by the demand it
//     has left, does the most harm; a stage sees one resource, its
//     concurrency slots, and the tenants that hold them. So: while
//     others wait (the queue holds a waiter, or the last step refused
//     requests), at every step the tenant holding the most slots beyond
//     its weighted fair share of the limit, L·w_t/Σw (over the tenants
//     in service or waiting), loses its longest-running request, if that
//     one has been in service at least MinService (reason "over_share").
//     One request per step: as Atropos, cancel the top culprit and look
//     again. It needs fair queueing (Tenants.Fair): the share is the
//     fair queue's.
//
// The rules are checked at every control step (auto: every 100 ms), so
// a request runs up to one period past MaxService. A stream (a request
// that became long-lived) is never a hog.
type Hog struct {
	// MaxService is the longest a request may hold its slot (0: no
	// limit).
	MaxService time.Duration
	// OverShare turns Atropos's policy on.
	OverShare bool
	// MinService is the least time in service of a request OverShare
	// cancels: one that has not yet missed it is not a hog. Default: the
	// controller's response-time target (auto: its SLO); a controller
	// without one needs it set.
	MinService time.Duration
}

// Reasons of a hog cancellation (HogError.Reason).
const (
	HogMaxService = "max_service_time"
	HogOverShare  = "over_share"
)

// HogReasons lists the reasons, in the order of State.HogCancelled.
var HogReasons = []string{HogMaxService, HogOverShare}

// HogError is the cause with which the hog rule cancels a request
// (context.Cause of its context). It wraps sluice.ErrHog.
type HogError struct {
	// Stage is the stage's name, Reason HogMaxService or HogOverShare,
	// Ran the time the request had been in service.
	Stage, Reason string
	Ran           time.Duration
}

func (e *HogError) Error() string {
	return fmt.Sprintf("stage %q: request cancelled after %v in service (%s)", e.Stage, e.Ran.Round(time.Millisecond), e.Reason)
}

// Unwrap returns sluice.ErrHog.
func (e *HogError) Unwrap() error { return sluice.ErrHog }

// check refuses negative durations of a rule that is off.
func (h Hog) check() error {
	if h.MaxService < 0 || h.MinService < 0 {
		return fmt.Errorf("hog durations %v, %v must be ≥ 0", h.MaxService, h.MinService)
	}
	return nil
}

// enabled reports whether the rule cancels anything.
func (h Hog) enabled() bool { return h.MaxService > 0 || h.OverShare }

// resolve checks h against the stage's controller and fairness, and
// fills MinService's default.
func (h Hog) resolve(c sluice.Controller, fair bool) (Hog, error) {
	if h.MaxService < 0 {
		return h, fmt.Errorf("hog max service %v must be ≥ 0", h.MaxService)
	}
	if h.MinService < 0 {
		return h, fmt.Errorf("hog min service %v must be ≥ 0", h.MinService)
	}
	if !h.OverShare {
		return h, nil
	}
	if !fair {
		return h, fmt.Errorf("hog over_share needs fair queueing among tenants (its share is the fair queue's)")
	}
	if h.MinService == 0 {
		t, ok := c.(control.Targeted)
		if !ok || t.Target() <= 0 {
			return h, fmt.Errorf("hog over_share needs a min service time: controller %s has no response-time target", c.Current().Controller)
		}
		h.MinService = t.Target()
	}
	return h, nil
}

// watch returns the watch of rule h on a stage with controller c (fair:
// its fair queue among tenants is a concurrency limit's), or nil when h
// cancels nothing.
func (h Hog) watch(c sluice.Controller, fair bool) (*hogWatch, error) {
	if !h.enabled() {
		return nil, h.check()
	}
	r, err := h.resolve(c, fair)
	if err != nil {
		return nil, err
	}
	return newHogWatch(r), nil
}

// hogReq is a watched request in service.
type hogReq struct {
	start  time.Time
	tenant string
	cancel func(cause error)
}

// hogWatch is a stage's hog rule and the requests it watches.
type hogWatch struct {
	rule Hog
	next atomic.Uint64
	mu   sync.Mutex
	reqs map[uint64]*hogReq
	// cancelled counts the cancellations by reason (HogReasons' order).
	cancelled [2]atomic.Uint64
}

func newHogWatch(h Hog) *hogWatch { return &hogWatch{rule: h, reqs: make(map[uint64]*hogReq)} }

// id returns a new watch id (never 0).
func (w *hogWatch) id() uint64 { return w.next.Add(1) }

// Watch hands the stage the cancellation of the ticket's request, for
// its hog rule (Hog): the stage calls cancel, once, with a *HogError,
// when the rule names the request while it is in service. It does
// nothing on a stage without a hog rule, and after the request left
// service. cancel is called from the goroutine of the stage's step,
// with no lock of the stage held, and must not block.
func (t Ticket) Watch(cancel func(cause error)) {
	s := t.s
	if s == nil || s.hog == nil || t.hog == 0 || cancel == nil {
		return
	}
	w := s.hog
	w.mu.Lock()
	w.reqs[t.hog] = &hogReq{start: t.start, tenant: t.tenant, cancel: cancel}
	w.mu.Unlock()
}

// forget stops watching request id (it left service).
func (w *hogWatch) forget(id uint64) {
	w.mu.Lock()
	delete(w.reqs, id)
	w.mu.Unlock()
}

// hogVictim is one cancellation to make.
type hogVictim struct {
	cancel func(error)
	err    *HogError
}

// hogs returns the requests the rule names at now, counted and no longer
// watched; refused says the last step refused requests. The caller
// cancels them with no lock held.
func (s *Stage) hogs(now time.Time, refused bool) []hogVictim {
	w := s.hog
	if w == nil {
		return nil
	}
	var out []hogVictim
	w.mu.Lock()
	defer w.mu.Unlock()
	if max := w.rule.MaxService; max > 0 {
		for id, r := range w.reqs {
			if ran := now.Sub(r.start); ran >= max {
				out = append(out, hogVictim{r.cancel, &HogError{Stage: s.name, Reason: HogMaxService, Ran: ran}})
				delete(w.reqs, id)
				w.cancelled[0].Add(1)
			}
		}
	}
	if w.rule.OverShare {
		if id, ran, ok := s.overShare(now, refused); ok {
			r := w.reqs[id]
			out = append(out, hogVictim{r.cancel, &HogError{Stage: s.name, Reason: HogOverShare, Ran: ran}})
			delete(w.reqs, id)
			w.cancelled[1].Add(1)
		}
	}
	return out
}

// overShare picks, under w.mu, Atropos's victim at now (see Hog): the
// longest-running request, in service at least MinService, of the
// tenant furthest over its fair share of the limit, while others wait.
func (s *Stage) overShare(now time.Time, refused bool) (id uint64, ran time.Duration, ok bool) {
	c := s.conc
	if c == nil || c.fair == nil {
		return 0, 0, false
	}
	type held struct {
		n       int
		longest uint64
		ran     time.Duration
	}
	tenants := map[string]*held{}
	for rid, r := range s.hog.reqs {
		h := tenants[r.tenant]
		if h == nil {
			h = &held{}
			tenants[r.tenant] = h
		}
		h.n++
		if d := now.Sub(r.start); d >= s.hog.rule.MinService && (d > h.ran || d == h.ran && rid < h.longest) {
			h.longest, h.ran = rid, d
		}
	}
	c.mu.Lock()
	waiting := c.slots.QueueLen() > 0
	limit := float64(c.setLimit)
	weights := map[string]float64{}
	for k := range c.fair.flows {
		weights[k.tenant] = c.fair.weight(k.tenant)
	}
	for t := range tenants {
		weights[t] = c.fair.weight(t)
	}
	c.mu.Unlock()
	if !waiting && !refused {
		return 0, 0, false
	}
	total := 0.0
	for _, w := range weights {
		total += w
	}
	names := make([]string, 0, len(tenants))
	for t := range tenants {
		names = append(names, t)
	}
	over := func(t string) float64 { return float64(tenants[t].n) - limit*weights[t]/total }
	sort.Slice(names, func(i, j int) bool {
		a, b := over(names[i]), over(names[j])
		return a > b || a == b && names[i] < names[j]
	})
	for _, t := range names {
		if over(t) <= 0 {
			break
		}
		if h := tenants[t]; h.longest != 0 {
			return h.longest, h.ran, true
		}
	}
	return 0, 0, false
}

// HogRule returns the stage's hog rule in force (its defaults filled),
// the zero Hog when it has none: a caller watches its requests
// (Ticket.Watch) when it is not zero.
func (s *Stage) HogRule() Hog {
	if s.hog == nil {
		return Hog{}
	}
	return s.hog.rule
}

// HogCancelled returns the requests the hog rule cancelled since start,
// by reason (HogReasons), or nil for a stage without a hog rule.
func (s *Stage) HogCancelled() map[string]uint64 {
	if s.hog == nil {
		return nil
	}
	out := make(map[string]uint64, len(HogReasons))
	for i, r := range HogReasons {
		out[r] = s.hog.cancelled[i].Load()
	}
	return out
}

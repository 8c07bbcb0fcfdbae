// SPDX-License-Identifier: Apache-2.0

package control

import (
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/control/auto"
)

// Resource names a critical resource of Voigt & Gunningberg's resource
// rules (the proxy's resources section): the sensor that measures it
// feeds the controller of the stage the rule binds.
type Resource string

// The resources a rule can bind.
const (
	// ResourceCPU is a CPU rule: its sensor is a utilization in [0, 1]
	// (Measurements.Utilization).
	ResourceCPU Resource = "cpu"
	// ResourceBandwidth is an outgoing-bandwidth rule: its sensor is the
	// normalised outgoing queue (Measurements.Queue).
	ResourceBandwidth Resource = "bandwidth"
)

// Need says how a controller uses an input.
type Need uint8

const (
	// NeedNone: the runtime does not give it the input.
	NeedNone Need = iota
	// NeedOptional: the runtime gives it the input when it has one; the
	// controller works without it.
	NeedOptional
	// NeedRequired: without the input the controller holds its setting
	// (the runtime warns).
	NeedRequired
)

// Needs is what a controller needs from where it runs. The proxy and the
// policy wire a stage from it, never from the controller's name, so that a
// new controller is added in this package (its config, its registry entry
// and, when it needs more than the zero Needs, a Needs method) and its
// tests only. The zero value needs nothing: the runtime's own queue length
// (the proxy's backend wait queue) as Measurements.Queue, no utilization.
type Needs struct {
	// Utilization says whether the stage gets the runtime's utilization
	// sensor (the proxy's top-level utilization section) as
	// Measurements.Utilization.
	Utilization Need
	// OwnQueue: the stage's queue signal (Measurements.Queue, and the
	// queue /state shows) is the length of the stage's own wait queue,
	// not the runtime's: a fixed concurrency limit with its queue, as
	// HAProxy's maxconn. The adaptive limits (auto, gradient2,
	// envoy-gradient, bbr) do not read Measurements.Queue and report the
	// runtime's.
	OwnQueue bool
	// Resources are the resource rules whose sensor may drive the
	// controller.
	Resources []Resource
	// SplitBudget: the controller's setting is a fixed budget (Static)
	// that cluster mode may split across instances.
	SplitBudget bool
	// Quota: the controller's setting is a fixed request rate, a quota
	// the IETF RateLimit header fields can advertise (a stage's
	// ratelimit_headers).
	Quota bool
	// PriorityOptIn: the controller's paper defines its own classes (SEDA)
	// or none (Yaksha, Andersson & Kihl, Voigt & Gunningberg), so its
	// stage sheds the lowest priority first only when asked to
	// (stage.Priority, a stage's priority.shed), and the paper's law is
	// unchanged by default. Every other controller's stage sheds by
	// priority unless told not to.
	PriorityOptIn bool
	// Overtakes: the controller reads Measurements.Parallel, which the
	// stage measures by a lock and a sequence number per request in
	// service (auto with knee "overtakes").
	Overtakes bool
	// OvertakeTolerance is the most by which the order the stage sees
	// may differ from the service's (auto.Config.KneeTolerance; see the
	// stage's overtake meter).
	OvertakeTolerance time.Duration
	// ServiceTail: the controller reads Measurements.ServiceTailP99, the
	// p99 of every completion's service time regardless of fences (auto's
	// R̂99).
	ServiceTail bool
}

// Binds reports whether a rule on resource r may drive the controller.
func (n Needs) Binds(r Resource) bool { return slices.Contains(n.Resources, r) }

// needer is implemented by the configs whose controllers need more than
// the zero Needs.
type needer interface{ Needs() Needs }

// NeedsOf returns what the controller of cfg needs (the zero Needs when
// cfg does not say; nil needs nothing).
func NeedsOf(cfg Config) Needs {
	switch c := cfg.(type) {
	case needer:
		return c.Needs()
	case *auto.Config:
		return autoNeeds(c)
	}
	return Needs{}
}

// NamesWhere returns the registered controller names, sorted, whose needs
// satisfy keep; for messages such as "a cpu rule needs controller kihl or
// voigt-cpu".
func NamesWhere(keep func(Needs) bool) []string {
	var out []string
	for _, name := range Names() {
		if keep(NeedsOf(registry[name]())) {
			out = append(out, name)
		}
	}
	return out
}

// orList joins names as "a", "a or b", "a, b or c".
func orList(names []string) string {
	switch len(names) {
	case 0:
		return "(none)"
	case 1:
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// NamesWhereText is NamesWhere joined for a message: "kihl or voigt-cpu".
func NamesWhereText(keep func(Needs) bool) string { return orList(NamesWhere(keep)) }

// Needs: Andersson & Kihl's PI controller steers the utilization a CPU
// rule's sensor (or the runtime's) measures; without one it holds.
func (c *KihlConfig) Needs() Needs {
	return Needs{Utilization: NeedRequired, Resources: []Resource{ResourceCPU}, PriorityOptIn: true}
}

// Needs: as KihlConfig's.
func (c *KihlAutoConfig) Needs() Needs { return c.Base.Needs() }

// Needs: Voigt & Gunningberg's CPU rule steers the utilization; without one
// it holds.
func (c *VoigtCPUConfig) Needs() Needs {
	return Needs{Utilization: NeedRequired, Resources: []Resource{ResourceCPU}, PriorityOptIn: true}
}

// Needs: Voigt & Gunningberg's queue rule steers the queue (the pool's,
// or a bandwidth rule's outgoing queue) and reads the utilization, when
// there is one, to refuse increases while the CPU is at its reference.
func (c *VoigtQueueConfig) Needs() Needs {
	return Needs{Utilization: NeedOptional, Resources: []Resource{ResourceBandwidth}, PriorityOptIn: true}
}

// Needs: kratos/aegis BBR's CPU condition reads the runtime's
// utilization when it has one (a container-aware cgroup reading where
// configured); without one the condition counts as met.
func (c *BBRConfig) Needs() Needs { return Needs{Utilization: NeedOptional} }

// Needs: SEDA's paper has classes of its own (one rate per class, lower
// classes cut first); by priority otherwise only when asked.
func (c *SEDAConfig) Needs() Needs { return Needs{PriorityOptIn: true} }

// Needs: Yaksha's paper has one drop probability for every request; by
// priority only when asked.
func (c *YakshaConfig) Needs() Needs { return Needs{PriorityOptIn: true} }

// Needs: a fixed rate is a budget cluster mode may split.
func (c *StaticRateConfig) Needs() Needs { return Needs{SplitBudget: true, Quota: true} }

// Needs: a fixed concurrency limit waits in its own queue and is a budget
// cluster mode may split.
func (c *StaticConcurrencyConfig) Needs() Needs { return Needs{OwnQueue: true, SplitBudget: true} }

// Besides what it needs, a controller says two things about itself for
// readers of its state (the dashboard), so that no switch on controller
// types lives outside this package: which statistic its response-time
// target holds, and its most restrictive setting.

// objective is implemented by controllers whose target holds a named
// statistic.
type objective interface{ Objective() string }

// ObjectiveOf returns the statistic c's response-time target holds:
// "p90" (seda, with or without degradation), "mean" (yaksha), "target"
// for another controller with a target (Targeted), "" for one without.
func ObjectiveOf(c sluice.Controller) string {
	switch c := c.(type) {
	case objective:
		return c.Objective()
	case Targeted:
		return "target"
	}
	return ""
}

// Objective: SEDA holds the 90th percentile.
func (s *SEDA) Objective() string { return "p90" }

// Objective: degradation runs SEDA's controller on the 90th percentile.
func (d *Degrader) Objective() string { return "p90" }

// Objective: Yaksha holds the mean.
func (y *Yaksha) Objective() string { return "mean" }

// floorer is implemented by the configs of controllers whose setting has a
// configured most restrictive value.
type floorer interface{ Floor() float64 }

// FloorOf returns the most restrictive setting cfg's controller can reach
// — the lowest rate of a rate controller, the highest drop probability of
// yaksha, auto's min_limit — and whether it has one (a static controller,
// whose setting never moves, has none; nor do gradient2, envoy-gradient
// and bbr, whose limits rest at or start from their minimum in normal
// operation, so that sitting there tells nothing).
func FloorOf(cfg Config) (float64, bool) {
	if f, ok := cfg.(floorer); ok {
		return f.Floor(), true
	}
	return 0, false
}

// Floor: rate_min.
func (c *SEDAConfig) Floor() float64 { return c.RateMin }

// Floor: min_rate.
func (c *VoigtCPUConfig) Floor() float64 { return c.MinRate }

// Floor: min_rate.
func (c *VoigtQueueConfig) Floor() float64 { return c.MinRate }

// Floor: Kihl's rate can reach 0.
func (c *KihlConfig) Floor() float64 { return 0 }

// Floor: max_drop, the most yaksha drops.
func (c *YakshaConfig) Floor() float64 { return c.MaxDrop }

// autoNeeds: auto reads Measurements.ServiceTailP99 for R̂99, and with
// knee "overtakes" Measurements.Parallel. Its config is in package
// control/auto, which this package imports for the registry and which
// therefore cannot name Needs: its needs are stated here.
func autoNeeds(c *auto.Config) Needs {
	return Needs{Overtakes: c.Knee == auto.KneeOvertakes, OvertakeTolerance: c.KneeTolerance, ServiceTail: true}
}
